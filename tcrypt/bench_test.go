package tcrypt

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/xtsctl/xtsctl/disk"
	"github.com/xtsctl/xtsctl/internal/testutil"
	"github.com/xtsctl/xtsctl/sector"
)

// BenchmarkSearch unlocks without --tcrypt-hash, trying the candidates
// on every core (workers=N) and one after another on one (workers=1, as
// cryptsetup does), in one run so that the two can be set side by side:
//
//   - wrong-pim1: a wrong passphrase over every VeraCrypt KDF at PIM 1
//     (the whole search, both stages, bounded costs);
//
//   - vc_1: the VeraCrypt sample image with its passphrase (SHA-512).
//
//     go test -run '^$' -bench Search -benchtime 3x ./tcrypt
func BenchmarkSearch(b *testing.B) {
	vc := testImage(b, "vc_1-sha512-xts-aes")
	for _, c := range []struct {
		name string
		opts disk.Options
		pass []byte
		ok   bool
	}{
		{"wrong-pim1", disk.Options{OptPIM: "1"}, []byte("not the passphrase"), false},
		{"vc_1", nil, passA, true},
	} {
		for _, workers := range []int{runtime.NumCPU(), 1} {
			b.Run(fmt.Sprintf("%s/workers=%d", c.name, workers), func(b *testing.B) {
				img := openImage(b, vc, false)
				h, err := Format.Open(img, c.opts)
				if err != nil {
					b.Fatal(err)
				}
				req := &disk.Request{Slot: -1, Options: c.opts}
				cpu0, start := processCPU(b), time.Now()
				for b.Loop() {
					u, err := h.(*tcHeader).unlock(context.Background(), req, &disk.Secret{Passphrase: c.pass}, workers)
					if (err == nil) != c.ok {
						b.Fatalf("unlock: %v", err)
					}
					u.Wipe()
				}
				// How many cores the search kept busy: a shared machine's
				// load shows here rather than as a wrong ratio.
				b.ReportMetric((processCPU(b)-cpu0).Seconds()/float64(b.N), "cpu-s/op")
				b.ReportMetric(float64(processCPU(b)-cpu0)/float64(time.Since(start)), "cores")
			})
		}
	}
}

// processCPU is the process's user and system CPU time.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkDecrypt reads 32 MiB of plaintext through disk.NewDevice and
// disk.NewReaderAt in 1 MiB requests on one core: from a VeraCrypt volume
// unlocked by this package (data at 128 KiB, units from 256) and from a
// plain single-extent layout of the same size on the same engine. Both
// are read in every iteration, in turns, and timed in thread CPU time, so
// that a shared machine's load falls on both alike; it reports each
// one's cpu-MB/s and veracrypt/plain, their ratio.
//
//	go test -run '^$' -bench Decrypt ./tcrypt
func BenchmarkDecrypt(b *testing.B) {
	const size = 32 << 20
	s := defaultSynth()
	s.volSize = size
	path := s.volume(b, passA, size+256<<10, 0)
	_, u, err := unlockImage(b, openImage(b, path, false), disk.Options{OptHash: "sha512", OptPIM: "1"}, &disk.Secret{Passphrase: passA})
	if err != nil {
		b.Fatal(err)
	}
	open := func(path string, l disk.Layout) *disk.ReaderAt {
		f, err := os.Open(path)
		if err != nil {
			b.Fatal(err)
		}
		d, err := disk.NewDevice(f, l, u.Key, disk.AttachOptions{ReadOnly: true, Workers: 1})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { d.Close() })
		return disk.NewReaderAt(d)
	}
	devs := []*disk.ReaderAt{
		open(path, u.Layout),
		// The same file, so that both read the same page cache.
		open(path, disk.SingleExtent(0, size, sector.Params{Size: 512}, disk.XTSPlain64, 512)),
	}
	buf := make([]byte, 1<<20)
	var cpu [2]int64
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	b.SetBytes(2 * size)
	for i := 0; b.Loop(); i++ {
		for k := range 2 {
			j := (i + k) % 2
			start := testutil.ThreadCPUNanos(b)
			for off := int64(0); off < size; off += int64(len(buf)) {
				if _, err := devs[j].ReadAt(buf, off); err != nil {
					b.Fatal(err)
				}
			}
			cpu[j] += testutil.ThreadCPUNanos(b) - start
		}
	}
	if cpu[0] > 0 && cpu[1] > 0 {
		n := float64(b.N) * size * 1e3
		b.ReportMetric(n/float64(cpu[0]), "veracrypt-cpu-MB/s")
		b.ReportMetric(n/float64(cpu[1]), "plain-cpu-MB/s")
		b.ReportMetric(float64(cpu[1])/float64(cpu[0]), "veracrypt/plain")
	}
}
