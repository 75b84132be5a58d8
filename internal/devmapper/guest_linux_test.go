package devmapper

// Tests against a real kernel's device-mapper and dm-crypt. The machines this
// project runs on have no device-mapper, so scripts/test-dm-vm.sh boots a
// stock Debian kernel under qemu and runs this test binary inside with
// XTSCTL_DM_GUEST set to a directory of images. The images are made on the
// host by TestPrepareGuestImages (XTSCTL_DM_PREPARE=DIR), encrypted by our
// xts package; the guest decrypts them with the kernel's dm-crypt through
// our ioctl code and compares hashes, so each case checks our table units
// against the kernel's, and our XTS against the kernel's.

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/xtsctl/xtsctl/internal/dmtable"
	"github.com/xtsctl/xtsctl/internal/loopdev"
	"github.com/xtsctl/xtsctl/xts"
	"golang.org/x/sys/unix"
)

// A guestCase is one image: Offset sectors of junk, DataSize bytes of
// plaintext encrypted as the table describes, 4 KiB of junk after.
type guestCase struct {
	Name           string
	KeySize        int
	SectorSize     int
	IVLargeSectors bool
	IVOffset       uint64 // 512-byte units
	Offset         uint64 // 512-byte units
	DataSize       int
	PlainSHA256    string
}

var guestCases = []guestCase{
	{Name: "512", KeySize: 64, SectorSize: 512},
	{Name: "4096", KeySize: 64, SectorSize: 4096},
	{Name: "4096-large", KeySize: 64, SectorSize: 4096, IVLargeSectors: true},
	{Name: "512-skip-offset", KeySize: 64, SectorSize: 512, IVOffset: 100, Offset: 64},
	{Name: "4096-skip-offset", KeySize: 64, SectorSize: 4096, IVOffset: 24, Offset: 2048},
	{Name: "4096-large-skip-offset", KeySize: 64, SectorSize: 4096, IVLargeSectors: true, IVOffset: 16, Offset: 8},
	{Name: "2048-large-skip-offset", KeySize: 64, SectorSize: 2048, IVLargeSectors: true, IVOffset: 4, Offset: 12},
	{Name: "aes128-1024-offset", KeySize: 32, SectorSize: 1024, Offset: 2},
}

const guestDataSize = 1 << 20

// tweakPlan is where a case's tweaks start and how far they advance per
// data unit, for xts.EncryptSectors. It is the rule docs/DM.md states:
// tweaks count 512-byte units from IVOffset, or SectorSize units from
// IVOffset*512/SectorSize with iv_large_sectors; Offset plays no part.
func (c *guestCase) tweakPlan() (first, step uint64) {
	units := uint64(c.SectorSize / 512)
	if c.IVLargeSectors {
		return c.IVOffset / units, 1
	}
	return c.IVOffset, units
}

func (c *guestCase) table(key []byte, device string) *CryptTable {
	return &CryptTable{
		Key:            key,
		Device:         device,
		Offset:         c.Offset,
		Length:         uint64(c.DataSize / 512),
		IVOffset:       c.IVOffset,
		SectorSize:     c.SectorSize,
		IVLargeSectors: c.IVLargeSectors,
		ReadOnly:       true,
	}
}

// TestPrepareGuestImages writes the images, keys and case list into
// $XTSCTL_DM_PREPARE. It runs on the host, before the guest boots.
func TestPrepareGuestImages(t *testing.T) {
	dir := os.Getenv("XTSCTL_DM_PREPARE")
	if dir == "" {
		t.Skip("XTSCTL_DM_PREPARE not set: this prepares images for scripts/test-dm-vm.sh")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewChaCha8([32]byte{'x', 't', 's', 'c', 't', 'l'}))
	fill := func(n int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		return b
	}
	var cases []guestCase
	for _, c := range guestCases {
		c.DataSize = guestDataSize
		key := fill(c.KeySize)
		plain := fill(c.DataSize)
		sum := sha256.Sum256(plain)
		c.PlainSHA256 = hex.EncodeToString(sum[:])

		cipher, err := xts.NewCipher(key)
		if err != nil {
			t.Fatal(err)
		}
		first, step := c.tweakPlan()
		ct := make([]byte, len(plain))
		cipher.EncryptSectors(ct, plain, c.SectorSize, first, step)

		image := fill(int(c.Offset) * 512)
		image = append(image, ct...)
		image = append(image, fill(4096)...)
		if err := os.WriteFile(filepath.Join(dir, c.Name+".img"), image, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, c.Name+".key"), key, 0o600); err != nil {
			t.Fatal(err)
		}
		cases = append(cases, c)
	}
	j, err := json.MarshalIndent(cases, "", "\t")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "cases.json"), j, 0o644); err != nil {
		t.Fatal(err)
	}
}

// inGuest skips the test unless it runs inside the test VM, and returns the
// image directory.
func inGuest(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("XTSCTL_DM_GUEST")
	if dir == "" {
		t.Skip("XTSCTL_DM_GUEST not set: runs inside the VM of scripts/test-dm-vm.sh")
	}
	return dir
}

func loadGuestCases(t *testing.T, dir string) []guestCase {
	t.Helper()
	j, err := os.ReadFile(filepath.Join(dir, "cases.json"))
	if err != nil {
		t.Fatal(err)
	}
	var cases []guestCase
	if err := json.Unmarshal(j, &cases); err != nil {
		t.Fatal(err)
	}
	if len(cases) != len(guestCases) {
		t.Fatalf("%d cases prepared, want %d", len(cases), len(guestCases))
	}
	return cases
}

func hashDevice(t *testing.T, path string) string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		t.Fatalf("read %s: %v", path, err)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// attach attaches a case image to a loop device and drops our handle at
// the end of the test; the device then lives only as long as a table holds
// it.
func attach(t *testing.T, path string, readOnly bool) *loopdev.Device {
	t.Helper()
	d, err := loopdev.Attach(path, loopdev.Options{ReadOnly: readOnly})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

// checkNoLeftovers fails if any device-mapper device, mapper node other
// than control, or attached loop device is left. Loop devices clear
// themselves on their last close, which may trail the table's removal.
func checkNoLeftovers(t *testing.T) {
	t.Helper()
	dms, _ := filepath.Glob("/sys/block/dm-*")
	nodes, _ := filepath.Glob(mapperDir + "/*")
	if len(dms) != 0 || len(nodes) != 1 {
		t.Errorf("left behind: %v, %v", dms, nodes)
	}
	var loops []string
	for range 500 {
		if loops, _ = filepath.Glob("/sys/block/loop*/loop/backing_file"); len(loops) == 0 {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Errorf("loop devices still attached: %v", loops)
}

func TestInGuestAvailable(t *testing.T) {
	inGuest(t)
	if err := Available(); err != nil {
		t.Fatalf("Available: %v", err)
	}
	major, minor, patch, err := Version()
	if err != nil || major != 4 {
		t.Fatalf("Version %d.%d.%d, %v", major, minor, patch, err)
	}
	t.Logf("device-mapper ioctl interface %d.%d.%d", major, minor, patch)

	// Without the control node, as in a /dev without devtmpfs or udev,
	// Available makes it from /proc/misc.
	if err := os.Remove(controlPath); err != nil {
		t.Fatal(err)
	}
	if err := Available(); err != nil {
		t.Fatalf("Available without %s: %v", controlPath, err)
	}
	var st unix.Stat_t
	if err := unix.Stat(controlPath, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFCHR || unix.Major(st.Rdev) != 10 {
		t.Errorf("recreated %s: %+v, %v", controlPath, st, err)
	}
}

func TestInGuestCrypt(t *testing.T) {
	dir := inGuest(t)
	for _, c := range loadGuestCases(t, dir) {
		t.Run(c.Name, func(t *testing.T) {
			key, err := os.ReadFile(filepath.Join(dir, c.Name+".key"))
			if err != nil {
				t.Fatal(err)
			}
			loop := attach(t, filepath.Join(dir, c.Name+".img"), true)
			device := fmt.Sprintf("%d:%d", loop.Major, loop.Minor)
			if c.Name == "512" {
				device = loop.Path // a path works as well as major:minor
			}
			name := "xtsctl-" + c.Name
			tab := c.table(key, device)
			path, err := CreateCrypt(name, tab)
			if err != nil {
				t.Fatal(err)
			}
			removed := false
			defer func() {
				if !removed {
					Remove(name)
				}
			}()
			loop.Close() // the table holds the loop device now

			if got := hashDevice(t, path); got != c.PlainSHA256 {
				t.Errorf("dm-crypt plaintext sha256 %s, want %s", got, c.PlainSHA256)
			}
			checkStatus(t, name, path, tab)
			checkTable(t, name, tab, key, loop)

			if err := Remove(name); err != nil {
				t.Fatal(err)
			}
			removed = true
			if _, err := os.Lstat(path); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("%s still there after Remove: %v", path, err)
			}
			if _, err := Status(name); !errors.Is(err, ErrNotFound) {
				t.Errorf("Status after Remove: %v, want ErrNotFound", err)
			}

			// A table that disagrees with the image on the tweak rule
			// must not decrypt it: this is what makes the hash check
			// above able to fail.
			wrong := c
			switch {
			case c.SectorSize > 512:
				wrong.IVLargeSectors = !c.IVLargeSectors
			case c.IVOffset != 0:
				wrong.IVOffset = 0
			default:
				wrong.IVOffset = 8
			}
			loop = attach(t, filepath.Join(dir, c.Name+".img"), true)
			path, err = CreateCrypt(name, wrong.table(key, loop.Path))
			if err != nil {
				t.Fatal(err)
			}
			removed = false
			loop.Close()
			if got := hashDevice(t, path); got == c.PlainSHA256 {
				t.Errorf("a table with the wrong tweaks (%+v) decrypted the image too", wrong)
			}
		})
	}
	checkNoLeftovers(t)
}

func checkStatus(t *testing.T, name, path string, tab *CryptTable) {
	t.Helper()
	st, err := Status(name)
	if err != nil {
		t.Fatal(err)
	}
	var node unix.Stat_t
	if err := unix.Stat(path, &node); err != nil {
		t.Fatal(err)
	}
	if node.Mode&unix.S_IFMT != unix.S_IFBLK || unix.Major(node.Rdev) != st.Major || unix.Minor(node.Rdev) != st.Minor {
		t.Errorf("%s is %#o %d:%d, status says %d:%d", path, node.Mode, unix.Major(node.Rdev), unix.Minor(node.Rdev), st.Major, st.Minor)
	}
	// The kernel's own view of the device number and name, from sysfs.
	sys := fmt.Sprintf("/sys/dev/block/%d:%d/dm/", st.Major, st.Minor)
	if b, err := os.ReadFile(sys + "name"); err != nil || strings.TrimSpace(string(b)) != name {
		t.Errorf("sysfs %sname = %q, %v; want %q", sys, b, err, name)
	}
	if b, err := os.ReadFile(sys + "uuid"); err != nil || strings.TrimSpace(string(b)) != uuidPrefix+name {
		t.Errorf("sysfs %suuid = %q, %v", sys, b, err)
	}
	if st.Name != name || !st.Ours() || !st.LiveTable || st.InactiveTable || st.Suspended ||
		st.ReadOnly != tab.ReadOnly || st.TargetCount != 1 || st.OpenCount != 0 {
		t.Errorf("status %+v", st.Info)
	}
	if len(st.Targets) != 1 || st.Targets[0].Type != "crypt" || st.Targets[0].Start != 0 || st.Targets[0].Length != tab.Length {
		t.Errorf("status targets %+v", st.Targets)
	}
	if b, err := os.ReadFile(fmt.Sprintf("/sys/dev/block/%d:%d/size", st.Major, st.Minor)); err != nil ||
		strings.TrimSpace(string(b)) != strconv.FormatUint(tab.Length, 10) {
		t.Errorf("sysfs size %q, %v; want %d sectors", b, err, tab.Length)
	}
}

func checkTable(t *testing.T, name string, tab *CryptTable, key []byte, loop *loopdev.Device) {
	t.Helper()
	targets, err := Table(name)
	if err != nil {
		t.Fatal(err)
	}
	if len(targets) != 1 || targets[0].Type != "crypt" {
		t.Fatalf("table %v", targets)
	}
	p := targets[0].Params
	if strings.Contains(p, hex.EncodeToString(key)[:16]) {
		t.Fatalf("Table shows the key")
	}
	// The kernel prints the table back in the order we wrote it, with the
	// device as major:minor and the key masked: our String().
	want := *tab
	want.Device = fmt.Sprintf("%d:%d", loop.Major, loop.Minor)
	if line := "0 " + strconv.FormatUint(targets[0].Length, 10) + " crypt " + p; line != want.String() {
		t.Errorf("kernel table\n %s\nwant\n %s", line, want.String())
	}
	ci, err := dmtable.ParseCrypt(p)
	if err != nil {
		t.Fatal(err)
	}
	if ci.Cipher != DefaultCipher || ci.KeySize != len(key) || ci.IVOffset != tab.IVOffset || ci.Offset != tab.Offset ||
		ci.Device != want.Device || ci.SectorSize != max(tab.SectorSize, 512) || ci.IVLargeSectors != (tab.IVLargeSectors && max(tab.SectorSize, 512) > 512) {
		t.Errorf("parsed kernel table %+v, loaded %v", ci, tab)
	}
}

// TestInGuestWriteThrough writes through a read-write mapping and checks the
// ciphertext the kernel put in the image against our xts: the encrypt
// direction, where the read test covers decrypt.
func TestInGuestWriteThrough(t *testing.T) {
	inGuest(t)
	const sectorSize, ivOffset, offset, size = 4096, 64, 16, 256 << 10
	img := filepath.Join(t.TempDir(), "rw.img")
	if err := os.WriteFile(img, make([]byte, offset*512+size), 0o600); err != nil {
		t.Fatal(err)
	}
	key := bytes.Repeat([]byte{0x5a, 0xc3}, 32)
	key[63] ^= 0x80 // xts.NewCipher refuses equal halves
	c := guestCase{SectorSize: sectorSize, IVOffset: ivOffset, Offset: offset, DataSize: size}
	for _, large := range []bool{false, true} {
		c.IVLargeSectors = large
		loop := attach(t, img, false)
		tab := c.table(key, loop.Path)
		tab.ReadOnly = false
		path, err := CreateCrypt("xtsctl-rw", tab)
		if err != nil {
			t.Fatal(err)
		}
		loop.Close()
		plain := make([]byte, size)
		rng := rand.New(rand.NewPCG(1, 2))
		for i := range plain {
			plain[i] = byte(rng.Uint32())
		}
		f, err := os.OpenFile(path, os.O_WRONLY, 0)
		if err == nil {
			_, err = f.Write(plain)
			if err == nil {
				err = f.Sync()
			}
			f.Close()
		}
		if rerr := Remove("xtsctl-rw"); err == nil {
			err = rerr
		}
		if err != nil {
			t.Fatal(err)
		}

		image, err := os.ReadFile(img)
		if err != nil {
			t.Fatal(err)
		}
		cipher, err := xts.NewCipher(key)
		if err != nil {
			t.Fatal(err)
		}
		first, step := c.tweakPlan()
		want := make([]byte, size)
		cipher.EncryptSectors(want, plain, sectorSize, first, step)
		if !bytes.Equal(image[offset*512:], want) {
			t.Errorf("iv_large_sectors=%v: dm-crypt's ciphertext differs from ours", large)
		}
		if !bytes.Equal(image[:offset*512], make([]byte, offset*512)) {
			t.Errorf("iv_large_sectors=%v: the write reached the bytes before the offset", large)
		}
	}
	checkNoLeftovers(t)
}

// TestInGuestSeveralTargets loads a two-target table and reads it back
// through a status buffer too small for it, so the kernel must set
// DM_BUFFER_FULL_FLAG and we must retry.
func TestInGuestSeveralTargets(t *testing.T) {
	dir := inGuest(t)
	c := loadGuestCases(t, dir)[0]
	key, err := os.ReadFile(filepath.Join(dir, c.Name+".key"))
	if err != nil {
		t.Fatal(err)
	}
	loop := attach(t, filepath.Join(dir, c.Name+".img"), true)
	half := uint64(c.DataSize / 512 / 2)
	crypt := c.table(key, loop.Path)
	crypt.Length = half
	// The second half through a crypt target whose IV offset continues
	// the first one, so the two together decrypt the whole image.
	second := *crypt
	second.Offset += half
	second.IVOffset += half
	st := cryptTarget(&second)
	st.start = half
	lin := rawParams(2*half, 8, "linear", loop.Path+" 0")
	path, err := createDevice("xtsctl-multi", true, []loadTarget{cryptTarget(crypt), st, lin})
	if err != nil {
		t.Fatal(err)
	}
	defer Remove("xtsctl-multi")
	loop.Close()

	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	h := sha256.New()
	_, err = io.CopyN(h, f, int64(c.DataSize))
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != c.PlainSHA256 {
		t.Errorf("two crypt targets: sha256 %s, want %s", got, c.PlainSHA256)
	}

	var sizes []int
	err = withClient(func(cl *client) error {
		cl.statusBuffer = 8
		kernel := cl.ioctl
		cl.ioctl = func(cmd uint32, buf []byte) error {
			sizes = append(sizes, len(buf))
			return kernel(cmd, buf)
		}
		_, targets, err := cl.tableStatus("xtsctl-multi", true)
		if err != nil {
			return err
		}
		if len(targets) != 3 || targets[0].Type != "crypt" || targets[1].Type != "crypt" || targets[2].Type != "linear" ||
			targets[1].Start != half || targets[2].Start != 2*half || targets[2].Length != 8 {
			return fmt.Errorf("targets %+v", targets)
		}
		if want := fmt.Sprintf("%d:%d 0", loop.Major, loop.Minor); targets[2].Params != want {
			return fmt.Errorf("linear params %q, want %q", targets[2].Params, want)
		}
		for i, tg := range targets[:2] {
			ci, err := dmtable.ParseCrypt(tg.Params)
			if err != nil {
				return err
			}
			if ci.IVOffset != uint64(i)*half || ci.Offset != uint64(i)*half || ci.KeySize != len(key) {
				return fmt.Errorf("crypt target %d: %+v", i, ci)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(sizes) < 3 || sizes[0] != ioctlHeaderSize+8 {
		t.Errorf("status buffer sizes %v: want retries from %d bytes", sizes, ioctlHeaderSize+8)
	}
	t.Logf("table status buffer sizes: %v", sizes)
}

func TestInGuestErrors(t *testing.T) {
	dir := inGuest(t)
	c := loadGuestCases(t, dir)[0]
	key, err := os.ReadFile(filepath.Join(dir, c.Name+".key"))
	if err != nil {
		t.Fatal(err)
	}
	img := filepath.Join(dir, c.Name+".img")

	if err := Remove("xtsctl-none"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Remove of a missing device: %v, want ErrNotFound", err)
	}

	loop := attach(t, img, true)
	path, err := CreateCrypt("xtsctl-err", c.table(key, loop.Path))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := CreateCrypt("xtsctl-err", c.table(key, loop.Path)); !errors.Is(err, ErrExists) {
		t.Errorf("second CreateCrypt with the same name: %v, want ErrExists", err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := Remove("xtsctl-err"); !errors.Is(err, ErrBusy) {
		t.Errorf("Remove while open: %v, want ErrBusy", err)
	}
	if got := hashDevice(t, path); got != c.PlainSHA256 {
		t.Error("the device broke after the failed create and remove")
	}
	f.Close()
	if err := Remove("xtsctl-err"); err != nil {
		t.Fatal(err)
	}

	// Tables the kernel rejects leave no device and no node behind.
	tooLong := c.table(key, loop.Path)
	tooLong.Length += 16 // past the image's 4 KiB tail
	noDevice := c.table(key, "/dev/xtsctl-no-such-device")
	badIV := c.table(key, loop.Path)
	badIV.Cipher = "aes-xts-nosuchiv"
	for name, tab := range map[string]*CryptTable{"too-long": tooLong, "no-device": noDevice, "bad-iv": badIV} {
		_, err := CreateCrypt("xtsctl-"+name, tab)
		if err == nil {
			t.Errorf("%s: CreateCrypt accepted it", name)
			Remove("xtsctl-" + name)
			continue
		}
		t.Logf("%s: %v", name, err)
		if _, err := Status("xtsctl-" + name); !errors.Is(err, ErrNotFound) {
			t.Errorf("%s: device left after the failed create: %v", name, err)
		}
		if _, err := os.Lstat(DevPath("xtsctl-" + name)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s: node left after the failed create", name)
		}
	}

	// The kernel wants the data start aligned to the sector size (its
	// reason, in the log: "start=1 not aligned to h/w logical block size
	// 4096 of loop0"). Validate says so first; past it, the kernel refuses.
	c4k := loadGuestCases(t, dir)[1]
	if c4k.SectorSize != 4096 {
		t.Fatalf("case 1 is %s, want a 4096-byte one", c4k.Name)
	}
	misaligned := c4k.table(bytes.Repeat([]byte{1}, 64), loop.Path)
	misaligned.Offset = 1
	if _, err := CreateCrypt("xtsctl-misaligned", misaligned); err == nil || !strings.Contains(err.Error(), "offset 1 is not a multiple") {
		t.Errorf("CreateCrypt with a misaligned offset: %v", err)
	}
	if _, err := createDevice("xtsctl-misaligned", true, []loadTarget{cryptTarget(misaligned)}); err == nil {
		Remove("xtsctl-misaligned")
		t.Error("the kernel accepted a data start not aligned to the sector size")
	} else {
		t.Logf("misaligned offset, past Validate: %v", err)
	}
	loop.Close()
	checkNoLeftovers(t)
}
