package blake2b

import (
	"bytes"
	"encoding/binary"
	"testing"

	xblake2b "golang.org/x/crypto/blake2b"
)

// FuzzSumSectors compares SumSectors with x/crypto called sector by sector,
// under the dispatched kernels.
func FuzzSumSectors(f *testing.F) {
	f.Add([]byte("key"), uint64(7), make([]byte, 3*130), uint16(130), uint8(32))
	f.Add([]byte{}, uint64(1<<64-2), make([]byte, 9*8), uint16(8), uint8(16))
	f.Fuzz(func(t *testing.T, key []byte, first uint64, data []byte, sectorSize uint16, tagSize uint8) {
		if len(key) > Size || sectorSize == 0 || tagSize == 0 || tagSize > Size {
			return
		}
		ss := int(sectorSize)
		data = data[:len(data)/ss*ss]
		n := len(data) / ss
		tags := make([]byte, n*int(tagSize))
		SumSectors(tags, int(tagSize), key, first, data, ss)
		for i := range n {
			x, err := xblake2b.New(int(tagSize), key)
			if err != nil {
				t.Fatal(err)
			}
			x.Write(binary.LittleEndian.AppendUint64(nil, first+uint64(i)))
			x.Write(data[i*ss : (i+1)*ss])
			if want, got := x.Sum(nil), tags[i*int(tagSize):(i+1)*int(tagSize)]; !bytes.Equal(got, want) {
				t.Fatalf("sector %d of %d (size %d): %x, want %x", i, n, ss, got, want)
			}
		}
	})
}

// FuzzWrite compares a digest fed in two pieces with x/crypto.
func FuzzWrite(f *testing.F) {
	f.Add([]byte("key"), []byte("some data that spans nothing in particular"), uint16(5), uint8(64))
	f.Fuzz(func(t *testing.T, key, data []byte, cut uint16, size uint8) {
		if len(key) > Size || size == 0 || size > Size {
			return
		}
		c := min(int(cut), len(data))
		h, _ := New(int(size), key)
		h.Write(data[:c])
		h.Write(data[c:])
		x, _ := xblake2b.New(int(size), key)
		x.Write(data)
		if got, want := h.Sum(nil), x.Sum(nil); !bytes.Equal(got, want) {
			t.Fatalf("%x, want %x", got, want)
		}
	})
}
