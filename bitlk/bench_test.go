package bitlk

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
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

// BenchmarkDecryptSample reads each sample's whole device through the
// disk layer (the layout, the extent device, the codecs), unlocked
// beforehand.
func BenchmarkDecryptSample(b *testing.B) {
	for _, s := range samples {
		b.Run("file="+strings.TrimSuffix(s.file, ".img"), func(b *testing.B) {
			path := samplePath(b, s.file)
			u := mustUnlock(b, path, request(), &disk.Secret{Passphrase: []byte(s.recovery)})
			_, r := serve(b, path, u)
			buf := make([]byte, 1<<20)
			b.SetBytes(r.Size())
			b.ReportAllocs()
			for b.Loop() {
				for off := int64(0); off < r.Size(); off += int64(len(buf)) {
					if _, err := r.ReadAt(buf, off); err != nil && !errors.Is(err, io.EOF) {
						b.Fatal(err)
					}
				}
			}
		})
	}
}

// BenchmarkAgainstDislocker decrypts each sample to a file, the whole way
// (unlock with the password or startup key, stretching included, then
// every byte written), with us and with dislocker-file, side by side.
func BenchmarkAgainstDislocker(b *testing.B) {
	if _, err := exec.LookPath("dislocker-file"); err != nil {
		b.Skip("dislocker-file is not installed")
	}
	for _, s := range samples {
		path := samplePath(b, s.file)
		sec := &disk.Secret{Passphrase: []byte(s.password)}
		args := []string{"-V", path, "-u" + s.password}
		if s.password == "" {
			bek := filepath.Join(sampleDir(b), s.bek)
			key, err := os.ReadFile(bek)
			if err != nil {
				b.Fatal(err)
			}
			sec = &disk.Secret{KeyFiles: [][]byte{key}}
			args = []string{"-V", path, "-f", bek}
		}
		name := "file=" + strings.TrimSuffix(s.file, ".img")
		b.Run(name+"/impl=xtsctl", func(b *testing.B) {
			out := filepath.Join(b.TempDir(), "out")
			for b.Loop() {
				u := mustUnlock(b, path, request(), sec)
				f, err := os.Open(path)
				if err != nil {
					b.Fatal(err)
				}
				d, err := disk.NewDevice(f, u.Layout, u.Key, disk.AttachOptions{ReadOnly: true})
				if err != nil {
					b.Fatal(err)
				}
				r := disk.NewReaderAt(d)
				w, err := os.Create(out)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := io.CopyBuffer(w, io.NewSectionReader(r, 0, r.Size()), make([]byte, 1<<20)); err != nil {
					b.Fatal(err)
				}
				w.Close()
				d.Close()
				b.SetBytes(r.Size())
			}
		})
		b.Run(name+"/impl=dislocker-file", func(b *testing.B) {
			out := filepath.Join(b.TempDir(), "out")
			for b.Loop() {
				os.Remove(out)
				if msg, err := exec.Command("dislocker-file", append(args, "--", out)...).CombinedOutput(); err != nil {
					b.Fatalf("dislocker-file: %v: %s", err, msg)
				}
				fi, err := os.Stat(out)
				if err != nil {
					b.Fatal(err)
				}
				b.SetBytes(fi.Size())
			}
		})
	}
}
