package blake2b_test

import (
	"encoding/binary"
	"fmt"

	"github.com/xtsctl/xtsctl/blake2b"
)

// Tags for a run of 4096-byte sectors, and the single-call equivalent of
// one of them.
func ExampleSumSectors() {
	const sectorSize, tagSize = 4096, 16
	key := make([]byte, 32) // a derived tag key in real use
	data := make([]byte, 8*sectorSize)
	tags := make([]byte, 8*tagSize)
	blake2b.SumSectors(tags, tagSize, key, 1000, data, sectorSize)

	h, _ := blake2b.New(tagSize, key)
	h.Write(binary.LittleEndian.AppendUint64(nil, 1003))
	h.Write(data[3*sectorSize : 4*sectorSize])
	fmt.Println(string(h.Sum(nil)) == string(tags[3*tagSize:4*tagSize]))
	// Output: true
}
