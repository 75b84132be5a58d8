package disk

import (
	"fmt"
	"sync"

	"github.com/xtsctl/xtsctl/sector"
)

// A Codec encrypts and decrypts runs of whole sectors of one extent:
// sector first of the run is the extent's sector first, whose tweak (or
// IV) its sector.Params give. *sector.Codec is the AES-XTS one.
type Codec interface {
	Encrypt(dst, src []byte, first uint64)
	Decrypt(dst, src []byte, first uint64)
	SetWorkers(n int)
	Wipe()
}

// A CipherFunc makes a Codec for a key and an extent's tweak rule.
type CipherFunc func(key []byte, p sector.Params) (Codec, error)

// XTSPlain64 is dm-crypt's AES-XTS with plain64 tweaks: the cipher of
// every format but a few of BitLocker's.
const XTSPlain64 = "aes-xts-plain64"

var ciphers = struct {
	sync.RWMutex
	m map[string]CipherFunc
}{m: map[string]CipherFunc{
	XTSPlain64: func(key []byte, p sector.Params) (Codec, error) { return sector.NewCodecKey(key, p) },
}}

// RegisterCipher adds a data cipher, by its dm-crypt name, for a format
// that needs one beyond AES-XTS. It panics if the name is taken.
func RegisterCipher(name string, f CipherFunc) {
	ciphers.Lock()
	defer ciphers.Unlock()
	if ciphers.m[name] != nil {
		panic("disk: cipher " + name + " registered twice")
	}
	ciphers.m[name] = f
}

// NewCodec returns a Codec of the named cipher.
func NewCodec(cipher string, key []byte, p sector.Params) (Codec, error) {
	ciphers.RLock()
	f := ciphers.m[cipher]
	ciphers.RUnlock()
	if f == nil {
		return nil, WithKind(KindInput, fmt.Errorf("cipher %s: %w", cipher, ErrUnsupported))
	}
	return f(key, p)
}
