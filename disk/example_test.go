package disk_test

import (
	"bytes"
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/xtsctl/xtsctl/disk"
	"github.com/xtsctl/xtsctl/luks"
	_ "github.com/xtsctl/xtsctl/luks/luksimage" // registers LUKS1/LUKS2
	_ "github.com/xtsctl/xtsctl/volume"         // registers xtsctl volumes
)

// Read the plaintext of an encrypted image without device-mapper or root:
// open it, let the registry say what it is, check the request before
// asking for the passphrase, unlock once, and read through an
// io.ReaderAt.
func Example() {
	dir, _ := os.MkdirTemp("", "example")
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "disk.luks")
	makeLUKSImage(path, []byte("hello from inside a LUKS2 image"), "passphrase")

	img, err := disk.OpenImage(path, disk.ImageOptions{Access: disk.Read})
	if err != nil {
		log.Fatal(err)
	}
	defer img.Close()
	format, err := disk.Pick(img, disk.PickOptions{}) // by its header
	if err != nil {
		log.Fatal(err)
	}
	h, err := format.Open(img, nil)
	if err != nil {
		log.Fatal(err)
	}
	req := &disk.Request{Slot: -1, ReadOnly: true}
	if _, err := h.Check(req); err != nil { // before asking anyone anything
		log.Fatal(err)
	}
	u, err := h.Unlock(context.Background(), req, &disk.Secret{Passphrase: []byte("passphrase")})
	if err != nil {
		log.Fatal(err)
	}
	defer u.Wipe()
	f, err := os.Open(path)
	if err != nil {
		log.Fatal(err)
	}
	dev, err := disk.Attach(f, u, disk.AttachOptions{ReadOnly: true})
	if err != nil {
		log.Fatal(err)
	}
	defer dev.Close()
	buf := make([]byte, 31)
	if _, err := disk.NewReaderAt(dev).ReadAt(buf, 0); err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%s, opened with %s: %q\n", format.Info().Name, u.SlotName, buf)
	// Output: luks, opened with keyslot 0: "hello from inside a LUKS2 image"
}

func makeLUKSImage(path string, data []byte, pass string) {
	f, err := os.Create(path)
	if err != nil {
		log.Fatal(err)
	}
	defer f.Close()
	pt := make([]byte, 64<<10)
	copy(pt, data)
	o := luks.FormatOptions{DataOffset: 1 << 20, DigestIterations: 1000,
		Keyslot: luks.KeyslotOptions{Argon2: &luks.Argon2Params{Time: 4, MemoryKiB: 1024, Threads: 1}}}
	size := o.ImageSize(int64(len(pt)))
	if err := f.Truncate(size); err != nil {
		log.Fatal(err)
	}
	if _, err := luks.Create(context.Background(), f, size, []byte(pass), o, bytes.NewReader(pt), nil); err != nil {
		log.Fatal(err)
	}
}
