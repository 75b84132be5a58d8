package volume

import (
	"bytes"
	"context"
	"fmt"
	"testing"

	"github.com/xtsctl/xtsctl/internal/testutil"
)

// BenchmarkOpenSectors: verifying and decrypting a 1 MiB request in
// memory, the CPU side of a served volume's read, on one goroutine (the
// server's parallelism is its concurrent requests) and on two.
func BenchmarkOpenSectors(b *testing.B) {
	const size = 1 << 20
	for _, tag := range []int{0, 16, 32} {
		dev := &memDevice{}
		opts := CreateOptions{SectorSize: 4096, TagSize: tag, Passphrase: testPass, KDF: KDFParams{Time: 1, MemoryKiB: 64, Threads: 1}}
		if _, _, err := Create(context.Background(), dev, bytes.NewReader(make([]byte, size)), size, opts, nil); err != nil {
			b.Fatal(err)
		}
		v := mustOpen(b, dev, true)
		ct := make([]byte, size)
		copy(ct, dev.b[v.Layout().DataOffset:])
		tags := make([]byte, size/4096*max(tag, 1))[:size/4096*tag]
		copy(tags, dev.b[v.Layout().TagOffset:])
		buf := make([]byte, size)
		for _, workers := range []int{1, 2} {
			v.SetWorkers(workers)
			b.Run(fmt.Sprintf("tag=%d/workers=%d", tag, workers), func(b *testing.B) {
				b.SetBytes(size)
				stop := testutil.CPUClock(b, size)
				for b.Loop() {
					copy(buf, ct)
					if err := v.OpenSectors(buf, tags, 0); err != nil {
						b.Fatal(err)
					}
				}
				stop()
			})
		}
		v.Close()
	}
}
