package xts

import (
	"crypto/aes"
	"fmt"
	"github.com/xtsctl/xtsctl/internal/testutil"
	"testing"

	xcxts "golang.org/x/crypto/xts"
)

// BenchmarkPeers sets xtsctl beside golang.org/x/crypto/xts on XTS-AES-256,
// one call per data unit (a new sector number each call), in place. With
// peer=xtsctl-batch, 64 KiB of units per EncryptSectors call. Besides
// wall-clock MB/s it reports cpu-MB/s (thread CPU time), the figure
// scripts/bench-peers.sh sets beside `openssl speed`, which also divides
// by CPU time.
func BenchmarkPeers(b *testing.B) {
	key := make([]byte, 64)
	for i := range key {
		key[i] = byte(3*i + 1)
	}
	ours, err := NewCipher(key)
	if err != nil {
		b.Fatal(err)
	}
	theirs, err := xcxts.NewCipher(aes.NewCipher, key)
	if err != nil {
		b.Fatal(err)
	}
	for _, size := range []int{16, 64, 127, 128, 512, 1408, 1420, 4096, 16384} {
		b.Run(fmt.Sprintf("peer=xtsctl/size=%d", size), func(b *testing.B) {
			buf := make([]byte, size)
			b.SetBytes(int64(size))
			b.ReportAllocs()
			stop := testutil.CPUClock(b, size)
			for i := uint64(0); b.Loop(); i++ {
				ours.Encrypt(buf, buf, i)
			}
			stop()
		})
		if size%BlockSize == 0 { // x/crypto/xts has no ciphertext stealing
			b.Run(fmt.Sprintf("peer=xcrypto/size=%d", size), func(b *testing.B) {
				buf := make([]byte, size)
				b.SetBytes(int64(size))
				b.ReportAllocs()
				stop := testutil.CPUClock(b, size)
				for i := uint64(0); b.Loop(); i++ {
					theirs.Encrypt(buf, buf, i)
				}
				stop()
			})
		}
	}
	for _, unit := range []int{512, 4096} {
		b.Run(fmt.Sprintf("peer=xtsctl-batch/size=%d", unit), func(b *testing.B) {
			const batch = 64 << 10
			buf := make([]byte, batch)
			b.SetBytes(batch)
			b.ReportAllocs()
			stop := testutil.CPUClock(b, batch)
			for i := uint64(0); b.Loop(); i++ {
				ours.EncryptSectors(buf, buf, unit, i*batch/uint64(unit), 1)
			}
			stop()
		})
	}
}
