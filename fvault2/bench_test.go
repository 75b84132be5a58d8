package fvault2

import (
	"os"
	"testing"

	"github.com/xtsctl/xtsctl/disk"
)

// BenchmarkDecryptLV reads the sample's whole logical volume (160 MiB)
// through the layout Unlock returns, disk.NewDevice and disk.NewReaderAt,
// in 1 MiB reads: what decrypt and a sequential read of the opened device
// do. The image is sparse, so this measures the decryption, not a disk.
func BenchmarkDecryptLV(b *testing.B) {
	path := sampleImage(b)
	u, err := unlock(b, openHeader(b, path), req(), samplePass)
	if err != nil {
		b.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		b.Fatal(err)
	}
	d, err := disk.NewDevice(f, u.Layout, u.Key, disk.AttachOptions{ReadOnly: true})
	if err != nil {
		b.Fatal(err)
	}
	defer d.Close()
	r := disk.NewReaderAt(d)
	buf := make([]byte, 1<<20)
	b.SetBytes(r.Size())
	b.ReportAllocs()
	for b.Loop() {
		for off := int64(0); off < r.Size(); off += int64(len(buf)) {
			if _, err := r.ReadAt(buf, off); err != nil {
				b.Fatal(err)
			}
		}
	}
}
