package inplace

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/xtsctl/xtsctl/plain"
	"github.com/xtsctl/xtsctl/sector"
	"github.com/xtsctl/xtsctl/volume"
)

// TestPrepareVolumeChecks: the checks of a new encryption refuse, before
// any passphrase and without writing, what the run would refuse later,
// and CheckVolume's length is the data the run converts.
func TestPrepareVolumeChecks(t *testing.T) {
	ctx := context.Background()
	in := pattern(2<<20, 5)
	lay, _ := volume.NewLayout(int64(len(in)), 4096, 32)
	need := lay.Size - lay.DataLength

	check := func(d *memDev, room int64, create volume.CreateOptions) (int64, error) {
		t.Helper()
		before := bytes.Clone(d.b)
		p, err := PrepareVolume(d, Encrypt, room)
		if err != nil {
			t.Fatal(err)
		}
		if p.Status != nil || p.Resume {
			t.Fatalf("a new run found %+v", p.Status)
		}
		n, err := p.CheckVolume(create)
		if !bytes.Equal(d.b, before) {
			t.Fatal("the checks wrote")
		}
		return n, err
	}

	var se *SectorsError
	if _, err := check(&memDev{b: pattern(len(in)+512, 1)}, 0, createOpts(32)); !errors.As(err, &se) ||
		se.Kind != KindVolume || se.Length != int64(len(in))+512 || se.SectorSize != 4096 {
		t.Fatalf("not whole sectors: %v", err)
	}
	var le *LayoutError
	if _, err := check(&memDev{b: pattern(8192, 1), fixed: true}, 8192, createOpts(32)); !errors.As(err, &le) {
		t.Fatalf("no data: %v", err)
	}
	var ne *NeedRoomError
	if _, err := check(&memDev{b: append(bytes.Clone(in), make([]byte, need-4096)...), fixed: true}, need-4096, createOpts(32)); !errors.As(err, &ne) ||
		ne.Need != need || ne.Have != need-4096 {
		t.Fatalf("too little room: %v", err)
	}
	if _, err := PrepareVolume(&memDev{b: bytes.Clone(in)}, Encrypt, 4096); !errors.Is(err, ErrRoomOnImage) {
		t.Fatalf("room on an image: %v", err)
	}

	// Enough room: the length is the device less the room, and the run
	// makes a volume of that data.
	dev := &memDev{b: append(bytes.Clone(in), make([]byte, need)...), fixed: true}
	n, err := check(dev, need, createOpts(32))
	if err != nil || n != int64(len(in)) {
		t.Fatalf("length %d, %v; want %d", n, err, len(in))
	}
	p, _ := PrepareVolume(dev, Encrypt, need)
	if _, err := p.EncryptVolume(ctx, createOpts(32), Options{}); err != nil {
		t.Fatal(err)
	}
	checkVolume(t, dev.bytes(), in)
	if _, err := check(dev, need, createOpts(32)); !errors.Is(err, ErrAlreadyVolume) {
		t.Fatalf("a volume again: %v", err)
	}

	// Decryption: what is not a volume is refused before a passphrase.
	if _, err := PrepareVolume(&memDev{b: bytes.Clone(in)}, Decrypt, 0); !errors.Is(err, volume.ErrNotVolume) {
		t.Fatalf("decrypting plaintext: %v", err)
	}
	p, err = PrepareVolume(dev, Decrypt, 0)
	if err != nil || p.Status != nil || p.Resume {
		t.Fatalf("decrypting the volume: %+v, %v", p, err)
	}
	if _, err := p.DecryptVolume(ctx, unlockWith(testPass), Options{}); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(dev.b[:len(in)], in) {
		t.Fatal("the decryption does not give the original")
	}
}

// TestPrepareVolumeInterrupted: an interrupted encryption is resumed, and
// only by its own direction; one that stopped before it wrote its header
// starts again with the data length it had (not the grown image's).
func TestPrepareVolumeInterrupted(t *testing.T) {
	ctx := context.Background()
	in := pattern(3<<20, 6)
	enc := func(d *memDev) error { _, err := EncryptVolume(ctx, d, createOpts(32), 0, Options{}); return err }

	// Write 2 is the first record, after the anchor: no header yet.
	d := &memDev{b: interrupted(t, 2, enc, in, false)}
	if len(d.b) == len(in) {
		t.Fatal("the start did not grow the image")
	}
	p, err := PrepareVolume(d, Encrypt, 0)
	if err != nil || p.Status == nil || p.Status.Started || p.Resume {
		t.Fatalf("a run that stopped while starting: %+v, %v", p, err)
	}
	if n, err := p.CheckVolume(createOpts(32)); err != nil || n != int64(len(in)) {
		t.Fatalf("starting again: length %d, %v; want %d", n, err, len(in))
	}
	if _, err := p.EncryptVolume(ctx, createOpts(32), Options{}); err != nil {
		t.Fatal(err)
	}
	checkVolume(t, d.bytes(), in)

	// Interrupted after it converted data: resumed, not decrypted.
	d = &memDev{b: interrupted(t, 9, enc, in, false)}
	if _, err := PrepareVolume(d, Decrypt, 0); !errors.As(err, new(*DirectionError)) {
		t.Fatalf("decrypting an interrupted encryption: %v", err)
	}
	p, err = PrepareVolume(d, Encrypt, 0)
	if err != nil || !p.Resume || p.Status.Direction != Encrypt || p.Status.Length != int64(len(in)) {
		t.Fatalf("an interrupted encryption: %+v, %v", p, err)
	}
	if _, err := p.ResumeVolume(ctx, unlockWith(testPass), Options{}); err != nil {
		t.Fatal(err)
	}
	checkVolume(t, d.bytes(), in)
}

// TestPreparePlain: a new run's data is checked before the key; an
// interrupted run is found by its journal, resumed in its own direction
// only; a journal that is not one is refused, named.
func TestPreparePlain(t *testing.T) {
	ctx := context.Background()
	p := plain.Mapping{Sector: sector.Params{Size: 512}, Offset: 8}
	in := pattern(3<<20, 7)

	var nd *NoDataError
	if _, err := PreparePlain(&memDev{b: pattern(4096, 1)}, &memJournal{}, p, Decrypt, 0); !errors.As(err, &nd) || nd.Size != 4096 || nd.Offset != 4096 {
		t.Fatalf("nothing after the offset: %v", err)
	}
	var se *SectorsError
	if _, err := PreparePlain(&memDev{b: pattern(len(in)+100, 1)}, &memJournal{}, p, Encrypt, 0); !errors.As(err, &se) ||
		se.Kind != KindPlain || se.Length != int64(len(in))+100 || se.SectorSize != 512 {
		t.Fatalf("not whole sectors: %v", err)
	}
	if _, err := PreparePlain(&memDev{b: bytes.Clone(in)}, &memJournal{}, p, Encrypt, 4096); !errors.Is(err, ErrRoomOnImage) {
		t.Fatalf("room on an image: %v", err)
	}
	bogus := &memJournal{dev: &memDev{b: make([]byte, 1<<16)}}
	var je *JournalError
	if _, err := PreparePlain(&memDev{b: bytes.Clone(in)}, bogus, p, Encrypt, 0); !errors.As(err, &je) || je.Journal != "journal" {
		t.Fatalf("a journal that is not one: %v", err)
	}

	// Interrupted: the journal holds the run.
	tg := &memDev{b: bytes.Clone(in), failAfter: 3}
	j := &memJournal{}
	if _, err := EncryptPlain(ctx, tg, j, p, 0, testKey, Options{}); !errors.Is(err, errInjected) {
		t.Fatalf("not interrupted: %v", err)
	}
	tg.failAfter = 0
	plan, err := PreparePlain(tg, j, p, Decrypt, 0)
	if err != nil || plan.Resume || plan.Status == nil || plan.Status.Direction != Encrypt {
		t.Fatalf("the other direction: %+v, %v", plan, err)
	}
	if _, err := plan.RunPlain(ctx, testKey, Options{}); !errors.As(err, new(*DirectionError)) {
		t.Fatalf("decrypting an interrupted encryption: %v", err)
	}
	plan, err = PreparePlain(tg, j, p, Encrypt, 0)
	if err != nil || !plan.Resume || plan.Status.Length != int64(len(in)) {
		t.Fatalf("resuming: %+v, %v", plan, err)
	}
	if _, err := plan.RunPlain(ctx, testKey, Options{}); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(tg.b, straightPlain(t, in, p, testKey)) {
		t.Fatal("the resumed run is not the straight result")
	}
	// Finished: its journal says so; the same direction is nothing to
	// resume, the other starts anew.
	if plan, err = PreparePlain(tg, j, p, Encrypt, 0); err != nil || plan.Resume || !plan.Status.Finished {
		t.Fatalf("finished: %+v, %v", plan, err)
	}
	if plan, err = PreparePlain(tg, j, p, Decrypt, 0); err != nil || plan.Resume || !plan.Status.Finished {
		t.Fatalf("finished, the other direction: %+v, %v", plan, err)
	}
}

// sizeJournal records the size of the journal a run asks for, and refuses
// to make it.
type sizeJournal struct{ size int64 }

var errRefused = errors.New("refused")

func (j *sizeJournal) Open() (JournalFile, error) { return nil, os.ErrNotExist }
func (j *sizeJournal) Create(size int64, _ func(Device) error, _ bool) (JournalFile, error) {
	j.size = size
	return nil, errRefused
}
func (j *sizeJournal) Name() string { return "sized" }

// TestMaxJournalSize: the journal of a large journal-mode run, with the
// zones xtsctl uses, takes MaxJournalSize, which messages quote.
func TestMaxJournalSize(t *testing.T) {
	old := journalZone
	journalZone = defaultJournalZone
	defer func() { journalZone = old }()
	j := &sizeJournal{}
	tg := &memDev{b: make([]byte, 3*defaultJournalZone)}
	_, err := EncryptPlain(context.Background(), tg, j, plain.Mapping{Sector: sector.Params{Size: 512}}, 0, testKey, Options{})
	if !errors.Is(err, errRefused) || j.size != MaxJournalSize {
		t.Fatalf("journal of %d bytes (%v); MaxJournalSize is %d", j.size, err, MaxJournalSize)
	}
}

// TestFindRun: info finds a volume's run at the end of the target and a
// plain run by its journal (beside an image, or named), and nothing where
// there is none.
func TestFindRun(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	img := filepath.Join(dir, "img")
	in := pattern(3<<20, 8)

	clean := &memDev{b: bytes.Clone(in)}
	if f, err := FindRun(clean, int64(len(in)), img, "", true); f != nil || err != nil {
		t.Fatalf("a clean image: %+v, %v", f, err)
	}
	if _, err := FindRun(clean, int64(len(in)), img, filepath.Join(dir, "nosuch"), true); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a named journal that is missing: %v", err)
	}

	// A plain run, its journal beside the image.
	p := plain.Mapping{Sector: sector.Params{Size: 4096}, Offset: 16}
	tg := &memDev{b: bytes.Clone(in), failAfter: 3}
	j := &memJournal{}
	if _, err := EncryptPlain(ctx, tg, j, p, 0, testKey, Options{}); !errors.Is(err, errInjected) {
		t.Fatalf("not interrupted: %v", err)
	}
	if err := os.WriteFile(DefaultJournal(img), j.dev.bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := FindRun(tg, int64(len(tg.b)), img, "", true)
	if err != nil || f == nil || f.Kind != KindPlain || f.Direction != Encrypt || f.Journal != DefaultJournal(img) ||
		f.SectorSize != 4096 || f.Offset != 16 || f.Headers != nil {
		t.Fatalf("a plain run: %+v, %v", f, err)
	}
	// Not an image file: no journal beside it unless named.
	if f, err := FindRun(tg, int64(len(tg.b)), img, "", false); f != nil || err != nil {
		t.Fatalf("a device without --journal: %+v, %v", f, err)
	}
	named := filepath.Join(dir, "named")
	os.Rename(DefaultJournal(img), named)
	if f, err := FindRun(tg, int64(len(tg.b)), img, named, false); err != nil || f == nil || f.Journal != named {
		t.Fatalf("a named journal: %+v, %v", f, err)
	}
	if err := os.WriteFile(named, make([]byte, 1<<14), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := FindRun(tg, int64(len(tg.b)), img, named, false); err == nil || !bytes.Contains([]byte(err.Error()), []byte(named)) {
		t.Fatalf("a journal that is not one: %v", err)
	}

	// A volume's run: its header, and no journal file.
	enc := func(d *memDev) error { _, err := EncryptVolume(ctx, d, createOpts(32), 0, Options{}); return err }
	v := &memDev{b: interrupted(t, 9, enc, in, false)}
	f, err = FindRun(v, int64(len(v.b)), img, "", true)
	if err != nil || f == nil || f.Kind != KindVolume || f.Direction != Encrypt || f.Journal != "" ||
		f.Headers == nil || f.Headers.Header.Flags&volume.FlagEncrypting == 0 {
		t.Fatalf("a volume's run: %+v, %v", f, err)
	}
	if _, err := FindRun(v, int64(len(v.b)), img, named, true); !errors.Is(err, ErrJournalInTarget) {
		t.Fatalf("a volume's run with a journal named: %v", err)
	}
}
