package inplace

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/xtsctl/xtsctl/plain"
	"github.com/xtsctl/xtsctl/sector"
	"github.com/xtsctl/xtsctl/volume"
)

// The records of a run (a volume's run area, a plain run's journal) put
// back from an older copy, or the newest one destroyed, after the run was
// stopped: the resume must never convert a sector twice. It refuses with
// nothing written, or it finishes with the straight result.

// replay is the state after the first n operations of ops, all of them
// on the disk (a kill -9 there, rather than a power loss).
func replay(start diskState, ops []op, n int) diskState {
	s := diskState{target: bytes.Clone(start.target), journal: bytes.Clone(start.journal)}
	get := func(dev string) *[]byte {
		if dev == "journal" {
			return &s.journal
		}
		return &s.target
	}
	for _, o := range ops[:n] {
		b := get(o.dev)
		switch o.kind {
		case opWrite:
			if end := o.off + int64(len(o.data)); end > int64(len(*b)) {
				*b = append(*b, make([]byte, end-int64(len(*b)))...)
			}
			copy((*b)[o.off:], o.data)
		case opTruncate:
			if o.off > int64(len(*b)) {
				*b = append(*b, make([]byte, o.off-int64(len(*b)))...)
			} else {
				*b = (*b)[:o.off]
			}
		case opCreate:
			s.journal = bytes.Clone(o.data)
		case opRemove:
			s.journal = nil
		}
	}
	return s
}

// points picks up to n moments of a run of total operations, spread over
// it, with the first and the last.
func points(total, n int) []int {
	var p []int
	for i := range n {
		p = append(p, i*total/(n-1))
	}
	return p
}

// zeroNewest zeroes the record slot of the higher sequence number in the
// two slots at off of b.
func zeroNewest(b []byte, off int64) {
	if off < 0 || off+2*blockSize > int64(len(b)) {
		return
	}
	slot := newestRecord(bytes.NewReader(b), off)
	clear(b[off+slot*blockSize : off+(slot+1)*blockSize])
}

// rollbackOutcome counts what the resumes did.
type rollbackOutcome struct{ refused, finished int }

// TestVolumeRollback stops volume runs (encryption and decryption, with
// tags and without, an image and a device) at several moments; puts back
// the record area as it was at an earlier moment, or zeroes the newest
// record; and resumes. Each resume refuses, changing nothing, or gives the
// straight result.
func TestVolumeRollback(t *testing.T) {
	if raceEnabled {
		t.Skip("sequential replays of the code TestVolumeRoundTrip runs under the race detector")
	}
	ctx := context.Background()
	in := pattern(5<<20+3*4096, 21)
	for _, tagSize := range []int{16, 0} {
		for _, fixed := range []bool{false, true} {
			lay, _ := volume.NewLayout(int64(len(in)), 4096, tagSize)
			start := bytes.Clone(in)
			room := int64(0)
			if fixed {
				room = lay.Size - lay.DataLength + 64<<10
				start = append(start, make([]byte, room)...)
			}
			opts := createOpts(tagSize)
			encrypt := func(d *memDev) error {
				if st, err := Probe(d, int64(len(d.b))); err != nil {
					return err
				} else if st != nil && st.Started {
					_, err := ResumeVolume(ctx, d, unlockWith(testPass), Options{})
					return err
				}
				_, err := EncryptVolume(ctx, d, opts, room, Options{})
				return err
			}
			decrypt := func(d *memDev) error {
				_, err := DecryptVolume(ctx, d, unlockWith(testPass), Options{})
				return err
			}
			d := &memDev{b: bytes.Clone(start), fixed: fixed}
			if err := encrypt(d); err != nil {
				t.Fatal(err)
			}
			vol := d.b
			wantPlain := bytes.Clone(start)
			if fixed {
				clear(wantPlain[len(in):lay.Size])
			}
			for _, c := range []struct {
				name  string
				from  []byte
				do    func(*memDev) error
				check func(t *testing.T, b []byte)
			}{
				{"encrypt", start, encrypt, func(t *testing.T, b []byte) { checkVolume(t, b, in) }},
				{"decrypt", vol, decrypt, func(t *testing.T, b []byte) {
					if !bytes.Equal(b, wantPlain) {
						t.Fatal("the resumed decryption differs from the original")
					}
				}},
			} {
				name := fmt.Sprintf("%s tags %d", c.name, tagSize)
				if fixed {
					name += " device"
				}
				t.Run(name, func(t *testing.T) {
					log := &opLog{}
					d := &memDev{b: bytes.Clone(c.from), fixed: fixed, log: log, name: "target"}
					if err := c.do(d); err != nil {
						t.Fatal(err)
					}
					c.check(t, bytes.Clone(d.b))
					// The run area is at the end of the volume: after an
					// encryption, before a decryption cuts the image.
					size := int64(max(len(d.b), len(c.from)))
					records, _ := runAreaAt(size)
					var out rollbackOutcome
					try := func(what string, b []byte) {
						t.Helper()
						before := bytes.Clone(b)
						d := &memDev{b: b, fixed: fixed}
						if err := c.do(d); err != nil {
							if !bytes.Equal(d.b, before) {
								t.Fatalf("%s: the refused resume (%v) changed the target", what, err)
							}
							out.refused++
							return
						}
						c.check(t, d.b)
						out.finished++
					}
					at := points(len(log.ops), 14)
					for i, n2 := range at {
						later := replay(diskState{target: c.from}, log.ops, n2)
						if int64(len(later.target)) != size {
							continue // before an image grew, after it shrank
						}
						b := bytes.Clone(later.target)
						zeroNewest(b, records)
						try(fmt.Sprintf("newest record zeroed at step %d", n2), b)
						for _, n1 := range at[:i] {
							earlier := replay(diskState{target: c.from}, log.ops, n1)
							if int64(len(earlier.target)) != size {
								continue
							}
							b := bytes.Clone(later.target)
							copy(b[records:records+2*blockSize], earlier.target[records:])
							try(fmt.Sprintf("records of step %d put back at step %d", n1, n2), b)
						}
					}
					if out.refused == 0 {
						t.Fatal("no rollback was refused: the test did not reach the case it is about")
					}
					t.Logf("%d operations: %d resumes refused, %d gave the straight result", len(log.ops), out.refused, out.finished)
				})
			}
		}
	}
}

// TestPlainRollback: the same for plain runs, whose records are in the
// journal: the whole journal put back from an earlier moment, or its
// newest record zeroed (journal mode and shift mode, both directions).
func TestPlainRollback(t *testing.T) {
	if raceEnabled {
		t.Skip("sequential replays of the code TestPlainRoundTrip runs under the race detector")
	}
	old := journalZone
	journalZone = 1 << 20
	defer func() { journalZone = old }()
	ctx := context.Background()
	for _, c := range []struct {
		name string
		p    plain.Mapping
		size int
	}{
		{"journal", plain.Mapping{Sector: sector.Params{Size: 512}}, 6<<20 + 512},
		{"journal offset", plain.Mapping{Sector: sector.Params{Size: 512}, Offset: 16}, 6<<20 + 512},
		{"shift", plain.Mapping{Sector: sector.Params{Size: 4096}, Offset: 2048}, 6<<20 + 4096},
	} {
		in := pattern(c.size, 22)
		enc := straightPlain(t, in, c.p, testKey)
		for _, dir := range []Direction{Encrypt, Decrypt} {
			t.Run(c.name+" "+dir.String(), func(t *testing.T) {
				from, want := in, enc
				if dir == Decrypt {
					from, want = enc, in
				}
				do := func(tg *memDev, j *memJournal) error {
					var err error
					if dir == Encrypt {
						_, err = EncryptPlain(ctx, tg, j, c.p, 0, testKey, Options{Force: true})
					} else {
						_, err = DecryptPlain(ctx, tg, j, c.p, testKey, Options{Force: true})
					}
					return err
				}
				log := &opLog{}
				tg := &memDev{b: bytes.Clone(from), log: log, name: "target"}
				if err := do(tg, &memJournal{log: log}); err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(tg.b, want) {
					t.Fatal("the uninterrupted run differs")
				}
				var out rollbackOutcome
				try := func(what string, target, journal []byte) {
					t.Helper()
					before := bytes.Clone(target)
					tg := &memDev{b: target}
					j := &memJournal{dev: &memDev{b: journal, name: "journal"}}
					if err := do(tg, j); err != nil {
						if !bytes.Equal(tg.b, before) {
							t.Fatalf("%s: the refused resume (%v) changed the target", what, err)
						}
						out.refused++
						return
					}
					if !bytes.Equal(tg.b, want) {
						t.Fatalf("%s: the resumed run differs from the straight result", what)
					}
					out.finished++
				}
				at := points(len(log.ops), 16)
				for i, n2 := range at {
					later := replay(diskState{target: from}, log.ops, n2)
					if later.journal == nil {
						continue
					}
					jb := bytes.Clone(later.journal)
					zeroNewest(jb, journalRecords)
					try(fmt.Sprintf("newest record zeroed at step %d", n2), bytes.Clone(later.target), jb)
					for _, n1 := range at[:i] {
						earlier := replay(diskState{target: from}, log.ops, n1)
						if earlier.journal == nil {
							continue
						}
						try(fmt.Sprintf("journal of step %d put back at step %d", n1, n2), bytes.Clone(later.target), bytes.Clone(earlier.journal))
					}
				}
				if out.refused == 0 {
					t.Fatal("no rollback was refused: the test did not reach the case it is about")
				}
				t.Logf("%d operations: %d resumes refused, %d gave the straight result", len(log.ops), out.refused, out.finished)
			})
		}
	}
}

// TestPlainOlderFinishedJournal: the journal of a finished run put back
// over the journal of an interrupted run of the other direction, started
// since. The finished journal lets the other direction start anew, and
// the new run must not start over the half-converted target: the target's
// size tells (an image the new run grew), or else the guards (a target
// whose start the new run converted, holding a filesystem).
func TestPlainOlderFinishedJournal(t *testing.T) {
	ctx := context.Background()
	p := plain.Mapping{Sector: sector.Params{Size: 512}, Offset: 2048}
	in := pattern(6<<20, 24)
	tg := &memDev{b: bytes.Clone(in)}
	j := &memJournal{}
	if _, err := EncryptPlain(ctx, tg, j, p, 0, testKey, Options{}); err != nil {
		t.Fatal(err)
	}
	if _, err := DecryptPlain(ctx, tg, j, p, testKey, Options{}); err != nil {
		t.Fatal(err)
	}
	finishedDecrypt := j.dev.bytes()
	// An encryption (shift mode, from the end; the image grows first),
	// interrupted.
	tg.failAfter = 3
	if _, err := EncryptPlain(ctx, tg, j, p, 0, testKey, Options{}); !errors.Is(err, errInjected) {
		t.Fatalf("not interrupted: %v", err)
	}
	tg.failAfter = 0
	half, interrupted := bytes.Clone(tg.b), j.dev.bytes()
	j.dev = &memDev{b: finishedDecrypt, name: "journal"}
	var fe *FinishedError
	if _, err := EncryptPlain(ctx, tg, j, p, 0, testKey, Options{}); !errors.As(err, &fe) || fe.Direction != Decrypt {
		t.Fatalf("the older journal put back: %v", err)
	}
	if !bytes.Equal(tg.b, half) {
		t.Fatal("a refused run changed the target")
	}
	j.dev = &memDev{b: interrupted, name: "journal"}
	if _, err := EncryptPlain(ctx, tg, j, p, 0, testKey, Options{}); err != nil || !bytes.Equal(tg.b, straightPlain(t, in, p, testKey)) {
		t.Fatalf("the newest journal put back: %v", err)
	}

	// Journal mode, a filesystem: the decryption converts the start
	// first, and the guard sees it.
	images := realImages(t, "ext4")
	if len(images) == 0 {
		t.Skip("no mkfs.ext4")
	}
	p = plain.Mapping{Sector: sector.Params{Size: 512}}
	in = append(bytes.Clone(images[0].data), pattern(6<<20, 25)...)
	tg = &memDev{b: bytes.Clone(in)}
	j = &memJournal{}
	if _, err := EncryptPlain(ctx, tg, j, p, 0, testKey, Options{}); err != nil {
		t.Fatal(err)
	}
	finishedEncrypt := j.dev.bytes()
	tg.failAfter = 2
	if _, err := DecryptPlain(ctx, tg, j, p, testKey, Options{}); !errors.Is(err, errInjected) {
		t.Fatalf("not interrupted: %v", err)
	}
	tg.failAfter = 0
	half = bytes.Clone(tg.b)
	j.dev = &memDev{b: finishedEncrypt, name: "journal"}
	var ce *ConvertedError
	if _, err := DecryptPlain(ctx, tg, j, p, testKey, Options{}); !errors.As(err, &ce) {
		t.Fatalf("the older journal put back: %v", err)
	}
	if !bytes.Equal(tg.b, half) {
		t.Fatal("a refused run changed the target")
	}
}
