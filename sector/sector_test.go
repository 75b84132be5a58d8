package sector

import (
	"bytes"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/xtsctl/xtsctl/xts"
)

func TestCheckSize(t *testing.T) {
	valid := map[int]bool{512: true, 1024: true, 2048: true, 4096: true}
	for _, n := range []int{-512, 0, 1, 16, 256, 511, 512, 513, 768, 1024, 1536, 2048, 3072, 4096, 4097, 8192, 1 << 20} {
		if err := CheckSize(n); (err == nil) != valid[n] {
			t.Errorf("CheckSize(%d) = %v", n, err)
		}
	}
}

// TestTweak pins the dm-crypt numbering verified against the kernel
// (see scripts/dmcrypt-check and docs): tweaks of the first sectors for each
// combination of sector size, iv_large_sectors and iv_offset.
func TestTweak(t *testing.T) {
	for _, tc := range []struct {
		p    Params
		want []uint64 // tweaks of sectors 0, 1, 2
	}{
		{Params{Size: 512}, []uint64{0, 1, 2}},
		{Params{Size: 4096}, []uint64{0, 8, 16}},
		{Params{Size: 1024}, []uint64{0, 2, 4}},
		{Params{Size: 4096, IVMode: Plain64LargeSectors}, []uint64{0, 1, 2}},
		{Params{Size: 2048, IVMode: Plain64LargeSectors}, []uint64{0, 1, 2}},
		{Params{Size: 512, IVOffset: 7}, []uint64{7, 8, 9}},
		{Params{Size: 4096, IVOffset: 16}, []uint64{16, 24, 32}},
		{Params{Size: 4096, IVOffset: 16, IVMode: Plain64LargeSectors}, []uint64{2, 3, 4}},
		// A large-sector iv_offset that is not a whole sector rounds down,
		// as the kernel's shift does: (3 + 8n) >> 3.
		{Params{Size: 4096, IVOffset: 3, IVMode: Plain64LargeSectors}, []uint64{0, 1, 2}},
		{Params{Size: 512, IVMode: Plain64LargeSectors, IVOffset: 5}, []uint64{5, 6, 7}},
		// 64-bit wrap-around: the kernel shifts the wrapped count.
		{Params{Size: 512, IVOffset: ^uint64(0)}, []uint64{^uint64(0), 0, 1}},
		{Params{Size: 4096, IVMode: Plain64LargeSectors, IVOffset: ^uint64(0)}, []uint64{1<<61 - 1, 0, 1}},
	} {
		for n, want := range tc.want {
			if got := tc.p.Tweak(uint64(n)); got != want {
				t.Errorf("%+v: Tweak(%d) = %d, want %d", tc.p, n, got, want)
			}
		}
	}
}

func newCodec(t testing.TB, key []byte, p Params) (*Codec, *xts.Cipher) {
	t.Helper()
	c, err := xts.NewCipher(key)
	if err != nil {
		t.Fatal(err)
	}
	s, err := NewCodec(c, p)
	if err != nil {
		t.Fatal(err)
	}
	return s, c
}

func randomBytes(r *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// TestCodecEqualsPerSector checks the batched, possibly parallel path
// against one xts.Encrypt per sector with the tweak computed independently,
// for every sector size and IV mode, across the parallel threshold.
func TestCodecEqualsPerSector(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 1))
	key := randomBytes(r, 64)
	for _, size := range []int{512, 1024, 2048, 4096} {
		for _, mode := range []IVMode{Plain64, Plain64LargeSectors} {
			for _, sectors := range []int{1, 3, parallelMin / size, parallelMin/size + 1, 5 * parallelMin / size} {
				p := Params{Size: size, IVMode: mode, IVOffset: uint64(r.IntN(64)) * 8}
				s, c := newCodec(t, key, p)
				s.SetWorkers(3) // more workers than cores: shares must still line up
				first := r.Uint64N(1 << 40)
				pt := randomBytes(r, size*sectors)
				want := make([]byte, len(pt))
				for i := range sectors {
					tweak := p.IVOffset + (first+uint64(i))*uint64(size/512)
					if mode == Plain64LargeSectors {
						tweak /= uint64(size / 512)
					}
					c.Encrypt(want[i*size:(i+1)*size], pt[i*size:(i+1)*size], tweak)
				}
				got := make([]byte, len(pt))
				s.Encrypt(got, pt, first)
				if !bytes.Equal(got, want) {
					t.Fatalf("size %d, %v, %d sectors: batch differs from per-sector encryption", size, mode, sectors)
				}
				s.Decrypt(got, got, first)
				if !bytes.Equal(got, pt) {
					t.Fatalf("size %d, %v, %d sectors: in-place decrypt failed", size, mode, sectors)
				}
			}
		}
	}
}

// TestConcurrentUse runs many goroutines on one Codec; with -race it also
// checks that the worker split shares no state.
func TestConcurrentUse(t *testing.T) {
	r := rand.New(rand.NewPCG(2, 2))
	s, _ := newCodec(t, randomBytes(r, 32), Params{Size: 4096})
	pt := randomBytes(r, 4*parallelMin)
	want := make([]byte, len(pt))
	s.Encrypt(want, pt, 9)
	done := make(chan []byte)
	for range 8 {
		go func() {
			got := make([]byte, len(pt))
			s.Encrypt(got, pt, 9)
			done <- got
		}()
	}
	for range 8 {
		if got := <-done; !bytes.Equal(got, want) {
			t.Fatal("concurrent encryption differs")
		}
	}
}

func TestNoAllocsSmallRuns(t *testing.T) {
	s, _ := newCodec(t, randomBytes(rand.New(rand.NewPCG(3, 3)), 64), Params{Size: 512})
	buf := make([]byte, 16*512)
	if a := testing.AllocsPerRun(20, func() { s.Encrypt(buf, buf, 1) }); a != 0 {
		t.Errorf("%v allocations per 16-sector call", a)
	}
}

func TestCodecRejects(t *testing.T) {
	c, err := xts.NewCipher(randomBytes(rand.New(rand.NewPCG(4, 4)), 64))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []Params{{Size: 256}, {Size: 8192}, {Size: 3000}, {Size: 512, IVMode: 7}} {
		if _, err := NewCodec(c, p); err == nil {
			t.Errorf("NewCodec(%+v) accepted", p)
		}
	}
	s, _ := NewCodec(c, Params{Size: 512})
	defer func() {
		if recover() == nil {
			t.Error("partial sector did not panic")
		}
	}()
	s.Encrypt(make([]byte, 1024), make([]byte, 700), 0)
}

// TestCodecKeyWipe: a codec made from a key encrypts as one made from its
// cipher, refuses bad parameters before it looks at the key, and after
// Wipe holds no key schedule (its cipher refuses to run).
func TestCodecKeyWipe(t *testing.T) {
	key := make([]byte, 64)
	for i := range key {
		key[i] = byte(i)
	}
	p := Params{Size: 4096, IVMode: Plain64}
	s, err := NewCodecKey(key, p)
	if err != nil {
		t.Fatal(err)
	}
	c, _ := xts.NewCipher(key)
	ref, _ := NewCodec(c, p)
	a, b := make([]byte, 8192), make([]byte, 8192)
	s.Encrypt(a, a, 7)
	ref.Encrypt(b, b, 7)
	if !bytes.Equal(a, b) {
		t.Fatal("NewCodecKey's codec encrypts differently from NewCodec's")
	}
	if _, err := NewCodecKey(make([]byte, 64), Params{Size: 1000}); err == nil || !strings.Contains(err.Error(), "1000") {
		t.Errorf("bad parameters and an all-zero key: %v, want the parameters named", err)
	}
	if _, err := NewCodecKey(make([]byte, 64), p); err == nil {
		t.Error("a key with equal halves was accepted")
	}
	s.Wipe()
	defer func() {
		if recover() == nil {
			t.Error("a wiped codec still encrypts")
		}
	}()
	s.Encrypt(a, a, 0)
}
