package tcrypt_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"os"

	"github.com/xtsctl/xtsctl/disk"
	"github.com/xtsctl/xtsctl/tcrypt"
)

// Open a VeraCrypt volume, unlock it with its passphrase and read its
// plaintext through an io.ReaderAt: here the FAT boot sector's serial.
func Example() {
	f, err := os.Open("testdata/vc_1-sha512-xts-aes")
	if err != nil {
		fmt.Println(err)
		return
	}
	fi, _ := f.Stat()
	img := &disk.Image{Path: f.Name(), File: f, Size: fi.Size()}
	// --tcrypt-hash sha512 makes the example quick; without it every
	// KDF of VeraCrypt and TrueCrypt is tried, on every core.
	opts := disk.Options{tcrypt.OptHash: "sha512"}
	h, err := tcrypt.Format.Open(img, opts)
	if err != nil {
		fmt.Println(err)
		return
	}
	req := &disk.Request{Slot: -1, ReadOnly: true, Options: opts}
	if _, err := h.Check(req); err != nil {
		fmt.Println(err)
		return
	}
	u, err := h.Unlock(context.Background(), req, &disk.Secret{Passphrase: []byte("aaaaaaaaaaaa")})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer u.Wipe()
	// The device takes the file and closes it.
	d, err := disk.NewDevice(f, u.Layout, u.Key, disk.AttachOptions{ReadOnly: true})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer d.Close()
	boot := make([]byte, 512)
	if _, err := disk.NewReaderAt(d).ReadAt(boot, 0); err != nil {
		fmt.Println(err)
		return
	}
	serial := binary.LittleEndian.Uint32(boot[0x27:])
	fmt.Printf("%d bytes, FAT serial %04X-%04X\n", u.Layout.Size, serial>>16, serial&0xffff)
	// Output: 36864 bytes, FAT serial DEAD-BABE
}
