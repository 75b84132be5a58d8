package inplace

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/xtsctl/xtsctl/internal/testutil"
	"github.com/xtsctl/xtsctl/plain"
	"github.com/xtsctl/xtsctl/sector"
)

// realImage is an image made by a real tool, and what recognise must
// call it.
type realImage struct {
	name, want string
	data       []byte // its first signatureBytes
}

// realImages makes small images with the tools that make them (skipping
// those this machine lacks; scripts/install-deps.sh installs them), only
// the one named only if it is not "".
func realImages(t *testing.T, only string) []realImage {
	t.Helper()
	dir := t.TempDir()
	var out []realImage
	for _, c := range []struct {
		name, want, tool string
		size             int64
		args             []string
		stdin            string
	}{
		{"ext4", "an ext2/3/4 filesystem", "mkfs.ext4", 8 << 20, []string{"-q", "-F"}, ""},
		{"ext2 1k", "an ext2/3/4 filesystem", "mkfs.ext2", 8 << 20, []string{"-q", "-F", "-b", "1024"}, ""},
		{"xfs", "an XFS filesystem", "mkfs.xfs", 300 << 20, []string{"-q", "-f"}, ""},
		{"btrfs", "a btrfs filesystem", "mkfs.btrfs", 128 << 20, []string{"-q", "-f"}, ""},
		{"fat16", "a FAT filesystem", "mkfs.vfat", 8 << 20, nil, ""},
		{"fat32", "a FAT filesystem", "mkfs.vfat", 64 << 20, []string{"-F", "32"}, ""},
		{"exfat", "an exFAT filesystem", "mkfs.exfat", 8 << 20, nil, ""},
		{"ntfs", "an NTFS filesystem", "mkfs.ntfs", 8 << 20, []string{"-q", "-F", "-f"}, ""},
		{"swap", "a swap area", "mkswap", 8 << 20, nil, ""},
		{"mbr", "an MBR partition table", "sfdisk", 8 << 20, []string{"-q"}, "label: dos\n,4M,L\n"},
		{"gpt", "a GPT partition table", "sfdisk", 8 << 20, []string{"-q"}, "label: gpt\n,4M,L\n"},
		{"luks2", "a LUKS header", "cryptsetup", 24 << 20, []string{"luksFormat", "-q", "--pbkdf", "pbkdf2", "--pbkdf-force-iterations", "1000", "--key-file", "-"}, "a passphrase"},
	} {
		if only != "" && c.name != only {
			continue
		}
		if _, err := exec.LookPath(c.tool); err != nil {
			t.Logf("no %s: %s not tested", c.tool, c.name)
			continue
		}
		img := filepath.Join(dir, strings.ReplaceAll(c.name, " ", "_"))
		if err := os.WriteFile(img, nil, 0o600); err != nil || os.Truncate(img, c.size) != nil {
			t.Fatal(err)
		}
		msg, err := testutil.OutputBesideDeadMounts(func() *exec.Cmd {
			cmd := exec.Command(c.tool, append(c.args, img)...)
			cmd.Stdin = strings.NewReader(c.stdin)
			return cmd
		})
		if err != nil && testutil.DeadMountRefusal(msg) {
			t.Logf("%s skipped: a dead FUSE mount on this machine, left by something else, stops it: %s", c.name, msg)
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v: %s", c.tool, err, msg)
		}
		b, err := os.ReadFile(img)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, realImage{c.name, c.want, b[:signatureBytes]})
	}
	return out
}

// TestRecognise: what real tools make is recognised, named; random
// bytes (what ciphertext, or plaintext decrypted under a key, look like)
// never are.
func TestRecognise(t *testing.T) {
	for _, im := range realImages(t, "") {
		if got := recognise(im.data); got != im.want {
			t.Errorf("%s: recognised as %q, want %q", im.name, got, im.want)
		}
	}
	vol := &memDev{b: pattern(3<<20, 30)}
	if _, err := EncryptVolume(context.Background(), vol, createOpts(16), 0, Options{}); err != nil {
		t.Fatal(err)
	}
	if got := recognise(vol.b[:signatureBytes]); got != "an xtsctl volume header" {
		t.Errorf("a volume: %q", got)
	}
	b := make([]byte, signatureBytes)
	for i := range 3000 {
		rand.Read(b)
		if got := recognise(b); got != "" {
			t.Fatalf("random bytes (round %d) recognised as %s", i, got)
		}
	}
	if got := recognise(make([]byte, signatureBytes)); got != "" {
		t.Fatalf("zeros recognised as %s", got)
	}
}

// TestPlainGuards: a new plain run whose target already looks converted
// is refused with nothing changed (the journal that would have said so
// was removed): an encryption of data that decrypts under the key to a
// filesystem or partition table, a decryption of data that holds one and
// does not decrypt to one. Force runs it all the same.
func TestPlainGuards(t *testing.T) {
	ctx := context.Background()
	images := realImages(t, "ext4")
	if len(images) == 0 {
		t.Skip("no mkfs.ext4")
	}
	in := append(bytes.Clone(images[0].data), pattern(3<<20, 31)...)
	for _, p := range []plain.Mapping{
		{Sector: sector.Params{Size: 512}},
		{Sector: sector.Params{Size: 4096, IVOffset: 8}, Offset: 8},
		{Sector: sector.Params{Size: 512}, Offset: 2048},
	} {
		enc := straightPlain(t, in, p, testKey)
		var ce *ConvertedError
		// Encrypted, the journal removed, encrypted again.
		tg := &memDev{b: bytes.Clone(enc)}
		_, err := EncryptPlain(ctx, tg, &memJournal{}, p, 0, testKey, Options{})
		if !errors.As(err, &ce) || ce.Direction != Encrypt || !strings.Contains(ce.What, "ext2/3/4") || ce.At != p.OffsetBytes() {
			t.Fatalf("%+v: encrypting the ciphertext again: %v", p, err)
		}
		if !bytes.Equal(tg.b, enc) {
			t.Fatal("a refused run changed the target")
		}
		// Decrypted, the journal removed, decrypted again.
		tg = &memDev{b: bytes.Clone(in)}
		_, err = DecryptPlain(ctx, tg, &memJournal{}, p, testKey, Options{})
		if !errors.As(err, &ce) || ce.Direction != Decrypt || ce.At != 0 {
			t.Fatalf("%+v: decrypting the plaintext: %v", p, err)
		}
		if !bytes.Equal(tg.b, in) {
			t.Fatal("a refused run changed the target")
		}
		// What is asked for, the guards let through.
		tg = &memDev{b: bytes.Clone(in)}
		if _, err := EncryptPlain(ctx, tg, &memJournal{}, p, 0, testKey, Options{}); err != nil || !bytes.Equal(tg.b, enc) {
			t.Fatalf("%+v: encrypting the plaintext: %v", p, err)
		}
		if _, err := DecryptPlain(ctx, tg, &memJournal{}, p, testKey, Options{}); err != nil || !bytes.Equal(tg.b, in) {
			t.Fatalf("%+v: decrypting the ciphertext: %v", p, err)
		}
		// Force: the guard is skipped (twice encrypted, as asked).
		tg = &memDev{b: bytes.Clone(enc)}
		if _, err := EncryptPlain(ctx, tg, &memJournal{}, p, 0, testKey, Options{Force: true}); err != nil || !bytes.Equal(tg.b, straightPlain(t, enc, p, testKey)) {
			t.Fatalf("%+v: forced: %v", p, err)
		}
	}
}
