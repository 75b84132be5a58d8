package fvault2

import (
	"crypto/aes"
	"crypto/subtle"
	"encoding/binary"
	"errors"

	"github.com/xtsctl/xtsctl/internal/secret"
)

// RFC 3394 AES key wrap (NIST SP 800-38F "KW" with the default IV),
// which FileVault 2 uses for the KEK and the volume key. x/crypto has no
// implementation.

// kwIV is the RFC's default initial value.
var kwIV = [8]byte{0xA6, 0xA6, 0xA6, 0xA6, 0xA6, 0xA6, 0xA6, 0xA6}

// errUnwrap: the integrity check failed (a wrong key or a damaged blob).
var errUnwrap = errors.New("key unwrap: integrity check failed")

// unwrapKey undoes RFC 3394 §2.2.2 (the index-based form): wrapped is
// n+1 64-bit blocks (n ≥ 2), kek an AES key. The recovered IV is compared
// with the default one in constant time; on a mismatch nothing is
// returned.
func unwrapKey(kek, wrapped []byte) ([]byte, error) {
	if len(wrapped)%8 != 0 || len(wrapped) < 24 {
		return nil, errors.New("key unwrap: the wrapped key is not 3 or more 64-bit blocks")
	}
	block, err := aes.NewCipher(kek)
	if err != nil {
		return nil, err
	}
	defer secret.WipeObject(block) // crypto/aes has no call for it
	n := len(wrapped)/8 - 1
	var b [16]byte // A | R[i], decrypted in place
	copy(b[:8], wrapped[:8])
	r := make([]byte, 8*n)
	copy(r, wrapped[8:])
	for j := 5; j >= 0; j-- {
		for i := n; i >= 1; i-- {
			t := uint64(n*j + i)
			binary.BigEndian.PutUint64(b[:8], binary.BigEndian.Uint64(b[:8])^t)
			copy(b[8:], r[8*(i-1):8*i])
			block.Decrypt(b[:], b[:])
			copy(r[8*(i-1):8*i], b[8:])
		}
	}
	ok := subtle.ConstantTimeCompare(b[:8], kwIV[:]) == 1
	clear(b[:])
	if !ok {
		clear(r)
		return nil, errUnwrap
	}
	return r, nil
}
