package main

import (
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

// hasLUKSHeader reports whether the file at path holds a LUKS header.
func hasLUKSHeader(path string) bool { return luksimage.IsLUKS(path) }
