package fsblock

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/xtsctl/xtsctl/internal/testutil"
)

// mkfs makes a sparse image of size bytes and runs tool on it; it skips
// the test when the tool is missing (scripts/install-deps.sh installs
// them all).
func mkfs(t *testing.T, size int64, tool string, args ...string) string {
	t.Helper()
	if _, err := exec.LookPath(tool); err != nil {
		t.Skipf("%s missing (scripts/install-deps.sh installs it)", tool)
	}
	img := filepath.Join(t.TempDir(), "fs.img")
	if err := os.WriteFile(img, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(img, size); err != nil {
		t.Fatal(err)
	}
	// mkfs.btrfs gives up beside a dead FUSE mount: run again until it
	// goes (testutil); one left by something else skips the case.
	out, err := testutil.OutputBesideDeadMounts(func() *exec.Cmd { return exec.Command(tool, append(args, img)...) })
	if err != nil && testutil.DeadMountRefusal(out) {
		t.Skipf("%s %s: a dead FUSE mount on this machine, left by something else, stops it: %s", tool, strings.Join(args, " "), out)
	}
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", tool, strings.Join(args, " "), err, out)
	}
	return img
}

func probeFile(t *testing.T, img string) FS {
	t.Helper()
	f, err := os.Open(img)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	fs, err := Probe(f, st.Size())
	if err != nil {
		t.Fatal(err)
	}
	return fs
}

// blkid asks util-linux's libblkid, an independent reader of the same
// superblocks, for the type and BLOCK_SIZE, which it defines as this
// package's IOSize (ext's block size, XFS's sector size, btrfs's sector
// size, the FAT/exFAT/NTFS bytes per sector). ok is false without blkid.
func blkid(t *testing.T, img string) (typ string, size int, ok bool) {
	t.Helper()
	if _, err := exec.LookPath("blkid"); err != nil {
		return "", 0, false
	}
	out, err := exec.Command("blkid", "-p", "-o", "export", img).Output()
	if err != nil {
		t.Fatalf("blkid %s: %v", img, err)
	}
	for line := range strings.SplitSeq(string(out), "\n") {
		if v, found := strings.CutPrefix(line, "TYPE="); found {
			typ = v
		}
		if v, found := strings.CutPrefix(line, "BLOCK_SIZE="); found {
			size, _ = strconv.Atoi(v)
		}
	}
	return typ, size, size != 0
}

// TestRealFilesystems: images made by each filesystem's own mkfs, with
// each block or sector size it offers, read as made, and as libblkid
// reads them.
func TestRealFilesystems(t *testing.T) {
	const M = 1 << 20
	for _, c := range []struct {
		tool string
		size int64
		args []string
		want FS
	}{
		{"mkfs.ext2", 64 * M, []string{"-q", "-F", "-b", "1024"}, FS{"ext2", 1024, 1024}},
		{"mkfs.ext2", 64 * M, []string{"-q", "-F", "-b", "4096"}, FS{"ext2", 4096, 4096}},
		{"mkfs.ext3", 64 * M, []string{"-q", "-F", "-b", "2048"}, FS{"ext3", 2048, 2048}},
		{"mkfs.ext4", 64 * M, []string{"-q", "-F"}, FS{"ext4", 1024, 1024}}, // mkfs's choice below 512 MiB
		{"mkfs.ext4", 64 * M, []string{"-q", "-F", "-b", "1024"}, FS{"ext4", 1024, 1024}},
		{"mkfs.ext4", 64 * M, []string{"-q", "-F", "-b", "4096"}, FS{"ext4", 4096, 4096}},
		{"mkfs.ext4", 64 * M, []string{"-q", "-F", "-b", "1024", "-O", "bigalloc", "-C", "16384"}, FS{"ext4", 1024, 1024}},
		{"mkfs.xfs", 320 * M, []string{"-q", "-f"}, FS{"xfs", 4096, 512}},
		{"mkfs.xfs", 320 * M, []string{"-q", "-f", "-s", "size=4096"}, FS{"xfs", 4096, 4096}},
		{"mkfs.xfs", 320 * M, []string{"-q", "-f", "-b", "size=1024"}, FS{"xfs", 1024, 512}},
		{"mkfs.xfs", 320 * M, []string{"-q", "-f", "-b", "size=2048", "-s", "size=2048"}, FS{"xfs", 2048, 2048}},
		{"mkfs.btrfs", 320 * M, []string{"-q", "-f"}, FS{"btrfs", 4096, 4096}},
		{"mkfs.vfat", 4 * M, []string{"-F", "12"}, FS{"vfat", 2048, 512}},
		{"mkfs.vfat", 64 * M, []string{"-F", "16", "-S", "1024", "-s", "4"}, FS{"vfat", 4096, 1024}},
		{"mkfs.vfat", 320 * M, []string{"-F", "32"}, FS{"vfat", 4096, 512}},
		{"mkfs.vfat", 320 * M, []string{"-F", "32", "-S", "4096", "-s", "1"}, FS{"vfat", 4096, 4096}},
		{"mkfs.vfat", 64 * M, []string{"-F", "16", "-S", "2048", "-s", "1"}, FS{"vfat", 2048, 2048}},
		{"mkfs.ntfs", 64 * M, []string{"-q", "-F", "-f"}, FS{"ntfs", 4096, 512}},
		{"mkfs.ntfs", 64 * M, []string{"-q", "-F", "-f", "-s", "4096", "-c", "8192"}, FS{"ntfs", 8192, 4096}},
		{"mkfs.ntfs", 64 * M, []string{"-q", "-F", "-f", "-s", "1024", "-c", "1024"}, FS{"ntfs", 1024, 1024}},
		{"mkfs.exfat", 64 * M, nil, FS{"exfat", 4096, 512}},
		{"mkfs.exfat", 64 * M, []string{"-c", "32K"}, FS{"exfat", 32768, 512}},
	} {
		name := c.tool + " " + strings.Join(c.args, " ")
		t.Run(strings.ReplaceAll(name, "/", "_"), func(t *testing.T) {
			img := mkfs(t, c.size, c.tool, c.args...)
			got := probeFile(t, img)
			if got != c.want {
				t.Fatalf("Probe = %+v (%s), want %+v", got, got, c.want)
			}
			if typ, size, ok := blkid(t, img); ok && (typ != got.Type || size != got.IOSize) {
				t.Errorf("blkid says %s with BLOCK_SIZE %d; Probe %s with IOSize %d", typ, size, got.Type, got.IOSize)
			}
		})
	}
}

// TestUnknown: what is no filesystem, or one this package does not know,
// is unknown, and allows every sector size.
func TestUnknown(t *testing.T) {
	for name, b := range map[string][]byte{
		"empty":     nil,
		"zeros":     make([]byte, 1<<20),
		"short":     []byte("XFSB"),
		"ff":        bytes.Repeat([]byte{0xff}, 128<<10),
		"text":      bytes.Repeat([]byte("hello, world\n"), 10000),
		"mbr alone": mbr(),
	} {
		fs, err := Probe(bytes.NewReader(b), int64(len(b)))
		if err != nil || fs.Known() || fs != (FS{}) {
			t.Errorf("%s: %+v, %v", name, fs, err)
		}
		for _, ss := range []int{512, 1024, 2048, 4096} {
			if !fs.Allows(ss) {
				t.Errorf("%s: unknown does not allow %d", name, ss)
			}
		}
	}
	if _, err := Probe(failReader{}, 1<<20); err == nil || !strings.Contains(err.Error(), "cannot read the filesystem's superblock") {
		t.Errorf("read error: %v", err)
	}
}

type failReader struct{}

func (failReader) ReadAt([]byte, int64) (int, error) { return 0, errors.New("I/O error") }

// mbr is a partition table with GRUB's jump (EB 63 90) and a boot
// signature, and one partition: a disk image, not a filesystem.
func mbr() []byte {
	b := make([]byte, 64<<10)
	b[0], b[1], b[2] = 0xeb, 0x63, 0x90
	copy(b[446:], []byte{0x80, 0, 0x21, 0, 0x83, 0, 0, 0, 0, 8, 0, 0, 0, 0, 1, 0})
	b[510], b[511] = 0x55, 0xaa
	return b
}

// image returns a fresh copy of a real filesystem's first 68 KiB, for the
// hostile edits below.
func image(t *testing.T, tool string, size int64, args ...string) []byte {
	t.Helper()
	b, err := os.ReadFile(mkfs(t, size, tool, args...))
	if err != nil {
		t.Fatal(err)
	}
	return b[:btrfsOffset+blockSize]
}

// TestHostileSuperblocks: a real superblock with one field rewritten to a
// value its filesystem does not allow is not believed (unknown, never a
// size from the field), and never makes Probe panic.
func TestHostileSuperblocks(t *testing.T) {
	type edit struct {
		name string
		do   func(b []byte)
	}
	put16 := func(off int, v uint16) func([]byte) {
		return func(b []byte) { binary.LittleEndian.PutUint16(b[off:], v) }
	}
	put32 := func(off int, v uint32) func([]byte) {
		return func(b []byte) { binary.LittleEndian.PutUint32(b[off:], v) }
	}
	bput16 := func(off int, v uint16) func([]byte) { return func(b []byte) { binary.BigEndian.PutUint16(b[off:], v) } }
	bput32 := func(off int, v uint32) func([]byte) { return func(b []byte) { binary.BigEndian.PutUint32(b[off:], v) } }
	set := func(off int, v byte) func([]byte) { return func(b []byte) { b[off] = v } }
	resumBtrfs := func(e func([]byte)) func([]byte) {
		return func(b []byte) {
			e(b)
			sb := b[btrfsOffset:]
			binary.LittleEndian.PutUint32(sb, crcCastagnoli(sb[0x20:blockSize]))
		}
	}
	const M = 1 << 20
	for _, c := range []struct {
		tool  string
		size  int64
		args  []string
		edits []edit
	}{
		{"mkfs.ext4", 64 * M, []string{"-q", "-F"}, []edit{
			{"log block size 7", put32(1024+24, 7)},
			{"log block size 2^32-1", put32(1024+24, 0xffffffff)},
			{"log block size 22 (4 GiB)", put32(1024+24, 22)},
			{"first data block 5", put32(1024+20, 5)},
			{"first data block 1 with 4 KiB blocks", func(b []byte) { put32(1024+24, 2)(b); put32(1024+20, 1)(b) }},
			{"no inodes", put32(1024, 0)},
			{"no blocks per group", put32(1024+32, 0)},
		}},
		{"mkfs.xfs", 320 * M, []string{"-q", "-f"}, []edit{
			{"block size 0", bput32(4, 0)},
			{"block size 2^32-1", bput32(4, 0xffffffff)},
			{"block size 3000", bput32(4, 3000)},
			{"block size 1 GiB", func(b []byte) { bput32(4, 1<<30)(b); set(120, 30)(b) }},
			{"sector size 0", bput16(102, 0)},
			{"sector size 256", func(b []byte) { bput16(102, 256)(b); set(121, 8)(b) }},
			{"sector size 65535", bput16(102, 0xffff)},
			{"sector size above the block size", func(b []byte) { bput16(102, 8192)(b); set(121, 13)(b) }},
			{"sector log disagrees", set(121, 12)},
			{"block log disagrees", set(120, 9)},
		}},
		{"mkfs.btrfs", 320 * M, []string{"-q", "-f"}, []edit{
			{"checksum", set(btrfsOffset+0x90, 0x10)},
			{"sector size 0", resumBtrfs(put32(btrfsOffset+0x90, 0))},
			{"sector size 2^32-1", resumBtrfs(put32(btrfsOffset+0x90, 0xffffffff))},
			{"sector size 1 GiB", resumBtrfs(put32(btrfsOffset+0x90, 1<<30))},
			{"sector size 6000", resumBtrfs(put32(btrfsOffset+0x90, 6000))},
			{"node size below the sector size", resumBtrfs(put32(btrfsOffset+0x94, 2048))},
			{"superblock says it is elsewhere", resumBtrfs(put32(btrfsOffset+0x30, 0))},
		}},
		{"mkfs.vfat", 64 * M, []string{"-F", "16"}, []edit{
			{"bytes per sector 0", put16(11, 0)},
			{"bytes per sector 65535", put16(11, 0xffff)},
			{"bytes per sector 8192", put16(11, 8192)},
			{"bytes per sector 256", put16(11, 256)},
			{"sectors per cluster 0", set(13, 0)},
			{"sectors per cluster 3", set(13, 3)},
			{"no reserved sectors", put16(14, 0)},
			{"no FATs", set(16, 0)},
			{"media 0x12", set(21, 0x12)},
			{"no boot signature", set(510, 0)},
		}},
		{"mkfs.ntfs", 64 * M, []string{"-q", "-F", "-f"}, []edit{
			{"bytes per sector 0", put16(11, 0)},
			{"bytes per sector 65535", put16(11, 0xffff)},
			{"bytes per sector 8192", put16(11, 8192)},
			{"sectors per cluster 0", set(13, 0)},
			{"sectors per cluster 2^(256-128)", set(13, 0x81)},
			{"sectors per cluster 2^(256-0xf0)", set(13, 0xf0)},
			{"sectors per cluster 6", set(13, 6)},
		}},
		{"mkfs.exfat", 64 * M, nil, []edit{
			{"sector shift 8", set(108, 8)},
			{"sector shift 13", set(108, 13)},
			{"sector shift 255", set(108, 255)},
			{"cluster shift 255", set(109, 255)},
			{"cluster shift 17 with 512-byte sectors", set(109, 17)},
			{"a BPB where exFAT has zeros", put16(11, 512)},
		}},
	} {
		// Each tool on its own: one missing, or stopped by a dead
		// mount, skips only its own edits.
		t.Run(c.tool, func(t *testing.T) {
			orig := image(t, c.tool, c.size, c.args...)
			if fs, _ := Probe(bytes.NewReader(orig), int64(len(orig))); !fs.Known() {
				t.Fatalf("%s: the unedited image is not recognised", c.tool)
			}
			for _, e := range c.edits {
				b := bytes.Clone(orig)
				e.do(b)
				fs, err := Probe(bytes.NewReader(b), int64(len(b)))
				if err != nil || fs.Known() {
					t.Errorf("%s, %s: %+v (%s), %v", c.tool, e.name, fs, fs, err)
				}
			}
			// Cut short anywhere: never a panic, never a read past the end.
			for _, n := range []int{0, 1, 11, 512, 1023, 1100, 2047, 4095, btrfsOffset + 0x41, btrfsOffset + 0x93} {
				if n > len(orig) {
					continue
				}
				r := &boundedReader{b: orig[:n]}
				if _, err := Probe(r, int64(n)); err != nil || r.past {
					t.Errorf("%s cut to %d bytes: %v, read past the end %v", c.tool, n, err, r.past)
				}
			}
		})
	}
}

// boundedReader notes a read beyond its end (Probe is told the size).
type boundedReader struct {
	b    []byte
	past bool
}

func (r *boundedReader) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 || off+int64(len(p)) > int64(len(r.b)) {
		r.past = true
	}
	return bytes.NewReader(r.b).ReadAt(p, off)
}

// crcCastagnoli is the test's own CRC-32C (bitwise, reflected 0x82F63B78),
// not the package's table, so that a wrong checksum there shows.
func crcCastagnoli(b []byte) uint32 {
	crc := ^uint32(0)
	for _, c := range b {
		crc ^= uint32(c)
		for range 8 {
			if crc&1 != 0 {
				crc = crc>>1 ^ 0x82f63b78
			} else {
				crc >>= 1
			}
		}
	}
	return ^crc
}

// TestProbeAllocates: Probe's allocations do not depend on what the image
// says (a hostile size field cannot make it allocate).
func TestProbeAllocates(t *testing.T) {
	zeros := bytes.NewReader(make([]byte, 128<<10))
	hostile := make([]byte, 128<<10)
	for i := range hostile {
		hostile[i] = 0xff
	}
	copy(hostile[3:], "NTFS    ")
	copy(hostile[1024+56:], []byte{0x53, 0xef})
	copy(hostile, "XFSB")
	h := bytes.NewReader(hostile)
	a := testing.AllocsPerRun(20, func() { Probe(zeros, 128<<10) })
	b := testing.AllocsPerRun(20, func() { Probe(h, 128<<10) })
	if a != b || b > 4 {
		t.Errorf("allocations: %v for zeros, %v for a hostile image", a, b)
	}
}

func TestChooseSectorSize(t *testing.T) {
	ext1k := FS{"ext4", 1024, 1024}
	xfs512 := FS{"xfs", 4096, 512}
	btrfs4k := FS{"btrfs", 4096, 4096}
	for _, c := range []struct {
		fs            FS
		explicit, def int
		want          int
		lowered       bool
		refused       bool
	}{
		{FS{}, 0, 4096, 4096, false, false},
		{FS{}, 4096, 512, 4096, false, false},
		{ext1k, 0, 4096, 1024, true, false},
		{ext1k, 0, 512, 512, false, false},
		{ext1k, 1024, 4096, 1024, false, false},
		{ext1k, 512, 4096, 512, false, false},
		{ext1k, 2048, 4096, 0, false, true},
		{ext1k, 4096, 512, 0, false, true},
		{xfs512, 0, 4096, 512, true, false},
		{xfs512, 1024, 4096, 0, false, true},
		{btrfs4k, 0, 4096, 4096, false, false},
		{btrfs4k, 512, 4096, 512, false, false},
		{FS{"ext4", 65536, 65536}, 0, 4096, 4096, false, false},
	} {
		got, lowered, err := ChooseSectorSize(c.fs, c.explicit, c.def)
		var se *SizeError
		if c.refused {
			if !errors.As(err, &se) || se.SectorSize != c.explicit || se.FS != c.fs {
				t.Errorf("%+v, explicit %d: %v, want a refusal", c.fs, c.explicit, err)
			}
			continue
		}
		if err != nil || got != c.want || lowered != c.lowered {
			t.Errorf("%+v, explicit %d, default %d: %d (lowered %v), %v; want %d (%v)", c.fs, c.explicit, c.def, got, lowered, err, c.want, c.lowered)
		}
	}
	_, _, err := ChooseSectorSize(ext1k, 4096, 4096)
	if want := "it holds an ext4 filesystem with 1024-byte blocks: a device with 4096-byte sectors could not mount it"; err == nil || err.Error() != want {
		t.Errorf("message %q, want %q", err, want)
	}
}

// FuzzProbe: whatever the bytes, Probe neither panics nor reads past the
// size it is given, and what it recognises has sizes a filesystem can
// have, which ChooseSectorSize turns into a size it allows.
func FuzzProbe(f *testing.F) {
	f.Add([]byte{})
	f.Add(mbr())
	seed := make([]byte, btrfsOffset+blockSize)
	copy(seed, "XFSB")
	f.Add(seed)
	for _, c := range []struct {
		tool string
		size int64
		args []string
	}{
		{"mkfs.ext4", 64 << 20, []string{"-q", "-F"}},
		{"mkfs.xfs", 320 << 20, []string{"-q", "-f"}},
		{"mkfs.btrfs", 320 << 20, []string{"-q", "-f"}},
		{"mkfs.vfat", 64 << 20, []string{"-F", "32"}},
		{"mkfs.ntfs", 64 << 20, []string{"-q", "-F", "-f"}},
		{"mkfs.exfat", 64 << 20, nil},
	} {
		if _, err := exec.LookPath(c.tool); err != nil {
			continue
		}
		img := filepath.Join(f.TempDir(), fmt.Sprintf("seed%d.img", len(c.tool)))
		os.WriteFile(img, nil, 0o600)
		os.Truncate(img, c.size)
		if exec.Command(c.tool, append(c.args, img)...).Run() != nil {
			continue
		}
		b, err := os.ReadFile(img)
		if err == nil {
			f.Add(b[:btrfsOffset+blockSize])
		}
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		r := &boundedReader{b: b}
		fs, err := Probe(r, int64(len(b)))
		if err != nil || r.past {
			t.Fatalf("Probe: %v, read past the end %v", err, r.past)
		}
		if !fs.Known() {
			if fs != (FS{}) {
				t.Fatalf("unknown but %+v", fs)
			}
			return
		}
		if fs.IOSize < 512 || fs.IOSize > 64<<10 || fs.IOSize&(fs.IOSize-1) != 0 || fs.BlockSize < fs.IOSize || fs.BlockSize > 64<<20 {
			t.Fatalf("%s: sizes %+v", fs.Type, fs)
		}
		ss, _, err := ChooseSectorSize(fs, 0, 4096)
		if err != nil || ss < 512 || ss > 4096 || !fs.Allows(ss) {
			t.Fatalf("%+v: chose %d, %v", fs, ss, err)
		}
	})
}
