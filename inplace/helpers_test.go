package inplace

import (
	"bytes"
	"errors"
	"io"
	"io/fs"
	"os"
	"sync"
	"testing"

	"github.com/xtsctl/xtsctl/volume"
)

var testKDF = volume.KDFParams{Time: 1, MemoryKiB: 64, Threads: 1}

func TestMain(m *testing.M) {
	journalZone = 2 << 20 // several zones in small test images
	os.Exit(m.Run())
}

// memDev is an in-memory Device. With a log, it records every write, sync
// and size change, so that a test can rebuild what a power loss at any
// moment could leave (see crash_test.go).
type memDev struct {
	mu    sync.Mutex
	b     []byte
	fixed bool // a block device: no growing, no Truncate
	log   *opLog
	name  string
	// failAfter, if positive, makes the write that many writes on fail.
	failAfter int
}

var errInjected = errors.New("injected failure")

func (d *memDev) ReadAt(p []byte, off int64) (int, error) {
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

func (d *memDev) WriteAt(p []byte, off int64) (int, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.failAfter > 0 {
		d.failAfter--
		if d.failAfter == 0 {
			return 0, errInjected
		}
	}
	end := off + int64(len(p))
	if end > int64(len(d.b)) {
		if d.fixed {
			return 0, errors.New("write beyond the end of the device")
		}
		d.b = append(d.b, make([]byte, end-int64(len(d.b)))...)
	}
	if d.log != nil {
		d.log.add(op{dev: d.name, kind: opWrite, off: off, data: bytes.Clone(p)})
	}
	return copy(d.b[off:], p), nil
}

func (d *memDev) Sync() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.log != nil {
		d.log.add(op{dev: d.name, kind: opSync})
	}
	return nil
}

func (d *memDev) Size() (int64, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return int64(len(d.b)), nil
}

func (d *memDev) Resizable() bool { return !d.fixed }

func (d *memDev) Truncate(size int64) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.fixed {
		return errors.New("a block device cannot change size")
	}
	if size > int64(len(d.b)) {
		d.b = append(d.b, make([]byte, size-int64(len(d.b)))...)
	} else {
		d.b = d.b[:size]
	}
	if d.log != nil {
		d.log.add(op{dev: d.name, kind: opTruncate, off: size})
	}
	return nil
}

func (d *memDev) Close() error { return nil }

// memJournal is a Journal in memory: Create makes it visible only once its
// init is done (as a rename does), Remove drops it.
type memJournal struct {
	dev *memDev // nil: no journal
	log *opLog
}

func (j *memJournal) Open() (JournalFile, error) {
	if j.dev == nil {
		return nil, fs.ErrNotExist
	}
	return j.dev, nil
}

func (j *memJournal) Create(size int64, init func(Device) error, replace bool) (JournalFile, error) {
	if j.dev != nil && !replace {
		return nil, &BusyError{Why: "the journal exists"}
	}
	d := &memDev{b: make([]byte, size), name: "journal"}
	if err := init(d); err != nil {
		return nil, err
	}
	// The rename: the journal appears, complete, in one step.
	d.log = j.log
	if j.log != nil {
		j.log.add(op{dev: "journal", kind: opCreate, data: bytes.Clone(d.b)})
	}
	j.dev = d
	return d, nil
}

func (j *memJournal) Name() string { return "journal" }

func pattern(n int, seed byte) []byte {
	b := make([]byte, n)
	x := uint32(seed) + 1
	for i := range b {
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		b[i] = byte(x)
	}
	return b
}

// The operations a run makes on its devices, in order, for crash tests.
type opKind int

const (
	opWrite opKind = iota
	opSync
	opTruncate
	opCreate // a journal appears (rename), with data as its content
	opRemove // the journal is removed
)

type op struct {
	dev  string // "target" or "journal"
	kind opKind
	off  int64
	data []byte
}

type opLog struct {
	mu  sync.Mutex
	ops []op
}

func (l *opLog) add(o op) {
	l.mu.Lock()
	l.ops = append(l.ops, o)
	l.mu.Unlock()
}

func (d *memDev) bytes() []byte {
	d.mu.Lock()
	defer d.mu.Unlock()
	return bytes.Clone(d.b)
}
