package fvault2

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/xtsctl/xtsctl/disk"
)

// Name is the format's --type name.
const Name = "fvault2"

// Format is FileVault 2 on CoreStorage.
type Format struct{}

func init() { disk.Register(Format{}) }

// Info describes the format.
func (Format) Info() disk.FormatInfo {
	return disk.FormatInfo{
		Name:      Name,
		Aliases:   []string{"filevault2"},
		Title:     "FileVault 2 (CoreStorage)",
		Signature: true,
	}
}

// Probe recognises a CoreStorage physical volume header (magic, version,
// block type and checksum) at the image's start, or in a CoreStorage
// partition of its GUID partition table.
func (Format) Probe(r io.ReaderAt, size int64) bool {
	if pvAt(r, size, 0) {
		return true
	}
	for _, p := range findPartitions(r, size) {
		if !p.APFS && pvAt(r, size, p.Offset) {
			return true
		}
	}
	return false
}

func pvAt(r io.ReaderAt, size, off int64) bool {
	b := make([]byte, pvHeaderSize)
	return off <= size-pvHeaderSize && readFull(r, b, off) == nil && looksLikePV(b) && checksumOK(b)
}

// Explain says what an image without the format's signature is, when
// it is a near miss the user should hear about: an APFS container or a
// disk with an APFS partition gives the ErrAPFS error Open gives; other
// images give nil. Detection finds no format for an APFS image, and the
// command line can ask the formats that have an Explain why (the layer
// has no such hook yet).
func (Format) Explain(r io.ReaderAt, size int64) error {
	for _, p := range findPartitions(r, size) {
		if p.APFS {
			return apfsError(fmt.Sprintf("the image has an APFS partition (partition %d), not FileVault 2 on CoreStorage", p.Number))
		}
	}
	if isAPFSContainer(r, size) {
		return apfsError("the image is an APFS container, not FileVault 2 on CoreStorage")
	}
	return nil
}

// ErrAPFS marks an APFS container or partition: FileVault on APFS is a
// different format, which this package does not read.
var ErrAPFS = errors.New("APFS-encrypted volumes are a different format")

// Open reads the physical volume header, the disk label and the
// encrypted metadata. A whole-disk image is opened at its CoreStorage
// partition.
func (Format) Open(img *disk.Image, opt disk.Options) (disk.Header, error) {
	if img.HeaderFile != nil {
		return nil, disk.Errorf(disk.KindUsage, "%s: FileVault 2 keeps its metadata inside the volume; a detached header does not apply", img.Path)
	}
	r, size := img.File, img.Size
	v, err := readVolume(r, 0, size)
	if errors.Is(err, errNoPV) {
		v, err = openPartition(img.Path, r, size)
	}
	if err != nil {
		return nil, openError(img.Path, err)
	}
	return &header{path: img.Path, v: v}, nil
}

// openPartition finds the CoreStorage partition of a whole-disk image,
// or says why there is none.
func openPartition(path string, r io.ReaderAt, size int64) (*volume, error) {
	var cs, apfs []partition
	for _, p := range findPartitions(r, size) {
		if p.APFS {
			apfs = append(apfs, p)
		} else if pvAt(r, size, p.Offset) {
			cs = append(cs, p)
		}
	}
	switch {
	case len(cs) == 1:
		p := cs[0]
		v, err := readVolume(r, p.Offset, p.Size)
		if err != nil {
			return nil, fmt.Errorf("partition %d: %w", p.Number, err)
		}
		v.part = &p
		return v, nil
	case len(cs) > 1:
		var nums []string
		for _, p := range cs {
			nums = append(nums, fmt.Sprint(p.Number))
		}
		return nil, disk.WithKind(disk.KindInput,
			fmt.Errorf("%s holds %d CoreStorage partitions (%s): %w", path, len(cs), strings.Join(nums, ", "), disk.ErrUnsupported),
			"open the partition you want on its own (losetup --partscan gives each a device)")
	case len(apfs) > 0:
		return nil, apfsError(fmt.Sprintf("%s has an APFS partition (partition %d), not FileVault 2 on CoreStorage", path, apfs[0].Number))
	case isAPFSContainer(r, size):
		return nil, apfsError(fmt.Sprintf("%s is an APFS container, not FileVault 2 on CoreStorage", path))
	}
	return nil, errNoPV
}

func apfsError(what string) error {
	return disk.WithKind(disk.KindInput, fmt.Errorf("%s: %w: %w", what, ErrAPFS, disk.ErrUnsupported))
}

// openError gives an error of readVolume its kind.
func openError(path string, err error) error {
	var ce *corruptError
	var ue *unsupportedError
	var de *disk.Error
	switch {
	case errors.As(err, &de):
		return err
	case errors.Is(err, errNoPV):
		return disk.WithKind(disk.KindInput, fmt.Errorf("%s: no CoreStorage physical volume header (FileVault 2): %w", path, disk.ErrNotFormat))
	case errors.As(err, &ce):
		return disk.WithKind(disk.KindIntegrity, fmt.Errorf("%s: %w", path, err))
	case errors.As(err, &ue):
		return disk.WithKind(disk.KindInput, fmt.Errorf("%s: %w: %w", path, err, disk.ErrUnsupported))
	}
	return disk.WithKind(disk.KindFailure, fmt.Errorf("%s: %w", path, err))
}

// kindOf gives a recorded problem (unservable, unusable) its kind.
func kindOf(err error) error {
	var ue *unsupportedError
	var ce *corruptError
	switch {
	case errors.As(err, &ue):
		return disk.WithKind(disk.KindInput, fmt.Errorf("%w: %w", err, disk.ErrUnsupported))
	case errors.As(err, &ce):
		return disk.WithKind(disk.KindIntegrity, err)
	}
	return disk.WithKind(disk.KindInput, err)
}
