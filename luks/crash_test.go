package luks

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// recorder passes reads and writes through to a file and records the
// writes, so that a test can replay any prefix of them: the image a crash
// at that point would leave.
type recorder struct {
	f      *os.File
	writes []recWrite
}

type recWrite struct {
	off int64
	b   []byte
}

func (r *recorder) ReadAt(p []byte, off int64) (int, error) { return r.f.ReadAt(p, off) }
func (r *recorder) Sync() error                             { return r.f.Sync() }
func (r *recorder) WriteAt(p []byte, off int64) (int, error) {
	r.writes = append(r.writes, recWrite{off, bytes.Clone(p)})
	return r.f.WriteAt(p, off)
}

// TestCrashSafety replays every prefix of the writes of AddKeyslot,
// ChangeKeyslot and RemoveKeyslot, with the next write left out, torn
// after its first 4096 bytes, or torn in its middle, starting from a
// header with both copies good, a damaged primary, or a damaged secondary.
// Each image must open, here and in cryptsetup, in the old state or the
// new one.
func TestCrashSafety(t *testing.T) {
	needCryptsetup(t)
	cheap := &Argon2Params{Time: 4, MemoryKiB: 1024, Threads: 1}
	slotOpt := KeyslotOptions{Argon2: cheap}
	passA, passB, passNew := []byte("A"), []byte("B"), []byte("new")
	const size = 2<<20 + 4096

	type state struct{ a, b, new bool } // which passphrases open
	ops := []struct {
		name     string
		run      func(h *Header, f ReadWriterAt, key []byte) error
		old, neu state
		oldBMay  bool // in the old state B may also fail (its area wiped first)
	}{
		{"add", func(h *Header, f ReadWriterAt, key []byte) error {
			_, err := h.AddKeyslot(f, size, key, passNew, slotOpt)
			return err
		}, state{true, true, false}, state{true, true, true}, false},
		{"change", func(h *Header, f ReadWriterAt, key []byte) error {
			return h.ChangeKeyslot(f, size, 1, key, passNew, slotOpt)
		}, state{true, true, false}, state{true, false, true}, false},
		{"remove", func(h *Header, f ReadWriterAt, key []byte) error {
			return h.RemoveKeyslot(f, size, 1, RemoveOptions{})
		}, state{true, true, false}, state{true, false, false}, true},
	}
	damages := []struct {
		name string
		do   func(b []byte)
	}{
		{"both-good", func(b []byte) {}},
		{"primary-damaged", func(b []byte) { clear(b[:4096]) }},
		{"secondary-damaged", func(b []byte) { b[16384+4096+3] ^= 0xff }},
	}
	for _, op := range ops {
		for _, dmg := range damages {
			t.Run(op.name+"/"+dmg.name, func(t *testing.T) {
				t.Parallel()
				dir := t.TempDir()
				img := filepath.Join(dir, "img")
				f, h, key := fastFormat(t, img, size, passA, FormatOptions{DataOffset: 2 << 20, Keyslot: KeyslotOptions{Argon2: cheap}})
				if _, err := h.AddKeyslot(f, size, key, passB, slotOpt); err != nil {
					t.Fatal(err)
				}
				orig, _ := os.ReadFile(img)
				dmg.do(orig)
				os.WriteFile(img, orig, 0o600)
				h, err := ReadHeader(f, size)
				if err != nil {
					t.Fatal(err)
				}
				oldSeq := h.SeqID
				rec := &recorder{f: f}
				if err := op.run(h, rec, key); err != nil {
					t.Fatal(err)
				}
				for k := 0; k <= len(rec.writes); k++ {
					cuts := []int{0}
					if k < len(rec.writes) {
						n := len(rec.writes[k].b)
						cuts = append(cuts, min(4096, n/2), n/2)
					}
					for _, cut := range cuts {
						b := bytes.Clone(orig)
						for _, w := range rec.writes[:k] {
							copy(b[w.off:], w.b)
						}
						if k < len(rec.writes) {
							w := rec.writes[k]
							copy(b[w.off:], w.b[:cut])
						}
						checkCrashImage(t, fmt.Sprintf("after %d writes + %d bytes", k, cut), dir, b, oldSeq,
							[][]byte{passA, passB, passNew},
							func(seq uint64) ([3]bool, []bool) {
								if seq == oldSeq {
									return [3]bool{op.old.a, op.old.b, op.old.new}, []bool{false, op.oldBMay, false}
								}
								return [3]bool{op.neu.a, op.neu.b, op.neu.new}, nil
							})
					}
				}
			})
		}
	}
}

// checkCrashImage checks one replayed image: it opens in the old state
// (seqid oldSeq) or the new one (oldSeq+1), the passphrases open as that
// state says (maybe[i] allows passphrase i to fail too), and cryptsetup
// agrees for each passphrase that must open.
func checkCrashImage(t *testing.T, what, dir string, b []byte, oldSeq uint64, passes [][]byte,
	expect func(seq uint64) ([3]bool, []bool)) {
	t.Helper()
	img := filepath.Join(dir, "crash")
	if err := os.WriteFile(img, b, 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(img)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h, err := ReadHeader(f, int64(len(b)))
	if err != nil {
		t.Fatalf("%s: the header does not read: %v", what, err)
	}
	if h.SeqID != oldSeq && h.SeqID != oldSeq+1 {
		t.Fatalf("%s: seqid %d, want %d or %d", what, h.SeqID, oldSeq, oldSeq+1)
	}
	want, maybe := expect(h.SeqID)
	for i, p := range passes {
		_, _, err := h.Unlock(context.Background(), f, p, UnlockOptions{})
		if opens := err == nil; opens != want[i] && !(maybe != nil && maybe[i] && !opens) {
			t.Fatalf("%s (seqid %d): passphrase %q opens: %v, want %v", what, h.SeqID, p, err, want[i])
		}
	}
	for i, p := range passes {
		if !want[i] || (maybe != nil && maybe[i]) {
			continue
		}
		pf := writeFile(t, dir, "p", p)
		if out, err := csErr("open", "--test-passphrase", "--key-file", pf, img); err != nil {
			t.Fatalf("%s (seqid %d): cryptsetup does not open with %q: %v\n%s", what, h.SeqID, p, err, out)
		}
	}
}
