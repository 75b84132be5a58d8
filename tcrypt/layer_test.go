package tcrypt

import (
	"bytes"
	"context"
	"os"
	"testing"

	"github.com/xtsctl/xtsctl/disk"
)

// TestThroughLayer takes the command line's path: the format found by
// its alias in the registry (never detected), the image opened by
// disk.OpenImage (with a detached header for the system partition copy),
// served by disk.Attach.
func TestThroughLayer(t *testing.T) {
	for _, n := range []string{"tcrypt", "veracrypt", "truecrypt"} {
		if f, ok := disk.Lookup(n); !ok || f != Format {
			t.Fatalf("--type %s is not this format", n)
		}
	}
	drive := testImage(t, "sys_vc_1_mbr_part-sha256-xts-aes.gz")
	b, err := os.ReadFile(drive)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range disk.Detect(bytes.NewReader(b), int64(len(b))) {
		if f == Format {
			t.Fatal("a VeraCrypt image was detected: it has no signature to detect")
		}
	}
	part := drive + ".p1"
	if err := os.WriteFile(part, b[1<<20:17<<20], 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, path, header string
	}{
		{"whole drive", drive, ""},
		{"partition with the drive as header", part, drive},
	} {
		t.Run(c.name, func(t *testing.T) {
			f, _ := disk.Lookup("veracrypt")
			img, err := disk.OpenImage(c.path, disk.ImageOptions{Access: disk.Read, HeaderPath: c.header})
			if err != nil {
				t.Fatal(err)
			}
			defer img.Close()
			opts := disk.Options{OptSystem: "true", OptHash: "sha256"}
			h, err := f.Open(img, opts)
			if err != nil {
				t.Fatal(err)
			}
			req := &disk.Request{Slot: -1, ReadOnly: true, Options: opts}
			if _, err := h.Check(req); err != nil {
				t.Fatal(err)
			}
			u, err := h.Unlock(context.Background(), req, &disk.Secret{Passphrase: passA})
			if err != nil {
				t.Fatal(err)
			}
			defer u.Wipe()
			back, err := os.Open(c.path)
			if err != nil {
				t.Fatal(err)
			}
			d, err := disk.Attach(back, u, disk.AttachOptions{ReadOnly: true})
			if err != nil {
				t.Fatal(err)
			}
			defer d.Close()
			boot := make([]byte, 512)
			if _, err := disk.NewReaderAt(d).ReadAt(boot, 0); err != nil {
				t.Fatal(err)
			}
			if got, err := fatSerial(boot); err != nil || got != "DEAD-BABE" {
				t.Fatalf("FAT serial %s, %v", got, err)
			}
		})
	}
}
