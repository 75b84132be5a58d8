package volume

import (
	"bytes"
	"context"
	"math/rand/v2"
	"testing"

	"github.com/xtsctl/xtsctl/blake2b"
)

// buildByHand makes a volume from plaintext with the API package inplace
// uses (NewHeader, DataCrypto, InitState, WriteHeaderCopy), with flags set
// on the header.
func buildByHand(t *testing.T, plaintext []byte, tagSize int, flags uint32) (*memDevice, []byte) {
	t.Helper()
	h, key, err := NewHeader(int64(len(plaintext)), CreateOptions{SectorSize: 512, TagSize: tagSize, KDF: testKDF, Passphrase: testPass})
	if err != nil {
		t.Fatal(err)
	}
	dc, err := NewDataCrypto(h, key)
	if err != nil {
		t.Fatal(err)
	}
	defer dc.Wipe()
	dev := &memDevice{b: make([]byte, h.Size)}
	data := bytes.Clone(plaintext)
	tags := make([]byte, dc.TagBytes(len(data)))
	// Sealed in two pieces, as a caller working chunk by chunk would.
	half := len(data) / 2 / 512 * 512
	dc.Seal(data[:half], tags[:dc.TagBytes(half)], 0)
	dc.Seal(data[half:], tags[dc.TagBytes(half):], uint64(half/512))
	dev.WriteAt(data, h.DataOffset)
	dev.WriteAt(tags, h.TagOffset)
	digest := blake2b.Sum512(plaintext)
	if err := h.SealDigest(key, &digest); err != nil {
		t.Fatal(err)
	}
	h.Flags |= flags
	if err := h.Authenticate(key); err != nil {
		t.Fatal(err)
	}
	if err := InitState(dev, h, key); err != nil {
		t.Fatal(err)
	}
	for _, off := range []int64{h.SecondaryOffset, 0} {
		if err := WriteHeaderCopy(dev, h, off); err != nil {
			t.Fatal(err)
		}
	}
	return dev, key
}

func TestVolumeBuiltByHandOpens(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	plaintext := make([]byte, 1<<20+3*512)
	for i := range plaintext {
		plaintext[i] = byte(r.Uint32())
	}
	for _, tagSize := range []int{0, 16, 32} {
		dev, key := buildByHand(t, plaintext, tagSize, 0)
		v, err := openTest(t, dev, testPass, true)
		if err != nil {
			t.Fatalf("tags %d: %v", tagSize, err)
		}
		if !bytes.Equal(v.MasterKey(), key) {
			t.Fatal("another master key")
		}
		if st := v.State(); !st.Valid || st.Dirty || st.DigestStale || !st.Authenticated {
			t.Fatalf("tags %d: state %+v", tagSize, st)
		}
		var out bytes.Buffer
		dc, err := v.Decrypt(context.Background(), &out, true, nil)
		if err != nil || !dc.Match {
			t.Fatalf("tags %d: decrypt: %v %+v", tagSize, err, dc)
		}
		if !bytes.Equal(out.Bytes(), plaintext) {
			t.Fatalf("tags %d: wrong plaintext", tagSize)
		}
		v.Close()
	}
}
