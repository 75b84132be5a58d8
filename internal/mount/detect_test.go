package mount

import (
	"context"
	"encoding/binary"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/xtsctl/xtsctl/internal/testutil"
)

// toolCommand runs a tool with a time limit: a mkfs that looks at every
// mount can hang on a FUSE mount whose server hangs, anywhere on the
// machine, and must fail the test then rather than stall the package.
func toolCommand(t *testing.T, name string, args ...string) *exec.Cmd {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return exec.CommandContext(ctx, name, args...)
}

// TestDetectMade: Detect names the filesystem of images made by each
// filesystem's own mkfs, as blkid (util-linux, an independent prober)
// names it; a tool that is missing skips its case, naming its package.
func TestDetectMade(t *testing.T) {
	if _, err := exec.LookPath("blkid"); err != nil {
		t.Skip("blkid missing: apt-get install util-linux")
	}
	cases := []struct {
		name, want, blkid, pkg string
		size                   int64
		mkfs                   []string // the image's path is appended
	}{
		{"ext2", FSExt4, "ext2", "e2fsprogs", 8 << 20, []string{"mkfs.ext2", "-q", "-F"}},
		{"ext4", FSExt4, "ext4", "e2fsprogs", 8 << 20, []string{"mkfs.ext4", "-q", "-F"}},
		{"xfs", FSXFS, "xfs", "xfsprogs", 300 << 20, []string{"mkfs.xfs", "-q", "-f"}},
		{"btrfs", FSBtrfs, "btrfs", "btrfs-progs", 128 << 20, []string{"mkfs.btrfs", "-q", "-f"}},
		{"ntfs", FSNTFS, "ntfs", "ntfs-3g", 8 << 20, []string{"mkntfs", "-q", "-F", "-f"}},
		{"exfat", FSExFAT, "exfat", "exfatprogs", 8 << 20, []string{"mkfs.exfat"}},
		{"fat12", FSVFAT, "vfat", "dosfstools", 1 << 20, []string{"mkfs.vfat", "-F", "12"}},
		{"fat16", FSVFAT, "vfat", "dosfstools", 32 << 20, []string{"mkfs.vfat", "-F", "16"}},
		{"fat32", FSVFAT, "vfat", "dosfstools", 64 << 20, []string{"mkfs.vfat", "-F", "32"}},
		{"erofs", FSEROFS, "erofs", "erofs-utils", 0, []string{"mkfs.erofs"}},
		{"squashfs", FSSquashfs, "squashfs", "squashfs-tools", 0, []string{"mksquashfs"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for _, tool := range strings.Fields(strings.Join(c.mkfs[:1], " ")) {
				if _, err := exec.LookPath(tool); err != nil {
					t.Skipf("%s missing: apt-get install %s (scripts/install-deps.sh)", tool, c.pkg)
				}
			}
			img := filepath.Join(t.TempDir(), "fs.img")
			args := append([]string{}, c.mkfs[1:]...)
			switch c.mkfs[0] {
			case "mkfs.erofs":
				args = append(args, img, t.TempDir())
			case "mksquashfs":
				args = []string{t.TempDir(), img, "-quiet", "-noappend"}
			default:
				if err := os.WriteFile(img, nil, 0o600); err != nil {
					t.Fatal(err)
				}
				if err := os.Truncate(img, c.size); err != nil {
					t.Fatal(err)
				}
				args = append(args, img)
			}
			// mkfs.btrfs looks at every mount first and gives up on one
			// whose server is gone, which a test of another package may
			// have left for a moment: it is run again while it does.
			out, err := testutil.OutputBesideDeadMounts(func() *exec.Cmd { return toolCommand(t, c.mkfs[0], args...) })
			if err != nil && testutil.DeadMountRefusal(out) {
				t.Skipf("a dead FUSE mount on this machine, left by something else, stops %s: %s", c.mkfs[0], out)
			}
			if err != nil {
				t.Fatalf("%s: %v\n%s", c.mkfs[0], err, out)
			}
			fi, _ := os.Stat(img)
			if fi.Size() < 4096 { // squashfs and erofs images are as small as they can be
				os.Truncate(img, 4096)
			}
			out, err = toolCommand(t, "blkid", "-p", "-o", "value", "-s", "TYPE", img).Output()
			if err != nil || strings.TrimSpace(string(out)) != c.blkid {
				t.Fatalf("blkid says %q (%v), the test expects %q", out, err, c.blkid)
			}
			if got, err := Detect(img); err != nil || got != c.want {
				t.Errorf("Detect = %q, %v; want %q", got, err, c.want)
			}
		})
	}
}

// TestDetectHeaders: what no mkfs here makes (Debian 12 has no
// mkfs.hfsplus), from the formats' specifications: HFS+ and HFSX volume
// headers, and what must not pass for one.
func TestDetectHeaders(t *testing.T) {
	hfs := func(sig string, version uint16) []byte {
		b := make([]byte, 4096)
		copy(b[1024:], sig)
		binary.BigEndian.PutUint16(b[1026:], version)
		return b
	}
	ext := make([]byte, 4096)
	binary.LittleEndian.PutUint16(ext[1080:], 0xEF53)
	ntfsNoSig := make([]byte, 4096)
	copy(ntfsNoSig[3:], "NTFS    ")
	// An NTFS boot sector whose bytes at 0x36 read as a FAT type: the
	// OEM name is the stronger sign.
	ntfsFAT := make([]byte, 4096)
	copy(ntfsFAT[3:], "NTFS    ")
	copy(ntfsFAT[0x36:], "FAT16   ")
	binary.LittleEndian.PutUint16(ntfsFAT[510:], 0xAA55)
	for _, c := range []struct {
		name string
		b    []byte
		want string
	}{
		{"hfs+", hfs("H+", 4), FSHFSPlus},
		{"hfsx", hfs("HX", 5), FSHFSPlus},
		{"hfs+ with HFSX's version", hfs("H+", 5), ""},
		{"hfs standard", hfs("BD", 0), ""},
		{"ext", ext, FSExt4},
		{"xfs", append([]byte("XFSB"), make([]byte, 4092)...), FSXFS},
		{"ntfs oem name without the boot signature", ntfsNoSig, ""},
		{"ntfs with a fat type string", ntfsFAT, FSNTFS},
		{"zeros", make([]byte, 4096), ""},
		{"short", []byte("NTFS"), ""},
	} {
		if got := detect(c.b); got != c.want {
			t.Errorf("%s: detect = %q, want %q", c.name, got, c.want)
		}
	}
	if _, err := Detect(filepath.Join(t.TempDir(), "none")); err == nil {
		t.Error("Detect of a missing device succeeded")
	}
	small := filepath.Join(t.TempDir(), "small")
	os.WriteFile(small, make([]byte, 100), 0o600)
	if _, err := Detect(small); err == nil {
		t.Error("Detect of a 100-byte device succeeded")
	}
}

// FuzzDetect: any bytes, of any length, name a filesystem or none, and
// never panic.
func FuzzDetect(f *testing.F) {
	f.Add(make([]byte, 4096))
	f.Add([]byte("\xeb\x52\x90NTFS    "))
	f.Fuzz(func(t *testing.T, b []byte) {
		switch got := detect(b); got {
		case "", FSExt4, FSXFS, FSBtrfs, FSVFAT, FSExFAT, FSNTFS, FSHFSPlus, FSSquashfs, FSEROFS:
		default:
			t.Fatalf("detect = %q", got)
		}
	})
}
