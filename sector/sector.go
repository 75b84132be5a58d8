// Package sector maps disk sectors to XTS data units and tweaks the way the
// Linux kernel's dm-crypt does for aes-xts-plain64, and encrypts or decrypts
// whole runs of sectors, spread over all cores when the run is large.
//
// A sector is one XTS data unit of Size bytes (512, 1024, 2048 or 4096).
// Its tweak is the plain64 IV: a little-endian 64-bit count followed by eight
// zero bytes. What the count counts follows dm-crypt:
//
//   - Plain64 (dm-crypt's default): 512-byte units, whatever the sector
//     size. Sector n of a 4096-byte-sector device has tweak IVOffset + 8n.
//   - Plain64LargeSectors (dm-crypt's iv_large_sectors): units of the
//     sector size. Sector n has tweak (IVOffset + n*Size/512) / (Size/512).
//
// IVOffset is dm-crypt's iv_offset (cryptsetup --skip), in 512-byte units.
// Sector numbers count from the start of the encrypted data, not the device.
package sector

import (
	"fmt"
	"math/bits"
	"runtime"

	"github.com/xtsctl/xtsctl/xts"
)

// IVMode says what a tweak counts.
type IVMode int

const (
	// Plain64 counts 512-byte units (dm-crypt's plain64 default).
	Plain64 IVMode = iota
	// Plain64LargeSectors counts sectors of the configured size
	// (dm-crypt's plain64 with the iv_large_sectors option).
	Plain64LargeSectors
)

func (m IVMode) String() string {
	switch m {
	case Plain64:
		return "plain64"
	case Plain64LargeSectors:
		return "plain64 iv_large_sectors"
	}
	return fmt.Sprintf("IVMode(%d)", int(m))
}

// MinSize and MaxSize bound the sector size; every power of two between
// them is valid, as in dm-crypt.
const (
	MinSize = 512
	MaxSize = 4096
)

// CheckSize returns an error naming the problem unless n is a valid sector size.
func CheckSize(n int) error {
	if n < MinSize || n > MaxSize || n&(n-1) != 0 {
		return fmt.Errorf("unsupported sector size %d (want 512, 1024, 2048 or 4096)", n)
	}
	return nil
}

// Params describe how a device's sectors map to XTS data units.
type Params struct {
	Size     int    // sector size in bytes: 512, 1024, 2048 or 4096
	IVMode   IVMode // what the tweak counts
	IVOffset uint64 // added to the tweak count, in 512-byte units (dm-crypt iv_offset)
}

// Check reports whether p is valid.
func (p Params) Check() error {
	if err := CheckSize(p.Size); err != nil {
		return err
	}
	if p.IVMode != Plain64 && p.IVMode != Plain64LargeSectors {
		return fmt.Errorf("unknown IV mode %d", int(p.IVMode))
	}
	return nil
}

// unitsPerSector is the number of 512-byte units in a sector.
func (p Params) unitsPerSector() uint64 { return uint64(p.Size / 512) }

// Tweak returns the plain64 tweak count of sector n. Counts wrap modulo
// 2^64, as dm-crypt's 64-bit sector arithmetic does.
func (p Params) Tweak(n uint64) uint64 {
	u := p.unitsPerSector()
	count := p.IVOffset + n*u
	if p.IVMode == Plain64LargeSectors {
		return count >> bits.TrailingZeros64(u)
	}
	return count
}

// TweakStep is how much the tweak count grows from one sector to the next.
func (p Params) TweakStep() uint64 {
	if p.IVMode == Plain64LargeSectors {
		return 1
	}
	return p.unitsPerSector()
}

// A Codec encrypts and decrypts runs of sectors. It is safe for concurrent use.
type Codec struct {
	c       *xts.Cipher
	p       Params
	workers int
}

// parallelMin is the smallest run split over two cores (see parallel.go).
const parallelMin = 2 * minShare

// NewCodec returns a Codec for c with parameters p, using up to
// runtime.GOMAXPROCS(0) cores for large runs.
func NewCodec(c *xts.Cipher, p Params) (*Codec, error) {
	if err := p.Check(); err != nil {
		return nil, err
	}
	return &Codec{c: c, p: p, workers: runtime.GOMAXPROCS(0)}, nil
}

// NewCodecKey returns a Codec with parameters p over a new xts.Cipher of
// key (xts.NewCipher's checks), which its Wipe erases. The parameters are
// checked first, so that an error names them before the key.
func NewCodecKey(key []byte, p Params) (*Codec, error) {
	if err := p.Check(); err != nil {
		return nil, err
	}
	c, err := xts.NewCipher(key)
	if err != nil {
		return nil, err
	}
	return &Codec{c: c, p: p, workers: runtime.GOMAXPROCS(0)}, nil
}

// Wipe erases the keys of the codec's cipher; the codec cannot be used
// after it.
func (s *Codec) Wipe() { s.c.Wipe() }

// Params returns the codec's parameters.
func (s *Codec) Params() Params { return s.p }

// SetWorkers limits how many cores a single call may use (at least 1).
// A call uses more than one only when each gets at least 64 KiB, and only
// the helpers that are free at the time (parallel.go).
// It must not be called concurrently with Encrypt or Decrypt.
func (s *Codec) SetWorkers(n int) { s.workers = max(n, 1) }

// Encrypt encrypts src, a whole number of sectors starting at sector first,
// into dst (which may be src exactly, or must not overlap it).
func (s *Codec) Encrypt(dst, src []byte, first uint64) { s.run(dst, src, first, false) }

// Decrypt decrypts src, a whole number of sectors starting at sector first, into dst.
func (s *Codec) Decrypt(dst, src []byte, first uint64) { s.run(dst, src, first, true) }

func (s *Codec) run(dst, src []byte, first uint64, decrypt bool) {
	size := s.p.Size
	if len(src)%size != 0 {
		panic(fmt.Sprintf("sector: %d bytes is not a whole number of %d-byte sectors", len(src), size))
	}
	if len(dst) < len(src) {
		panic("sector: output smaller than input")
	}
	if !s.parallel(dst[:len(src)], src, first, decrypt, len(src)/size, s.workers) {
		s.chunk(dst, src, first, decrypt)
	}
}

func (s *Codec) chunk(dst, src []byte, first uint64, decrypt bool) {
	if s.p.IVMode == Plain64LargeSectors {
		// The kernel shifts the wrapped 64-bit count of 512-byte units, so
		// tweaks go up by one per sector only until that count wraps: split
		// the run there (only reachable with an iv_offset near 2^64).
		u := s.p.unitsPerSector()
		count := s.p.IVOffset + first*u
		if beforeWrap := (^uint64(0)-count)/u + 1; beforeWrap < uint64(len(src)/s.p.Size) {
			cut := int(beforeWrap) * s.p.Size
			s.convert(dst[:cut], src[:cut], first, decrypt)
			s.convert(dst[cut:], src[cut:], first+beforeWrap, decrypt)
			return
		}
	}
	s.convert(dst, src, first, decrypt)
}

func (s *Codec) convert(dst, src []byte, first uint64, decrypt bool) {
	if decrypt {
		s.c.DecryptSectors(dst, src, s.p.Size, s.p.Tweak(first), s.p.TweakStep())
	} else {
		s.c.EncryptSectors(dst, src, s.p.Size, s.p.Tweak(first), s.p.TweakStep())
	}
}
