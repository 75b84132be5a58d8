package blockdev

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/xtsctl/xtsctl/disk"
	"github.com/xtsctl/xtsctl/luks"
	_ "github.com/xtsctl/xtsctl/luks/luksimage" // registers LUKS1/LUKS2
	"github.com/xtsctl/xtsctl/plain"
	_ "github.com/xtsctl/xtsctl/volume" // registers xtsctl volumes
)

// tryUnlock unlocks the image at path as format, the way open does
// before it calls Open: the format opens the header, checks req before
// any secret, then unlocks with sec. The image is opened without a lock
// (disk.Inspect) and closed again, so that the test can serve it.
func tryUnlock(t testing.TB, path, format string, req *disk.Request, sec *disk.Secret) (*disk.Unlocked, error) {
	t.Helper()
	f, ok := disk.Lookup(format)
	if !ok {
		t.Fatalf("format %q is not registered", format)
	}
	img, err := disk.OpenImage(path, disk.ImageOptions{Access: disk.Inspect})
	if err != nil {
		return nil, err
	}
	defer img.Close()
	h, err := f.Open(img, req.Options)
	if err != nil {
		return nil, err
	}
	if _, err := h.Check(req); err != nil {
		return nil, err
	}
	u, err := h.Unlock(context.Background(), req, sec)
	if err != nil {
		return nil, err
	}
	t.Cleanup(u.Wipe)
	return u, nil
}

// unlocked is tryUnlock with every key slot tried; it fails the test if
// the image does not unlock.
func unlocked(t testing.TB, path, format string, opts disk.Options, sec *disk.Secret) *disk.Unlocked {
	t.Helper()
	u, err := tryUnlock(t, path, format, &disk.Request{Slot: -1, Options: opts}, sec)
	if err != nil {
		t.Fatalf("unlock %s as %s: %v", path, format, err)
	}
	return u
}

// goldenVolume unlocks the volume name of testimages/version ("v1",
// "v2") with the passphrase kept with it, as the volume format does for
// open.
func goldenVolume(t testing.TB, version, name string) *disk.Unlocked {
	t.Helper()
	return unlocked(t, filepath.Join("../testimages", version, name), "volume", nil, goldenPassphrase(t, version))
}

// goldenPassphrase is the passphrase of the volumes of
// testimages/version, without the file's newline.
func goldenPassphrase(t testing.TB, version string) *disk.Secret {
	t.Helper()
	pass, err := os.ReadFile(filepath.Join("../testimages", version, "passphrase.txt"))
	if err != nil {
		t.Fatal(err)
	}
	return passphrase(bytes.TrimSuffix(pass, []byte("\n")))
}

// passphrase is the secret of a volume or a LUKS image.
func passphrase(p []byte) *disk.Secret { return &disk.Secret{Passphrase: p} }

// keyFile is the secret of a plain image: its key, as a key file.
func keyFile(key []byte) *disk.Secret {
	return &disk.Secret{KeyFiles: [][]byte{key}, KeyFileNames: []string{"test.key"}}
}

// seqKey is the key 00 01 02 ... of n bytes.
func seqKey(n int) []byte {
	k := make([]byte, n)
	for i := range k {
		k[i] = byte(i)
	}
	return k
}

// plainOptions are plain mode's options as open passes them
// (cryptsetup's --sector-size, --offset, --skip, --iv-large-sectors).
func plainOptions(sectorSize int, offset, skip uint64, largeSectors bool) disk.Options {
	o := disk.Options{
		plain.OptSectorSize: strconv.Itoa(sectorSize),
		plain.OptOffset:     strconv.FormatUint(offset, 10),
		plain.OptSkip:       strconv.FormatUint(skip, 10),
	}
	if largeSectors {
		o[plain.OptIVLargeSectors] = "true"
	}
	return o
}

var luksPass = []byte("luks in blockdev")

// luksImage formats a LUKS2 image at path with package luks (cheap KDF
// costs), holding data bytes of random plaintext after a dataOffset of
// header (0: cryptsetup's 16 MiB), and returns the header, the volume key
// and the plaintext.
func luksImage(t testing.TB, path string, data int64, opt luks.FormatOptions) (*luks.Header, []byte, []byte) {
	t.Helper()
	opt.Keyslot.Argon2 = &luks.Argon2Params{Time: 4, MemoryKiB: 32, Threads: 1}
	opt.DigestIterations = 1000
	size := opt.ImageSize(data)
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := f.Truncate(size); err != nil {
		t.Fatal(err)
	}
	h, key, err := luks.Format(f, size, luksPass, opt)
	if err != nil {
		t.Fatal(err)
	}
	plain := make([]byte, data)
	rand.Read(plain)
	if _, err := h.Encrypt(context.Background(), key, bytes.NewReader(plain), f, size, nil); err != nil {
		t.Fatal(err)
	}
	return h, key, plain
}

// setLUKS2Flags sets the persistent flags (config.flags) of the LUKS2
// image at path in both header copies, as cryptsetup refresh
// --persistent does: package luks formats images without flags.
func setLUKS2Flags(t testing.TB, path string, flags ...string) {
	t.Helper()
	img, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	const binSize, csumAt, csumLen = 4096, 448, 64
	hdrSize := binary.BigEndian.Uint64(img[8:])
	if string(img[:6]) != "LUKS\xba\xbe" || hdrSize <= binSize || 2*hdrSize > uint64(len(img)) {
		t.Fatalf("%s does not start with a LUKS2 header", path)
	}
	for _, off := range []uint64{0, hdrSize} {
		c := img[off : off+hdrSize]
		if alg := string(bytes.TrimRight(c[72:104], "\x00")); alg != "sha256" {
			t.Fatalf("header checksum %q", alg)
		}
		area := c[binSize:]
		dec := json.NewDecoder(bytes.NewReader(area[:bytes.IndexByte(area, 0)]))
		dec.UseNumber()
		var meta map[string]any
		if err := dec.Decode(&meta); err != nil {
			t.Fatal(err)
		}
		meta["config"].(map[string]any)["flags"] = flags
		text, err := json.Marshal(meta)
		if err != nil || len(text) >= len(area) {
			t.Fatalf("metadata of %d bytes: %v", len(text), err)
		}
		clear(area)
		copy(area, text)
		clear(c[csumAt : csumAt+csumLen])
		sum := sha256.Sum256(c)
		copy(c[csumAt:], sum[:])
	}
	if err := os.WriteFile(path, img, 0o600); err != nil {
		t.Fatal(err)
	}
}
