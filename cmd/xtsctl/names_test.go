package main

import (
	"io"
	"os"

	"github.com/xtsctl/xtsctl/luks"
	"github.com/xtsctl/xtsctl/luks/luksimage"
	"github.com/xtsctl/xtsctl/volume"
)

// The info documents live with their formats; the tests name them as the
// command line did.
type infoJSON = volume.InfoDoc

const (
	infoSchema     = volume.InfoSchema
	luksInfoSchema = luksimage.InfoSchema
)

// hasLUKSHeader reports whether the file at path holds a LUKS header,
// even one xtsctl cannot use.
func hasLUKSHeader(path string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	n, err := f.Seek(0, io.SeekEnd)
	return err == nil && luks.Detect(f, n)
}
