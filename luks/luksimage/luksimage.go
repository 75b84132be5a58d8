// Package luksimage is LUKS1/LUKS2 as a format of the format layer (package
// disk): an image (a file or block device) and a detached header file if
// there is one, as disk.OpenImage opened and locked them, detected, read,
// unlocked and served; header backups; keyslot changes in one transaction
// whose passphrases come from the caller.
//
// Package luks itself works on io.ReaderAt and io.WriterAt and knows
// nothing of files and locks; this package is where those meet, for the
// command line and any other caller (a server, a GUI).
package luksimage

import (
	"context"
	"os"

	"github.com/xtsctl/xtsctl/luks"
)

// Image is the header device of a LUKS image, as the format layer opened
// it (disk.OpenImage): the detached header file, or the image itself.
type Image struct {
	Header     *luks.Header
	HeaderFile *os.File
	HeaderSize int64
}

// Unlock recovers the volume key with passphrase (luks.Header.Unlock on
// the header device), trying keyslots (nil: any, see CheckUnlock) within
// limits (nil: luks.DefaultLimits). The caller wipes the key.
func (img *Image) Unlock(ctx context.Context, passphrase []byte, keyslots []int, limits *luks.Limits) ([]byte, int, error) {
	return img.Header.Unlock(ctx, img.HeaderFile, passphrase, luks.UnlockOptions{Keyslots: keyslots, Limits: limits})
}
