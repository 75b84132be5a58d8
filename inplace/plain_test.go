package inplace

import (
	"bytes"
	"context"
	"errors"
	"math/rand/v2"
	"testing"

	"github.com/xtsctl/xtsctl/plain"
	"github.com/xtsctl/xtsctl/sector"
	"github.com/xtsctl/xtsctl/xts"
)

var testKey = pattern(64, 9)

// straightPlain is what encrypt --type plain IN OUT writes.
func straightPlain(t *testing.T, in []byte, p plain.Mapping, key []byte) []byte {
	t.Helper()
	c, err := xts.NewCipher(key)
	if err != nil {
		t.Fatal(err)
	}
	codec, _ := sector.NewCodec(c, p.Sector)
	var out bytes.Buffer
	if _, err := plain.Encrypt(context.Background(), &out, bytes.NewReader(in), int64(len(in)), p, codec, nil); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}

var plainCases = []struct {
	name string
	p    plain.Mapping
	size int
}{
	{"journal", plain.Mapping{Sector: sector.Params{Size: 512}}, 5<<20 + 3*512},
	{"journal 4096 large skip", plain.Mapping{Sector: sector.Params{Size: 4096, IVMode: sector.Plain64LargeSectors, IVOffset: 77}}, 6 << 20},
	{"journal small offset", plain.Mapping{Sector: sector.Params{Size: 512}, Offset: 8}, 5<<20 + 512},
	{"shift", plain.Mapping{Sector: sector.Params{Size: 512}, Offset: 2048}, 5<<20 + 7*512},
	{"shift 3 MiB", plain.Mapping{Sector: sector.Params{Size: 4096}, Offset: 6144}, 9 << 20},
	{"tiny", plain.Mapping{Sector: sector.Params{Size: 512}}, 4096},
}

// TestPlainRoundTrip: an in-place encryption gives the bytes of encrypt
// --type plain, and an in-place decryption gives the original back, on an
// image (which grows and shrinks by the offset) and on a block device
// (which leaves room at its end).
func TestPlainRoundTrip(t *testing.T) {
	ctx := context.Background()
	for _, c := range plainCases {
		t.Run(c.name, func(t *testing.T) {
			in := pattern(c.size, 1)
			want := straightPlain(t, in, c.p, testKey)
			tg := &memDev{b: bytes.Clone(in)}
			j := &memJournal{}
			if _, err := EncryptPlain(ctx, tg, j, c.p, 0, testKey, Options{}); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(tg.b, want) {
				t.Fatalf("in-place encryption differs from encrypt --type plain (%d vs %d bytes)", len(tg.b), len(want))
			}
			finishedJournal(t, j, Encrypt)
			// Run again: nothing to do, nothing converted.
			res, err := EncryptPlain(ctx, tg, j, c.p, 0, testKey, Options{})
			if err != nil || !res.AlreadyDone || res.Resumed || !bytes.Equal(tg.b, want) {
				t.Fatalf("encrypting again: %+v %v", res, err)
			}
			if _, err := DecryptPlain(ctx, tg, j, c.p, testKey, Options{}); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(tg.b, in) {
				t.Fatal("in-place decryption does not give the original back")
			}
			finishedJournal(t, j, Decrypt)
			res, err = DecryptPlain(ctx, tg, j, c.p, testKey, Options{})
			if err != nil || !res.AlreadyDone || !bytes.Equal(tg.b, in) {
				t.Fatalf("decrypting again: %+v %v", res, err)
			}

			// A block device: the data, then the room the offset needs
			// (and a journal of its own).
			j = &memJournal{}
			room := int(c.p.OffsetBytes()) + 4096
			dev := &memDev{b: append(bytes.Clone(in), pattern(room, 2)...), fixed: true}
			if _, err := EncryptPlain(ctx, dev, j, c.p, int64(room), testKey, Options{}); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(dev.b[:len(want)], want) || !bytes.Equal(dev.b[len(want):], pattern(room, 2)[c.p.OffsetBytes():]) {
				t.Fatal("in-place encryption of a device differs")
			}
			if _, err := DecryptPlain(ctx, dev, j, c.p, testKey, Options{}); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(dev.b[:len(in)], in) {
				t.Fatal("in-place decryption of a device does not give the original back")
			}
		})
	}
}

// finishedJournal checks that j holds the journal of a finished run of
// dir, cut to its records.
func finishedJournal(t *testing.T, j *memJournal, dir Direction) {
	t.Helper()
	if j.dev == nil {
		t.Fatal("no journal left: the finished run is not recorded")
	}
	st, err := ProbeJournal(j.dev)
	if err != nil || !st.Finished || st.Direction != dir || st.Done != st.Length || len(j.dev.b) != journalData {
		t.Fatalf("the journal of the finished run: %+v %v (%d bytes)", st, err, len(j.dev.b))
	}
}

// TestPlainNeedsRoom: a block device without room for the offset is
// refused before anything changes.
func TestPlainNeedsRoom(t *testing.T) {
	p := plain.Mapping{Sector: sector.Params{Size: 512}, Offset: 2048}
	in := pattern(4<<20, 3)
	dev := &memDev{b: bytes.Clone(in), fixed: true}
	j := &memJournal{}
	_, err := EncryptPlain(context.Background(), dev, j, p, 4096, testKey, Options{})
	var ne *NeedRoomError
	if !errors.As(err, &ne) || ne.Need != 1<<20 {
		t.Fatalf("got %v", err)
	}
	if !bytes.Equal(dev.b, in) || j.dev != nil {
		t.Fatal("something changed")
	}
}

// TestPlainPowerLoss replays a power loss at every step of in-place
// encryptions and decryptions (journal mode, shift mode, on an image and on
// a device), with many subsets of the writes not yet synced reaching the
// disk, and resumes each: the result is always the straight result. With
// no journal on the disk, the target is either untouched (the run had not
// started: run it) or finished.
func TestPlainPowerLoss(t *testing.T) {
	if raceEnabled {
		t.Skip("sequential replays of the code TestPlainRoundTrip runs under the race detector")
	}
	old := journalZone
	journalZone = 1 << 20
	defer func() { journalZone = old }()
	ctx := context.Background()
	r := rand.New(rand.NewPCG(7, 7))
	for _, c := range []struct {
		name  string
		p     plain.Mapping
		size  int
		fixed bool
	}{
		{"journal", plain.Mapping{Sector: sector.Params{Size: 512}}, 3<<20 + 512, false},
		{"journal offset", plain.Mapping{Sector: sector.Params{Size: 512}, Offset: 16}, 3<<20 + 512, false},
		{"shift", plain.Mapping{Sector: sector.Params{Size: 4096}, Offset: 2048}, 3<<20 + 4096, false},
		{"shift device", plain.Mapping{Sector: sector.Params{Size: 512}, Offset: 2048}, 3 << 20, true},
	} {
		in := pattern(c.size, 4)
		room := 0
		if c.fixed {
			room = int(c.p.OffsetBytes())
			in = append(in, make([]byte, room)...)
		}
		enc := &memDev{b: bytes.Clone(in), fixed: c.fixed}
		if _, err := EncryptPlain(ctx, enc, &memJournal{}, c.p, int64(room), testKey, Options{}); err != nil {
			t.Fatal(err)
		}
		for _, dir := range []Direction{Encrypt, Decrypt} {
			t.Run(c.name+" "+dir.String(), func(t *testing.T) {
				from, want := in, enc.b
				if dir == Decrypt {
					from, want = enc.b, in
					if c.fixed {
						// A device keeps its size; what followed the data is zeroed.
						want = append(bytes.Clone(in[:c.size]), make([]byte, room)...)
					}
				}
				do := func(tg *memDev, j *memJournal) error {
					var err error
					if dir == Encrypt {
						_, err = EncryptPlain(ctx, tg, j, c.p, int64(room), testKey, Options{})
					} else {
						_, err = DecryptPlain(ctx, tg, j, c.p, testKey, Options{})
					}
					return err
				}
				log := &opLog{}
				tg := &memDev{b: bytes.Clone(from), fixed: c.fixed, log: log, name: "target"}
				if err := do(tg, &memJournal{log: log}); err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(tg.b, want) {
					t.Fatal("the uninterrupted run differs")
				}
				states := 0
				for n := 0; n <= len(log.ops); n++ {
					if slowCrypto && n%5 != 0 && n < len(log.ops)-3 {
						continue
					}
					for _, s := range crashStates(diskState{target: from}, log.ops, n, r, 6) {
						states++
						tg := &memDev{b: s.target, fixed: c.fixed}
						j := &memJournal{}
						if s.journal != nil {
							j.dev = &memDev{b: s.journal, name: "journal"}
						} else if bytes.Equal(s.target, want) {
							continue
						} else if !bytes.Equal(s.target, from) {
							t.Fatalf("crash after %d of %d steps: no journal, and the target is neither untouched nor finished", n, len(log.ops))
						}
						if err := do(tg, j); err != nil {
							t.Fatalf("crash after %d of %d steps: resuming: %v", n, len(log.ops), err)
						}
						if !bytes.Equal(tg.b, want) {
							t.Fatalf("crash after %d of %d steps: the resumed run differs from the straight result", n, len(log.ops))
						}
					}
				}
				t.Logf("%d operations, %d crash states resumed", len(log.ops), states)
			})
		}
	}
}

// TestPlainResumeChecks: an interrupted plain run resumes only with its
// key, its parameters and its direction, on its own target; a refused
// resume changes nothing.
func TestPlainResumeChecks(t *testing.T) {
	ctx := context.Background()
	p := plain.Mapping{Sector: sector.Params{Size: 512}}
	in := pattern(5<<20, 11)
	tg := &memDev{b: bytes.Clone(in), failAfter: 2}
	j := &memJournal{}
	if _, err := EncryptPlain(ctx, tg, j, p, 0, testKey, Options{}); !errors.Is(err, errInjected) {
		t.Fatalf("not interrupted: %v", err)
	}
	tg.failAfter = 0
	half, journal := bytes.Clone(tg.b), j.dev.bytes()
	st, err := ProbeJournal(j.dev)
	if err != nil || st.Direction != Encrypt || !st.Recorded || !st.Journal || st.Length != int64(len(in)) {
		t.Fatalf("probe: %+v %v", st, err)
	}
	otherKey := pattern(64, 10)
	var me *MismatchError
	var de *DirectionError
	for name, c := range map[string]struct {
		do   func(tg *memDev, j *memJournal) error
		want func(error) bool
	}{
		"wrong key": {func(tg *memDev, j *memJournal) error {
			_, err := EncryptPlain(ctx, tg, j, p, 0, otherKey, Options{})
			return err
		}, func(err error) bool { return errors.Is(err, ErrWrongKey) }},
		"other sector size": {func(tg *memDev, j *memJournal) error {
			_, err := EncryptPlain(ctx, tg, j, plain.Mapping{Sector: sector.Params{Size: 4096}}, 0, testKey, Options{})
			return err
		}, func(err error) bool { return errors.As(err, &me) }},
		"decrypt": {func(tg *memDev, j *memJournal) error {
			_, err := DecryptPlain(ctx, tg, j, p, testKey, Options{})
			return err
		}, func(err error) bool { return errors.As(err, &de) }},
		"another image": {func(tg *memDev, j *memJournal) error {
			copy(tg.b, pattern(len(tg.b), 12))
			_, err := EncryptPlain(ctx, tg, j, p, 0, testKey, Options{})
			return err
		}, func(err error) bool { return errors.Is(err, ErrNotThisTarget) }},
		"another size": {func(tg *memDev, j *memJournal) error {
			tg.b = tg.b[:len(tg.b)-512]
			_, err := EncryptPlain(ctx, tg, j, p, 0, testKey, Options{})
			return err
		}, func(err error) bool { return errors.Is(err, ErrNotThisTarget) }},
	} {
		tg := &memDev{b: bytes.Clone(half)}
		j := &memJournal{dev: &memDev{b: bytes.Clone(journal)}}
		before := bytes.Clone(tg.b)
		err := c.do(tg, j)
		if err == nil || !c.want(err) {
			t.Fatalf("%s: got %v", name, err)
		}
		if name != "another image" && name != "another size" && !bytes.Equal(tg.b, before) || !bytes.Equal(j.dev.b, journal) {
			t.Fatalf("%s: a refused resume changed something", name)
		}
	}
	// A forged journal (data slot changed, checksums redone cannot be:
	// the record's MAC covers it) is not replayed.
	forged := bytes.Clone(journal)
	for i := journalData; i < len(forged); i++ {
		forged[i] ^= 0x5a
	}
	tg2 := &memDev{b: bytes.Clone(half)}
	_, err = EncryptPlain(ctx, tg2, &memJournal{dev: &memDev{b: forged}}, p, 0, testKey, Options{})
	if err != nil {
		// Both records named a slot that no longer matches: nothing is
		// trusted, nothing written.
		if !bytes.Equal(tg2.b, half) {
			t.Fatal("a forged journal was written to the target")
		}
	} else if !bytes.Equal(tg2.b, straightPlain(t, in, p, testKey)) {
		t.Fatal("a forged journal's data reached the target")
	}
	// And with the right everything, it resumes and finishes.
	tg3 := &memDev{b: bytes.Clone(half)}
	res, err := EncryptPlain(ctx, tg3, &memJournal{dev: &memDev{b: bytes.Clone(journal)}}, p, 0, testKey, Options{})
	if err != nil || !res.Resumed || res.ResumedAt == 0 {
		t.Fatalf("resume: %+v %v", res, err)
	}
	if !bytes.Equal(tg3.b, straightPlain(t, in, p, testKey)) {
		t.Fatal("the resumed run differs from encrypt --type plain")
	}
}

// TestPlainWriteErrorStops: a write in place that fails in journal mode
// ends the run with its error, at any zone (a chunk of the zone after next
// used to wait for ever for the buffer that write would free), and the
// run then resumes to the straight result.
func TestPlainWriteErrorStops(t *testing.T) {
	ctx := context.Background()
	p := plain.Mapping{Sector: sector.Params{Size: 512}}
	in := pattern(int(8*journalZone)+512, 42)
	want := straightPlain(t, in, p, testKey)
	for n := 1; n <= 8; n++ {
		tg := &memDev{b: bytes.Clone(in), failAfter: n}
		j := &memJournal{}
		if _, err := EncryptPlain(ctx, tg, j, p, 0, testKey, Options{}); !errors.Is(err, errInjected) {
			t.Fatalf("write %d failing: %v", n, err)
		}
		tg.failAfter = 0
		if _, err := EncryptPlain(ctx, tg, j, p, 0, testKey, Options{}); err != nil || !bytes.Equal(tg.b, want) {
			t.Fatalf("write %d failing, resumed: %v", n, err)
		}
	}
}
