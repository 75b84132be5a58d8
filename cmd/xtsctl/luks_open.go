package main

// open of LUKS images: the data segment served like a plain image (fuse,
// or dm where device-mapper is), with the volume key the passphrase
// unlocks here.

import (
	"os"

	"github.com/spf13/cobra"
	"github.com/xtsctl/xtsctl/blockdev"
	"github.com/xtsctl/xtsctl/luks/luksimage"
)

// luksOpenOnly lists the flags of open that LUKS images do not take.
var luksOpenOnly = []string{"offset", "skip", "iv-large-sectors", "sector-size", "recover"}

// luksOpenRequest unlocks the LUKS image open checked (img, named image)
// and fills req for blockdev.Open (cmd_open.go's hook). The header is read
// through img, or from --header. The caller wipes req.Key.
func luksOpenRequest(a *app, cmd *cobra.Command, image string, img *os.File, req *blockdev.Request) error {
	li, err := luksimage.OpenOn(img, image, flagString(cmd, "header"))
	if err != nil {
		return luksOpenError(err, luksimage.Inspect)
	}
	defer li.Close()
	// What cannot be served is refused before the passphrase is asked.
	pick, err := luksKeySlot(cmd)
	if err != nil {
		return err
	}
	if _, err := luksUsable(li, pick); err != nil {
		return err
	}
	if _, _, err := li.Header.DataRange(li.DataSize); err != nil {
		return luksError(image, err)
	}
	key, slot, err := luksUnlock(a, cmd, li)
	if err != nil {
		return err
	}
	req.Type, req.LUKS, req.Key = blockdev.TypeLUKS, li.Header, key
	req.Cipher = luksCipher(li.Header)
	a.infof("%s: unlocked with keyslot %d", image, slot)
	return nil
}

// luksTestPassphrase is open --test-passphrase of a LUKS image
// (cmd_open.go's hook), as cryptsetup's: it says which keyslot the
// passphrase opens, exit 0, or fails with exit 4; nothing is served.
func luksTestPassphrase(a *app, cmd *cobra.Command, image string) error {
	li, err := openLUKS(cmd, image, luksimage.Inspect)
	if err != nil {
		return err
	}
	defer li.Close()
	key, slot, err := luksUnlock(a, cmd, li)
	if err != nil {
		return err
	}
	clear(key)
	a.infof("%s: the passphrase opens keyslot %d", image, slot)
	return nil
}
