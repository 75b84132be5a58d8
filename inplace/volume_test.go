package inplace

import (
	"bytes"
	"context"
	"errors"
	"math/rand/v2"
	"testing"

	"github.com/xtsctl/xtsctl/blake2b"
	"github.com/xtsctl/xtsctl/plain"
	"github.com/xtsctl/xtsctl/sector"
	"github.com/xtsctl/xtsctl/volume"
)

var testPass = []byte("in-place test passphrase")

func unlockWith(pass []byte) func(*volume.Headers) ([]byte, int, error) {
	return func(hs *volume.Headers) ([]byte, int, error) { return hs.Unlock(pass) }
}

func createOpts(tagSize int) volume.CreateOptions {
	return volume.CreateOptions{SectorSize: 4096, TagSize: tagSize, KDF: testKDF, Passphrase: testPass}
}

// checkVolume opens the volume in b (size bytes of it), verifies every tag
// and the digest, and checks that it decrypts to plaintext.
func checkVolume(t *testing.T, b []byte, plaintext []byte) {
	t.Helper()
	dev := &memDev{b: b, fixed: true}
	v, err := volume.OpenDevice(dev, int64(len(b)), true, unlockWith(testPass))
	if err != nil {
		t.Fatalf("the volume does not open: %v", err)
	}
	defer v.Close()
	if w := v.Warnings(); len(w) > 0 {
		t.Fatalf("warnings: %v", w)
	}
	if hs, err := volume.ReadHeaders(dev, int64(len(b))); err != nil || len(hs.Warnings) > 0 {
		t.Fatalf("headers: %v %v", err, hs.Warnings)
	}
	res, err := v.Verify(context.Background(), nil, nil)
	if err != nil || res.BadSectors != 0 || !res.Digest.Match {
		t.Fatalf("verify: %v, %+v", err, res)
	}
	var out bytes.Buffer
	if _, err := v.Decrypt(context.Background(), &out, true, nil); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(out.Bytes(), plaintext) {
		t.Fatal("the volume does not decrypt to the original")
	}
}

// TestVolumeRoundTrip: an image and a block device are encrypted in place
// into volumes that open, verify and decrypt to the original, and are
// decrypted in place back to the original.
func TestVolumeRoundTrip(t *testing.T) {
	ctx := context.Background()
	for _, tagSize := range []int{0, 16, 32} {
		in := pattern(3<<20+5*4096, byte(tagSize))
		img := &memDev{b: bytes.Clone(in)}
		res, err := EncryptVolume(ctx, img, createOpts(tagSize), 0, Options{})
		if err != nil {
			t.Fatal(err)
		}
		if res.Digest != blake2b.Sum512(in) || res.Header.Flags&volume.FlagsInPlace != 0 {
			t.Fatalf("tags %d: result %+v", tagSize, res)
		}
		if int64(len(img.b)) != res.Header.Size {
			t.Fatalf("the image is %d bytes, the volume %d", len(img.b), res.Header.Size)
		}
		checkVolume(t, bytes.Clone(img.b), in)
		// The same volume as Create makes, byte for byte, but for the
		// key, UUID and the header: the zeros where nothing is.
		l := res.Header.Layout
		if !allZero(img.b[volume.CopySize:volume.StateOffset]) || !allZero(img.b[volume.StateOffset+l.StateLength:l.DataOffset]) ||
			!allZero(img.b[l.SecondaryOffset+volume.CopySize:]) {
			t.Fatal("plaintext or run records left outside the data area")
		}
		dres, err := DecryptVolume(ctx, img, unlockWith(testPass), Options{})
		if err != nil {
			t.Fatal(err)
		}
		if !dres.DigestChecked || !dres.DigestMatch || !bytes.Equal(img.b, in) {
			t.Fatalf("tags %d: decryption: %+v, same %v", tagSize, dres, bytes.Equal(img.b, in))
		}

		// A block device with room for the volume at its end, and more.
		lay, _ := volume.NewLayout(int64(len(in)), 4096, tagSize)
		room := int(lay.Size-lay.DataLength) + 100<<10
		dev := &memDev{b: append(bytes.Clone(in), pattern(room, 7)...), fixed: true}
		if _, err := EncryptVolume(ctx, dev, createOpts(tagSize), int64(room)-1, Options{}); err == nil {
			t.Fatal("room that is not whole sectors was accepted")
		}
		if _, err := EncryptVolume(ctx, dev, createOpts(tagSize), int64(room), Options{}); err != nil {
			t.Fatal(err)
		}
		checkVolume(t, bytes.Clone(dev.b), in)
		if _, err := DecryptVolume(ctx, dev, unlockWith(testPass), Options{}); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(dev.b[:len(in)], in) || !allZero(dev.b[len(in):lay.Size]) || !allZero(dev.b[len(dev.b)-runArea:]) {
			t.Fatal("in-place decryption of a device")
		}
	}
}

// TestVolumeRefusals: what is refused, and that nothing changes.
func TestVolumeRefusals(t *testing.T) {
	ctx := context.Background()
	in := pattern(2<<20, 5)
	lay, _ := volume.NewLayout(int64(len(in)), 4096, 32)
	need := lay.Size - lay.DataLength

	dev := &memDev{b: append(bytes.Clone(in), make([]byte, need-4096)...), fixed: true}
	before := bytes.Clone(dev.b)
	_, err := EncryptVolume(ctx, dev, createOpts(32), need-4096, Options{})
	var ne *NeedRoomError
	if !errors.As(err, &ne) || ne.Need != need {
		t.Fatalf("too little room: %v", err)
	}
	if !bytes.Equal(dev.b, before) {
		t.Fatal("a refused encryption changed the device")
	}

	img := &memDev{b: bytes.Clone(in)}
	if _, err := EncryptVolume(ctx, img, createOpts(32), 0, Options{}); err != nil {
		t.Fatal(err)
	}
	vol := bytes.Clone(img.b)
	if _, err := EncryptVolume(ctx, img, createOpts(32), 0, Options{}); !errors.Is(err, ErrAlreadyVolume) {
		t.Fatalf("encrypting a volume again: %v", err)
	}
	if _, err := DecryptVolume(ctx, img, unlockWith([]byte("wrong")), Options{}); !errors.Is(err, volume.ErrWrongPassphrase) {
		t.Fatalf("wrong passphrase: %v", err)
	}
	// A bad sector: refused before anything is written.
	img.b[lay.DataOffset+4096*7+100] ^= 1
	bad := bytes.Clone(img.b)
	var ie *volume.IntegrityError
	if _, err := DecryptVolume(ctx, img, unlockWith(testPass), Options{}); !errors.As(err, &ie) || ie.Sectors[0].Sector != 7 {
		t.Fatalf("bad sector: %v", err)
	}
	if !bytes.Equal(img.b, bad) {
		t.Fatal("a refused decryption changed the volume")
	}
	_ = vol
}

// killAt makes the target fail its n-th write, which stops the run there
// as a crash would (what was written stays).
func interrupted(t *testing.T, n int, do func(*memDev) error, b []byte, fixed bool) []byte {
	t.Helper()
	d := &memDev{b: bytes.Clone(b), fixed: fixed, failAfter: n}
	if err := do(d); !errors.Is(err, errInjected) {
		t.Fatalf("the run was not interrupted at write %d: %v", n, err)
	}
	return d.b
}

// TestVolumeResumeChecks: a run is resumed only with its passphrase, on
// its target; the other direction and a new run are refused.
func TestVolumeResumeChecks(t *testing.T) {
	ctx := context.Background()
	in := pattern(3<<20, 6)
	enc := func(d *memDev) error { _, err := EncryptVolume(ctx, d, createOpts(32), 0, Options{}); return err }
	half := interrupted(t, 13, enc, in, false)
	st, err := Probe(&memDev{b: half}, int64(len(half)))
	if err != nil || st == nil || st.Direction != Encrypt || !st.Started || !st.Recorded || st.Done == 0 || st.Done == st.Length {
		t.Fatalf("probe: %+v %v", st, err)
	}
	for name, c := range map[string]struct {
		do   func(*memDev) error
		want error
	}{
		"wrong passphrase": {func(d *memDev) error {
			_, err := ResumeVolume(ctx, d, unlockWith([]byte("another")), Options{})
			return err
		}, volume.ErrWrongPassphrase},
		"decrypt": {func(d *memDev) error {
			_, err := DecryptVolume(ctx, d, unlockWith(testPass), Options{})
			return err
		}, &DirectionError{}},
		"encrypt again": {enc, &InterruptedError{}},
	} {
		d := &memDev{b: bytes.Clone(half)}
		err := c.do(d)
		if err == nil || errors.Is(c.want, volume.ErrWrongPassphrase) && !errors.Is(err, c.want) {
			t.Fatalf("%s: %v", name, err)
		}
		if !bytes.Equal(d.b, half) {
			t.Fatalf("%s changed the target", name)
		}
	}
	// Another target: the data the run converted differs (it was changed,
	// or this is another image).
	other := bytes.Clone(half)
	copy(other[2<<20:], pattern(1<<20, 9))
	d := &memDev{b: other}
	if _, err := ResumeVolume(ctx, d, unlockWith(testPass), Options{}); !errors.Is(err, ErrNotThisTarget) {
		t.Fatalf("another target: %v", err)
	}
	if !bytes.Equal(d.b, other) {
		t.Fatal("a refused resume changed the target")
	}
	d = &memDev{b: bytes.Clone(half)}
	res, err := ResumeVolume(ctx, d, unlockWith(testPass), Options{})
	if err != nil || !res.Resumed || res.ResumedAt == 0 {
		t.Fatalf("resume: %+v %v", res, err)
	}
	checkVolume(t, d.b, in)
}

// TestVolumePowerLoss replays a power loss at every step of in-place
// encryptions and decryptions of volumes (an image, and a device with room
// to spare), with many subsets of the unsynced writes, and resumes each
// the way the command does: the result always opens, verifies and
// decrypts to the original (encryption), or is the original (decryption).
func TestVolumePowerLoss(t *testing.T) {
	if raceEnabled {
		t.Skip("sequential replays of the code TestVolumeRoundTrip runs under the race detector")
	}
	ctx := context.Background()
	r := rand.New(rand.NewPCG(8, 8))
	in := pattern(3<<20+3*4096, 8)
	for _, fixed := range []bool{false, true} {
		lay, _ := volume.NewLayout(int64(len(in)), 4096, 16)
		start := bytes.Clone(in)
		room := int64(0)
		if fixed {
			room = lay.Size - lay.DataLength + 64<<10
			start = append(start, make([]byte, room)...)
		}
		encrypt := func(d *memDev) error {
			if st, err := Probe(d, int64(len(d.b))); err != nil {
				return err
			} else if st != nil && st.Started {
				_, err := ResumeVolume(ctx, d, unlockWith(testPass), Options{})
				return err
			}
			_, err := EncryptVolume(ctx, d, createOpts(16), room, Options{})
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
		wantPlain := bytes.Clone(in)
		if fixed {
			wantPlain = append(wantPlain, make([]byte, room)...)
			copy(wantPlain[lay.Size:], start[lay.Size:])
		}
		for _, c := range []struct {
			name       string
			from       []byte
			do         func(*memDev) error
			check      func(t *testing.T, b []byte)
			isFinished func(b []byte) bool
		}{
			{"encrypt", start, encrypt, func(t *testing.T, b []byte) { checkVolume(t, b, in) }, func(b []byte) bool {
				// Finished and tidied up, but for the last zeros: a
				// volume, which encrypting again refuses.
				d := &memDev{b: b}
				st, _ := Probe(d, int64(len(b)))
				_, err := volume.ReadHeaders(d, int64(len(b)))
				return st == nil && err == nil
			}},
			{"decrypt", vol, decrypt, func(t *testing.T, b []byte) {
				if !bytes.Equal(b, wantPlain) {
					i := 0
					for i < len(b) && i < len(wantPlain) && b[i] == wantPlain[i] {
						i++
					}
					t.Fatalf("the decryption differs from the original at byte %d (%d and %d bytes)", i, len(b), len(wantPlain))
				}
			}, func(b []byte) bool { return bytes.Equal(b, wantPlain) }},
		} {
			name := c.name
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
				states := 0
				for n := 0; n <= len(log.ops); n++ {
					if slowCrypto && n%5 != 0 && n < len(log.ops)-3 {
						continue
					}
					for _, s := range crashStates(diskState{target: c.from}, log.ops, n, r, 3) {
						if c.isFinished != nil && c.isFinished(s.target) {
							// Nothing is left to say there was a run:
							// the straight result, which the command
							// refuses to convert again.
							c.check(t, s.target)
							continue
						}
						states++
						d := &memDev{b: s.target, fixed: fixed}
						if err := c.do(d); err != nil {
							t.Fatalf("crash after %d of %d steps: resuming: %v", n, len(log.ops), err)
						}
						c.check(t, d.b)
					}
				}
				t.Logf("%d operations, %d crash states resumed", len(log.ops), states)
			})
		}
	}
}

// TestVolumeDecryptState: a volume that was not closed cleanly is refused
// (nothing changed); one written since its digest was recorded decrypts,
// the digest not compared, to what was written.
func TestVolumeDecryptState(t *testing.T) {
	ctx := context.Background()
	in := pattern(2<<20, 12)
	img := &memDev{b: bytes.Clone(in)}
	if _, err := EncryptVolume(ctx, img, createOpts(16), 0, Options{}); err != nil {
		t.Fatal(err)
	}
	v, err := volume.OpenDevice(img, int64(len(img.b)), false, unlockWith(testPass))
	if err != nil {
		t.Fatal(err)
	}
	patch := pattern(8192, 13)
	if err := v.WriteSectors(patch, 3); err != nil {
		t.Fatal(err)
	}
	if err := v.Sync(); err != nil {
		t.Fatal(err)
	}
	// Not closed: dirty.
	dirty := &memDev{b: bytes.Clone(img.b)}
	if _, err := DecryptVolume(ctx, dirty, unlockWith(testPass), Options{}); !errors.Is(err, ErrNotClean) {
		t.Fatalf("a dirty volume: %v", err)
	}
	if !bytes.Equal(dirty.b, img.b) {
		t.Fatal("a refused decryption changed the volume")
	}
	if err := v.Close(); err != nil {
		t.Fatal(err)
	}
	res, err := DecryptVolume(ctx, img, unlockWith(testPass), Options{})
	if err != nil {
		t.Fatal(err)
	}
	want := bytes.Clone(in)
	copy(want[3*4096:], patch)
	if res.DigestChecked || res.Digest != blake2b.Sum512(want) || !bytes.Equal(img.b, want) {
		t.Fatalf("a volume written since: %+v", res)
	}
}

// TestVolumeNoDigest: encrypt without the digest records none (and skips
// its pass); a decryption with NoDigest computes none, and one resumed
// with the digest after a run without it computes none either (part of
// the plaintext went unhashed), but checks every tag.
func TestVolumeNoDigest(t *testing.T) {
	ctx := context.Background()
	in := pattern(3<<20, 14)
	img := &memDev{b: bytes.Clone(in)}
	opts := createOpts(32)
	opts.NoDigest = true
	res, err := EncryptVolume(ctx, img, opts, 0, Options{})
	if err != nil || res.DigestComputed || res.Header.Flags&volume.FlagDigest != 0 {
		t.Fatalf("%+v %v", res, err)
	}
	vol := bytes.Clone(img.b)
	dres, err := DecryptVolume(ctx, img, unlockWith(testPass), Options{NoDigest: true})
	if err != nil || dres.DigestComputed || dres.DigestChecked || !bytes.Equal(img.b, in) {
		t.Fatalf("%+v %v", dres, err)
	}
	// Interrupted without the digest, resumed with it.
	d := &memDev{b: bytes.Clone(vol), failAfter: 9}
	if _, err := DecryptVolume(ctx, d, unlockWith(testPass), Options{NoDigest: true}); !errors.Is(err, errInjected) {
		t.Fatalf("not interrupted: %v", err)
	}
	d.failAfter = 0
	dres, err = DecryptVolume(ctx, d, unlockWith(testPass), Options{})
	if err != nil || !dres.Resumed || dres.DigestComputed || !bytes.Equal(d.b, in) {
		t.Fatalf("%+v %v", dres, err)
	}
	// And with the digest throughout, resumed, it is the plaintext's.
	img = &memDev{b: bytes.Clone(in)}
	if _, err := EncryptVolume(ctx, img, createOpts(32), 0, Options{}); err != nil {
		t.Fatal(err)
	}
	d = &memDev{b: bytes.Clone(img.b), failAfter: 9}
	if _, err := DecryptVolume(ctx, d, unlockWith(testPass), Options{}); !errors.Is(err, errInjected) {
		t.Fatalf("not interrupted: %v", err)
	}
	d.failAfter = 0
	dres, err = DecryptVolume(ctx, d, unlockWith(testPass), Options{})
	if err != nil || !dres.Resumed || !dres.DigestMatch || dres.Digest != blake2b.Sum512(in) {
		t.Fatalf("%+v %v", dres, err)
	}
}

// TestVolumeSecondHeaderCopy: a volume run keeps two copies of its header
// until it ends (the primary copy's place holds data meanwhile): with
// either destroyed mid-run, it resumes, puts the copy back, and ends with
// a volume whose region of the second copy is zero again.
func TestVolumeSecondHeaderCopy(t *testing.T) {
	ctx := context.Background()
	in := pattern(3<<20, 40)
	enc := func(d *memDev) error { _, err := EncryptVolume(ctx, d, createOpts(16), 0, Options{}); return err }
	half := interrupted(t, 14, enc, in, false)
	lay, _ := volume.NewLayout(int64(len(in)), 4096, 16)
	second := lay.SecondaryOffset + backupHeaderGap
	copies := map[string]int64{"secondary": lay.SecondaryOffset, "second": second}
	if !bytes.Equal(half[lay.SecondaryOffset:lay.SecondaryOffset+volume.CopySize], half[second:second+volume.CopySize]) {
		t.Fatal("the run does not keep a second copy of its header")
	}
	for name, off := range copies {
		b := bytes.Clone(half)
		clear(b[off : off+volume.CopySize])
		d := &memDev{b: b}
		st, err := Probe(d, int64(len(b)))
		if err != nil || st == nil || !st.Started {
			t.Fatalf("%s copy destroyed: probe %+v %v", name, st, err)
		}
		if _, err := ResumeVolume(ctx, d, unlockWith(testPass), Options{}); err != nil {
			t.Fatalf("%s copy destroyed: %v", name, err)
		}
		checkVolume(t, d.b, in)
		if !allZero(d.b[second : second+volume.CopySize]) {
			t.Fatal("the finished volume keeps the run's second header copy")
		}
	}
	// Both destroyed: the key is gone with them.
	b := bytes.Clone(half)
	for _, off := range copies {
		clear(b[off : off+volume.CopySize])
	}
	if _, err := ResumeVolume(ctx, &memDev{b: b}, unlockWith(testPass), Options{}); !errors.Is(err, ErrHeaderLost) {
		t.Fatalf("both copies destroyed: %v", err)
	}

	// A decryption: the first zone goes over the primary copy.
	vol := &memDev{b: bytes.Clone(in)}
	if err := enc(vol); err != nil {
		t.Fatal(err)
	}
	dec := func(d *memDev) error { _, err := DecryptVolume(ctx, d, unlockWith(testPass), Options{}); return err }
	half = interrupted(t, 9, dec, vol.b, false)
	clear(half[lay.SecondaryOffset : lay.SecondaryOffset+volume.CopySize])
	d := &memDev{b: half}
	if err := dec(d); err != nil {
		t.Fatalf("decryption, secondary copy destroyed: %v", err)
	}
	if !bytes.Equal(d.b, in) {
		t.Fatal("the resumed decryption differs from the original")
	}
}

// TestVersion1Runs: runs that an xtsctl writing format version 1 started
// (no ahead MAC, no finished record, one header copy) are resumed and
// finished by this one.
func TestVersion1Runs(t *testing.T) {
	ctx := context.Background()
	defer func(v uint32) { newRunVersion = v }(newRunVersion)
	in := pattern(8<<20+4096, 41)
	for i, n := range []int{1, 2, 3, 5, 7, 9} {
		p := plain.Mapping{Sector: sector.Params{Size: 512}, Offset: 2048} // shift mode: a write per MiB
		if i < 2 {
			p.Offset = 0 // journal mode: a write per zone
		}
		newRunVersion = 1
		tg := &memDev{b: bytes.Clone(in), failAfter: n}
		j := &memJournal{}
		if _, err := EncryptPlain(ctx, tg, j, p, 0, testKey, Options{}); !errors.Is(err, errInjected) {
			t.Fatalf("plain, write %d: not interrupted: %v", n, err)
		}
		tg.failAfter = 0
		newRunVersion = formatVer
		if _, err := EncryptPlain(ctx, tg, j, p, 0, testKey, Options{}); err != nil {
			t.Fatalf("plain, write %d: %v", n, err)
		}
		if !bytes.Equal(tg.b, straightPlain(t, in, p, testKey)) {
			t.Fatalf("plain, write %d: the resumed version-1 run differs", n)
		}
		// Its journal stays (a version-1 journal has no finished record):
		// running again converts nothing.
		if _, err := EncryptPlain(ctx, tg, j, p, 0, testKey, Options{}); err != nil || !bytes.Equal(tg.b, straightPlain(t, in, p, testKey)) {
			t.Fatalf("plain, write %d: again: %v", n, err)
		}

		newRunVersion = 1
		enc := func(d *memDev) error { _, err := EncryptVolume(ctx, d, createOpts(16), 0, Options{}); return err }
		half := interrupted(t, n+6, enc, in, false)
		newRunVersion = formatVer
		d := &memDev{b: half}
		if _, err := ResumeVolume(ctx, d, unlockWith(testPass), Options{}); err != nil {
			t.Fatalf("volume, write %d: %v", n+6, err)
		}
		checkVolume(t, d.b, in)
	}
}
