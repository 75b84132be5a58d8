package bitlk

import (
	"fmt"
	"testing"

	"github.com/xtsctl/xtsctl/disk"
	"github.com/xtsctl/xtsctl/sector"
)

// BenchmarkCodec: one core decrypting 1 MiB runs of 512-byte sectors
// with each of BitLocker's ciphers.
func BenchmarkCodec(b *testing.B) {
	for _, c := range []struct {
		name   string
		cipher string
		key    int
	}{
		{"xts-128", disk.XTSPlain64, 32},
		{"cbc-128", CipherCBCEBOIV, 16},
		{"elephant-128", CipherCBCElephant, 32},
	} {
		b.Run(fmt.Sprintf("cipher=%s", c.name), func(b *testing.B) {
			key := make([]byte, c.key)
			for i := range key {
				key[i] = byte(i + 1)
			}
			codec, err := disk.NewCodec(c.cipher, key, sector.Params{Size: 512})
			if err != nil {
				b.Fatal(err)
			}
			codec.SetWorkers(1)
			buf := make([]byte, 1<<20)
			b.SetBytes(int64(len(buf)))
			b.ReportAllocs()
			for b.Loop() {
				codec.Decrypt(buf, buf, 0)
			}
		})
	}
}
