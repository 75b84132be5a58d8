package volume

import (
	"bytes"
	"context"
	"crypto/aes"
	"crypto/cipher"
	"io"
	"math/rand/v2"
	"os"
	"sync"
	"testing"
)

// Tests use tiny Argon2id costs: the costs are stored in each slot and
// checked by their own tests; the passphrase path is the same.
var testKDF = KDFParams{Time: 1, MemoryKiB: 64, Threads: 1}

func TestMain(m *testing.M) {
	SetTestKDF(testKDF)
	os.Exit(m.Run())
}

// memDevice is an in-memory Device that grows on write.
type memDevice struct {
	mu    sync.Mutex
	b     []byte
	syncs int
}

func (d *memDevice) ReadAt(p []byte, off int64) (int, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if off >= int64(len(d.b)) {
		return 0, io.EOF
	}
	n := copy(p, d.b[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

func (d *memDevice) WriteAt(p []byte, off int64) (int, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if end := off + int64(len(p)); end > int64(len(d.b)) {
		d.b = append(d.b, make([]byte, end-int64(len(d.b)))...)
	}
	return copy(d.b[off:], p), nil
}

func (d *memDevice) Sync() error {
	d.mu.Lock()
	d.syncs++
	d.mu.Unlock()
	return nil
}

func (d *memDevice) size() int64 { return int64(len(d.b)) }

func (d *memDevice) clone() *memDevice { return &memDevice{b: bytes.Clone(d.b)} }

var testPass = []byte("correct horse battery staple")

// newTestVolume creates a volume holding plaintext on a memDevice.
func newTestVolume(t testing.TB, plaintext []byte, sectorSize, tagSize, keySize int) (*memDevice, *Header) {
	t.Helper()
	dev := &memDevice{}
	h, _, err := Create(context.Background(), dev, bytes.NewReader(plaintext), int64(len(plaintext)),
		CreateOptions{SectorSize: sectorSize, TagSize: tagSize, KeySize: keySize, Label: "test", KDF: testKDF, Passphrase: testPass}, nil)
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	return dev, h
}

func openTest(t testing.TB, dev *memDevice, pass []byte, readOnly bool) (*Volume, error) {
	t.Helper()
	return OpenDevice(dev, dev.size(), readOnly, func(hs *Headers) ([]byte, int, error) { return hs.Unlock(pass) })
}

func mustOpen(t testing.TB, dev *memDevice, readOnly bool) *Volume {
	t.Helper()
	v, err := openTest(t, dev, testPass, readOnly)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	return v
}

func randomData(seed uint64, n int) []byte {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

func newAES(key []byte) (cipher.Block, error) { return aes.NewCipher(key) }

// retag rewrites the tag of sector n from its current ciphertext, as
// someone with the key and no regard for the protocol would.
func retag(t testing.TB, v *Volume, n uint64) {
	t.Helper()
	ct := make([]byte, v.l.SectorSize)
	if _, err := v.dev.ReadAt(ct, v.l.SectorOffset(n)); err != nil {
		t.Fatal(err)
	}
	tag := make([]byte, v.l.TagSize)
	v.sumTags(tag, ct, n)
	if _, err := v.dev.WriteAt(tag, v.l.TagPosition(n)); err != nil {
		t.Fatal(err)
	}
}
