package inplace

import (
	"context"
	"os"
	"testing"

	"github.com/xtsctl/xtsctl/internal/stream"
	"github.com/xtsctl/xtsctl/plain"
	"github.com/xtsctl/xtsctl/sector"
	"github.com/xtsctl/xtsctl/xts"
)

// BenchmarkInPlace measures what the journal costs: a plain in-place
// encryption (journal mode: every zone written to the journal, MACed and
// synced, then in place) against the same conversion with no journal and no
// records at all (read, encrypt, write in place with the same engine, one
// sync at the end: what a run costs that a crash can ruin), and a plain
// run with a 1 MiB offset (shift mode: records only, two syncs per MiB). On
// files in /dev/shm (the page cache; fsync is real but cheap), 256 MiB.
//
//	go test -run '^$' -bench InPlace -count 5 ./inplace
func BenchmarkInPlace(b *testing.B) {
	dir, err := os.MkdirTemp("/dev/shm", "xtsctl-bench-")
	if err != nil {
		dir = b.TempDir()
	} else {
		defer os.RemoveAll(dir)
	}
	const size = 256 << 20
	data := pattern(size, 3)
	path := dir + "/target"
	p := plain.Mapping{Sector: sector.Params{Size: 512}}
	old := journalZone
	journalZone = 16 << 20 // what xtsctl uses, not the tests' small zones
	defer func() { journalZone = old }()

	open := func(b *testing.B) *fileTarget {
		b.StopTimer()
		if err := os.WriteFile(path, data, 0o644); err != nil {
			b.Fatal(err)
		}
		f, err := os.OpenFile(path, os.O_RDWR, 0)
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		return &fileTarget{f}
	}
	j := fileJournal(dir + "/journal")
	b.Run("journal", func(b *testing.B) {
		b.SetBytes(size)
		for range b.N {
			t := open(b)
			os.Remove(string(j)) // the finished run's journal: each round is a new run
			if _, err := EncryptPlain(context.Background(), t, j, p, 0, testKey, Options{}); err != nil {
				b.Fatal(err)
			}
			t.Close()
		}
	})
	b.Run("shift", func(b *testing.B) {
		b.SetBytes(size)
		ps := p
		ps.Offset = 2048
		for range b.N {
			t := open(b)
			os.Remove(string(j)) // the finished run's journal: each round is a new run
			if _, err := EncryptPlain(context.Background(), t, j, ps, 0, testKey, Options{}); err != nil {
				b.Fatal(err)
			}
			t.Close()
		}
	})
	b.Run("unsafe", func(b *testing.B) {
		b.SetBytes(size)
		c, _ := xts.NewCipher(testKey)
		codec, _ := sector.NewCodec(c, p.Sector)
		codec.SetWorkers(1)
		for range b.N {
			t := open(b)
			err := stream.Run(context.Background(), size, defaultWorkers(), stream.Stages{
				Load: loadAll(func(_ int, buf []byte, off int64) error { return readAt(t, buf, off) }),
				Work: func(_ int, buf []byte, off int64) error {
					codec.Encrypt(buf, buf, uint64(off/512))
					return nil
				},
				Commit: func(_ int, buf []byte, off int64) error { return writeAt(t, buf, off) },
			})
			if err == nil {
				err = t.Sync()
			}
			if err != nil {
				b.Fatal(err)
			}
			t.Close()
		}
	})
}

// fileTarget is a Target on an image file, without OpenTarget's locks.
type fileTarget struct{ *os.File }

func (t *fileTarget) Size() (int64, error)      { return t.Seek(0, 2) }
func (t *fileTarget) Resizable() bool           { return true }
func (t *fileTarget) Truncate(size int64) error { return t.File.Truncate(size) }

type fileJournal string

func (j fileJournal) Open() (JournalFile, error) { return os.OpenFile(string(j), os.O_RDWR, 0) }
func (j fileJournal) Create(size int64, init func(Device) error, _ bool) (JournalFile, error) {
	f, err := os.Create(string(j))
	if err != nil {
		return nil, err
	}
	if err := f.Truncate(size); err != nil {
		return nil, err
	}
	if err := init(f); err != nil {
		return nil, err
	}
	return f, f.Sync()
}
func (j fileJournal) Name() string { return string(j) }
