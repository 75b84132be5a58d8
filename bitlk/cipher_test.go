package bitlk

import (
	"bytes"
	"crypto/aes"
	"encoding/binary"
	"math/bits"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/xtsctl/xtsctl/disk"
	"github.com/xtsctl/xtsctl/sector"
)

// The diffusers as the fact sheet states them: one plain loop per pass,
// every index modulo n. The fast versions must agree with them.
func refADecrypt(d []uint32) {
	n := len(d)
	for range 5 {
		for i := range n {
			d[i] += d[(i-2+n)%n] ^ bits.RotateLeft32(d[(i-5+n)%n], [4]int{9, 0, 13, 0}[i%4])
		}
	}
}

func refBDecrypt(d []uint32) {
	n := len(d)
	for range 3 {
		for i := range n {
			d[i] += d[(i+2)%n] ^ bits.RotateLeft32(d[(i+5)%n], [4]int{0, 10, 0, 25}[i%4])
		}
	}
}

func randWords(r *rand.Rand, n int) []uint32 {
	w := make([]uint32, n)
	for i := range w {
		w[i] = r.Uint32()
	}
	return w
}

func TestDiffusers(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{128, 256, 512, 1024} {
		for range 20 {
			in := randWords(r, n)
			a, ref := slices.Clone(in), slices.Clone(in)
			diffuserADecrypt(a)
			refADecrypt(ref)
			if !slices.Equal(a, ref) {
				t.Fatalf("n=%d: diffuser A decryption differs from the plain loops", n)
			}
			diffuserAEncrypt(a)
			if !slices.Equal(a, in) {
				t.Fatalf("n=%d: diffuser A encryption does not undo its decryption", n)
			}
			b, ref := slices.Clone(in), slices.Clone(in)
			diffuserBDecrypt(b)
			refBDecrypt(ref)
			if !slices.Equal(b, ref) {
				t.Fatalf("n=%d: diffuser B decryption differs from the plain loops", n)
			}
			diffuserBEncrypt(b)
			if !slices.Equal(b, in) {
				t.Fatalf("n=%d: diffuser B encryption does not undo its decryption", n)
			}
			if slices.Equal(a, ref) {
				t.Fatal("a diffuser changed nothing")
			}
		}
	}
}

// refDecryptSector decrypts one sector at byte offset off the long way:
// the IV and the sector key from crypto/aes block by block, CBC by hand,
// the plain diffuser loops.
func refDecryptSector(t *testing.T, key []byte, elephant bool, off uint64, ct []byte) []byte {
	t.Helper()
	ck := key
	var dk []byte
	if elephant {
		ck, dk = key[:len(key)/2], key[len(key)/2:]
	}
	cb, err := aes.NewCipher(ck)
	if err != nil {
		t.Fatal(err)
	}
	var iv [16]byte
	binary.LittleEndian.PutUint64(iv[:], off)
	cb.Encrypt(iv[:], iv[:])
	pt := make([]byte, len(ct))
	prev := iv[:]
	for i := 0; i < len(ct); i += 16 {
		cb.Decrypt(pt[i:i+16], ct[i:i+16])
		for j := range 16 {
			pt[i+j] ^= prev[j]
		}
		prev = ct[i : i+16]
	}
	if !elephant {
		return pt
	}
	w := make([]uint32, len(pt)/4)
	for i := range w {
		w[i] = binary.LittleEndian.Uint32(pt[4*i:])
	}
	refBDecrypt(w)
	refADecrypt(w)
	for i := range w {
		binary.LittleEndian.PutUint32(pt[4*i:], w[i])
	}
	db, err := aes.NewCipher(dk)
	if err != nil {
		t.Fatal(err)
	}
	var e, ks [32]byte
	binary.LittleEndian.PutUint64(e[:], off)
	db.Encrypt(ks[:16], e[:16])
	e[15] = 0x80
	db.Encrypt(ks[16:], e[:16])
	for i := range pt {
		pt[i] ^= ks[i%32]
	}
	return pt
}

// TestCBCCodecs: the registered codecs decrypt runs of sectors as the
// long way does sector by sector, at dm-crypt's IV numbers for both sector
// sizes (the byte offset is the IV number times the sector size), over
// several cores or one, and encryption undoes decryption.
func TestCBCCodecs(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for _, tc := range []struct {
		cipher   string
		keyLen   int
		elephant bool
	}{
		{CipherCBCEBOIV, 16, false}, {CipherCBCEBOIV, 32, false},
		{CipherCBCElephant, 32, true}, {CipherCBCElephant, 64, true},
	} {
		for _, ss := range []int{512, 4096} {
			p := sector.Params{Size: ss, IVOffset: 8 * 12345}
			if ss == 4096 {
				p.IVMode = sector.Plain64LargeSectors
			}
			key := make([]byte, tc.keyLen)
			for i := range key {
				key[i] = byte(r.Uint32())
			}
			c, err := disk.NewCodec(tc.cipher, key, p)
			if err != nil {
				t.Fatal(err)
			}
			const sectors = 40
			ct := make([]byte, sectors*ss)
			for i := range ct {
				ct[i] = byte(r.Uint32())
			}
			const first = 7
			for _, workers := range []int{1, 2} {
				c.SetWorkers(workers)
				pt := make([]byte, len(ct))
				c.Decrypt(pt, ct, first)
				for s := range sectors {
					off := p.Tweak(first+uint64(s)) * uint64(ss)
					if want := refDecryptSector(t, key, tc.elephant, off, ct[s*ss:(s+1)*ss]); !bytes.Equal(pt[s*ss:(s+1)*ss], want) {
						t.Fatalf("%s %d-bit, %d-byte sectors, %d workers: sector %d differs from the long way", tc.cipher, 8*tc.keyLen, ss, workers, s)
					}
				}
				back := slices.Clone(pt)
				c.Encrypt(back, back, first)
				if !bytes.Equal(back, ct) {
					t.Fatalf("%s %d-bit, %d-byte sectors: encryption does not undo decryption", tc.cipher, 8*tc.keyLen, ss)
				}
			}
			c.Wipe()
		}
	}
	if _, err := disk.NewCodec(CipherCBCEBOIV, make([]byte, 24), sector.Params{Size: 512}); err == nil {
		t.Error("a 24-byte key was taken for AES-CBC-EBOIV")
	}
	if _, err := disk.NewCodec(CipherCBCElephant, make([]byte, 16), sector.Params{Size: 512}); err == nil {
		t.Error("a 16-byte key was taken for Elephant")
	}
}
