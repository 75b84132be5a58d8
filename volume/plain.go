// Package volume owns xtsctl's on-disk formats and the ways of serving them:
// the headerless plain mode (byte-compatible with cryptsetup --type plain
// --cipher aes-xts-plain64) and the xtsctl volume format (docs/FORMAT.md):
// two header copies, passphrase key slots (Argon2id, XChaCha20-Poly1305),
// a dm-crypt compatible data area and a keyed BLAKE2b tag per sector.
//
// The volume API, for the commands and the mount backends:
//
//   - Create writes a new volume; ReadHeaders reads the two header copies
//     without a key (for info), and Headers.Unlock finds the master key.
//   - Open (or OpenWithKey, OpenDevice) gives a *Volume: ReadSectors checks
//     tags and never returns unverified plaintext, WriteSectors encrypts and
//     tags, Sync, Close (which marks a written volume clean and wipes keys).
//     Decrypt and Verify stream the whole data area.
//   - The state area records whether a volume was closed cleanly and which
//     regions may have torn writes: MarkRegionsDirty before writing to a
//     region, ClearRegions once it is synced, Recover after a crash.
//   - Layout.CryptTable is the dm-crypt table of the data area.
//   - AddSlot, ChangeSlot, RemoveSlot, Headers.Backup and Restore manage
//     passphrases and headers, crash-safely (WriteHeader).
package volume

import (
	"context"
	"fmt"
	"io"

	"github.com/xtsctl/xtsctl/sector"
)

// Plain describes a cryptsetup plain-mode aes-xts-plain64 mapping.
type Plain struct {
	Sector sector.Params // sector size, IV mode, iv_offset (cryptsetup --skip)
	// Offset is cryptsetup's --offset: the number of 512-byte units of the
	// device before the encrypted data. It does not change the tweaks.
	Offset uint64
}

// MaxOffset bounds Offset so that byte offsets fit an int64 with room to spare.
const MaxOffset = 1 << 50

// OffsetBytes is the byte position of the encrypted data in the device.
func (p Plain) OffsetBytes() int64 { return int64(p.Offset) * 512 }

// Check validates p.
func (p Plain) Check() error {
	if err := p.Sector.Check(); err != nil {
		return err
	}
	if p.Offset > MaxOffset {
		return fmt.Errorf("offset %d is too large", p.Offset)
	}
	return nil
}

// EncryptPlain writes to w what a plain-mode device holds after size bytes of
// plaintext from r were written through the mapping: Offset*512 zero bytes
// (the area before the mapping, never written by dm-crypt), then the
// ciphertext of every sector.
func EncryptPlain(ctx context.Context, w io.Writer, r io.Reader, size int64, p Plain, codec *sector.Codec, progress func(int64)) error {
	if err := writeZeros(w, p.OffsetBytes()); err != nil {
		return &WriteError{err}
	}
	return Stream(ctx, w, r, size, p.Sector.Size, func(buf []byte, first uint64) error {
		codec.Encrypt(buf, buf, first)
		return nil
	}, progress)
}

// DecryptPlain reads the size bytes of ciphertext that follow the offset
// (r must already be positioned there) and writes the plaintext to w.
func DecryptPlain(ctx context.Context, w io.Writer, r io.Reader, size int64, p Plain, codec *sector.Codec, progress func(int64)) error {
	return Stream(ctx, w, r, size, p.Sector.Size, func(buf []byte, first uint64) error {
		codec.Decrypt(buf, buf, first)
		return nil
	}, progress)
}

func writeZeros(w io.Writer, n int64) error {
	zeros := make([]byte, min(n, 1<<20))
	for n > 0 {
		k := min(n, int64(len(zeros)))
		if _, err := w.Write(zeros[:k]); err != nil {
			return err
		}
		n -= k
	}
	return nil
}
