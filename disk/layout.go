package disk

import (
	"errors"
	"fmt"

	"github.com/xtsctl/xtsctl/sector"
)

// An ExtentKind says how an extent's plaintext is made.
type ExtentKind string

const (
	// Crypt: the extent is ciphertext in the image at Source, decrypted
	// with the layout's cipher and the extent's tweak rule.
	Crypt ExtentKind = "crypt"
	// Zero: the extent reads as zeros and holds nothing in the image (a
	// format's metadata, shown as Windows shows it); it cannot be written.
	Zero ExtentKind = "zero"
	// Clear: the extent is stored unencrypted in the image at Source.
	Clear ExtentKind = "clear"
)

// An Extent is one run of the plaintext device.
type Extent struct {
	Offset int64      `json:"offset"` // in the plaintext device, bytes
	Length int64      `json:"length"` // bytes, whole sectors
	Kind   ExtentKind `json:"kind"`
	Source int64      `json:"source"` // Crypt, Clear: where it is in the image, bytes
	// Sector is the tweak rule of a Crypt extent: sector 0 is the
	// extent's first (Sector.Size must be the layout's sector size).
	Sector sector.Params `json:"sector"`
}

// A Layout describes the plaintext device an unlocked image serves: its
// extents in order, the sector size and the cipher. It is plain data, so
// that it can be handed to the process that serves the image.
type Layout struct {
	Size       int64    `json:"size"`        // bytes, the sum of the extents
	SectorSize int      `json:"sector_size"` // the device's logical sector size
	Extents    []Extent `json:"extents"`
	// Cipher is the data cipher in dm-crypt's spelling: "aes-xts-plain64"
	// (the tweak rule is each extent's), or one registered with
	// RegisterCipher.
	Cipher  string `json:"cipher"`
	KeyBits int    `json:"key_bits"`
	// Integrity names per-sector integrity ("blake2b" with TagSize bytes
	// a sector), "" for none. Only a format with a session (Attacher)
	// checks it; the generic device cannot.
	Integrity string `json:"integrity,omitempty"`
	TagSize   int    `json:"tag_size,omitempty"`
	// DMOptions are dm-crypt's optional parameters the header asks for
	// ("allow_discards", "same_cpu_crypt", ...: LUKS2's persistent flags).
	DMOptions []string `json:"dm_options,omitempty"`
	// ReadOnly, when not empty, says why the image can only be served
	// read-only (a format whose writes xtsctl does not make).
	ReadOnly string `json:"read_only,omitempty"`
}

// SingleExtent is the layout of a format whose plaintext is one run of
// ciphertext: length bytes at offset in the image, tweaks from p.
func SingleExtent(offset, length int64, p sector.Params, cipher string, keyBits int) Layout {
	return Layout{
		Size: length, SectorSize: p.Size, Cipher: cipher, KeyBits: keyBits,
		Extents: []Extent{{Offset: 0, Length: length, Kind: Crypt, Source: offset, Sector: p}},
	}
}

// Check checks l against an image of imageSize bytes: the extents tile
// the device from 0 to Size in whole sectors, every Crypt and Clear extent
// lies inside the image, and every tweak rule is valid. Layouts come from
// headers an attacker may have written: nothing is served before this.
func (l *Layout) Check(imageSize int64) error {
	if err := sector.CheckSize(l.SectorSize); err != nil {
		return fmt.Errorf("layout: %w", err)
	}
	if len(l.Extents) == 0 || l.Size <= 0 {
		return errors.New("layout: no data")
	}
	ss := int64(l.SectorSize)
	var at int64
	for i, e := range l.Extents {
		switch {
		case e.Offset != at:
			return fmt.Errorf("layout: extent %d starts at byte %d, not %d", i, e.Offset, at)
		case e.Length <= 0 || e.Length%ss != 0:
			return fmt.Errorf("layout: extent %d is %d bytes, not a whole, non-zero number of %d-byte sectors", i, e.Length, ss)
		case e.Length > l.Size-at:
			return fmt.Errorf("layout: extent %d runs past the device's %d bytes", i, l.Size)
		}
		switch e.Kind {
		case Crypt, Clear:
			if e.Source < 0 || e.Source > imageSize || e.Length > imageSize-e.Source {
				return fmt.Errorf("layout: extent %d (%d bytes at byte %d) runs past the end of the %d-byte image", i, e.Length, e.Source, imageSize)
			}
			if e.Kind == Crypt {
				if e.Sector.Size != l.SectorSize {
					return fmt.Errorf("layout: extent %d has %d-byte sectors in a device of %d-byte sectors", i, e.Sector.Size, l.SectorSize)
				}
				if err := e.Sector.Check(); err != nil {
					return fmt.Errorf("layout: extent %d: %w", i, err)
				}
			}
		case Zero:
		default:
			return fmt.Errorf("layout: extent %d has unknown kind %q", i, e.Kind)
		}
		at += e.Length
	}
	if at != l.Size {
		return fmt.Errorf("layout: the extents hold %d bytes of a %d-byte device", at, l.Size)
	}
	if l.Integrity != "" && l.TagSize <= 0 {
		return fmt.Errorf("layout: integrity %q without a tag size", l.Integrity)
	}
	return nil
}

// Summary describes the encryption for people: "aes-xts-plain64, 512-bit
// key, 4096-byte sectors".
func (l *Layout) Summary() string {
	s := fmt.Sprintf("%s, %d-bit key, %d-byte sectors", l.Cipher, l.KeyBits, l.SectorSize)
	if l.Integrity != "" {
		s += fmt.Sprintf(", %s %d-byte tags", l.Integrity, l.TagSize)
	}
	return s
}

// Sectors is the device's size in sectors.
func (l *Layout) Sectors() uint64 { return uint64(l.Size / int64(l.SectorSize)) }

// An Unlocked image: what to serve, and the key that serves it.
type Unlocked struct {
	Format string // the format's name
	Layout Layout
	// Key is the data key for Layout.Cipher. Wipe erases it.
	Key []byte
	// Slot is the key slot (keyslot, protector) that opened, -1 if none
	// applies; SlotName names it for people ("key slot 2", "keyslot 3",
	// "protector {...} (recovery password)").
	Slot     int
	SlotName string
	// Warnings are for the user, one line each without a prefix.
	Warnings []string
	// Unservable, when not empty, says why the data cannot be served
	// (a header unlocked with Request.TestOnly whose data segment xtsctl
	// does not support): the secret was right all the same.
	Unservable string
	// Session is format-specific, authenticated state that the format's
	// Attacher needs to serve the image (nil for most formats). It is
	// plain data, handed to the serving process with the layout.
	Session []byte
}

// Wipe erases the key.
func (u *Unlocked) Wipe() {
	if u != nil {
		clear(u.Key)
	}
}
