package luks

import (
	"bytes"
	"crypto/rand"
	"testing"
)

// TestAFRoundTrip: what afSplit writes, afMerge reads back, for every hash
// and key size, and any change to the material changes the key (the point
// of the splitter). afMerge itself is checked against cryptsetup by
// TestCryptsetupImages.
func TestAFRoundTrip(t *testing.T) {
	for _, hash := range []string{"sha1", "sha256", "sha512", "ripemd160", "sha3-256"} {
		for _, n := range []int{32, 64} {
			key := randBytes(t, n)
			mat := make([]byte, afMaterialSize(n, stripesLUKS))
			if err := afSplit(mat, key, stripesLUKS, hashByName(hash), rand.Reader); err != nil {
				t.Fatal(err)
			}
			got := make([]byte, n)
			afMerge(got, mat, stripesLUKS, hashByName(hash))
			if !bytes.Equal(got, key) {
				t.Fatalf("%s/%d: merge(split(key)) != key", hash, n)
			}
			mat[len(mat)/2] ^= 1
			afMerge(got, mat, stripesLUKS, hashByName(hash))
			if bytes.Equal(got, key) {
				t.Fatalf("%s/%d: a flipped bit in the material did not change the key", hash, n)
			}
		}
	}
	if afMaterialSize(64, 4000) != 256000 || afMaterialSize(32, 4000) != 128000 || afMaterialSize(20, 4000) != 80384 {
		t.Fatal("afMaterialSize does not round up to 512-byte sectors")
	}
}
