package luks_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log"

	"github.com/xtsctl/xtsctl/luks"
)

// image is an in-memory image file (an *os.File in real use).
type image []byte

func (m image) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 || off+int64(len(p)) > int64(len(m)) {
		return 0, errors.New("out of range")
	}
	return copy(p, m[off:]), nil
}

func (m image) WriteAt(p []byte, off int64) (int, error) {
	if off < 0 || off+int64(len(p)) > int64(len(m)) {
		return 0, errors.New("out of range")
	}
	return copy(m[off:], p), nil
}

// What encrypt --type luks2 and decrypt do, with cheap Argon2 costs.
func Example() {
	ctx := context.Background()
	plaintext := bytes.Repeat([]byte("secret data "), 1000)
	pass := []byte("correct horse battery staple")

	opt := luks.FormatOptions{Keyslot: luks.KeyslotOptions{Argon2: &luks.Argon2Params{Time: 4, MemoryKiB: 8 << 10, Threads: 1}}}
	img := make(image, opt.ImageSize(int64(len(plaintext))))
	h, key, err := luks.Format(img, int64(len(img)), pass, opt)
	if err != nil {
		log.Fatal(err)
	}
	if _, err := h.Encrypt(ctx, key, bytes.NewReader(plaintext), img, int64(len(img)), nil); err != nil {
		log.Fatal(err)
	}

	// Later, from the image alone:
	h, err = luks.ReadHeader(img, int64(len(img)))
	if err != nil {
		log.Fatal(err)
	}
	key, slot, err := h.Unlock(ctx, img, pass, luks.UnlockOptions{})
	if err != nil {
		log.Fatal(err)
	}
	var out bytes.Buffer
	if _, err := h.Decrypt(ctx, key, img, int64(len(img)), &out, nil); err != nil {
		log.Fatal(err)
	}
	table, _ := h.DMTable(int64(len(img)))
	table.Device = "/dev/loop0"
	fmt.Println("keyslot", slot, "plaintext back:", bytes.HasPrefix(out.Bytes(), plaintext))
	fmt.Println(table.Template())
	// Output:
	// keyslot 0 plaintext back: true
	// 0 24 crypt aes-xts-plain64 <master-key> 0 /dev/loop0 32768 1 sector_size:4096
}
