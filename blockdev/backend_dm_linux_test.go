//go:build linux

package blockdev

// Tests of the dm backend that run without device-mapper: the choice of
// backend, the table, read-only forcing, the state record, and what open
// and close do to the image around the device. TestDMBackendVM runs the
// backend for real, in a qemu guest.

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/xtsctl/xtsctl/disk"
	"github.com/xtsctl/xtsctl/internal/devmapper"
	"github.com/xtsctl/xtsctl/internal/dmtable"
	"github.com/xtsctl/xtsctl/luks"
	plainpkg "github.com/xtsctl/xtsctl/plain"
	"github.com/xtsctl/xtsctl/sector"
	"github.com/xtsctl/xtsctl/volume"
	"golang.org/x/sys/unix"
)

// fakeDM makes the dm backend see device-mapper as available (err nil) or
// missing with err, for the rest of the test.
func fakeDM(t *testing.T, err error) {
	t.Helper()
	saved := dmAvailable
	dmAvailable = func() error { return err }
	t.Cleanup(func() { dmAvailable = saved })
}

// TestDMTable: the table the dm backend loads, byte for byte, for volumes
// and LUKS images (from their headers) and plain images (from the open
// flags), each unlocked by its format. The expected lines are worked out
// by hand from docs/FORMAT.md's layout and docs/DM.md's units: a 2 MiB
// data area at 1 MiB is 4096 sectors at sector 2048; tweaks count
// 512-byte units unless iv_large_sectors. KEY stands for the key the
// format unlocked, of keyBytes bytes.
func TestDMTable(t *testing.T) {
	key64, key32 := seqKey(64), seqKey(32)
	dir := t.TempDir()
	sized := func(n int64) string {
		p := filepath.Join(dir, fmt.Sprint(n))
		if err := os.Truncate(createEmpty(t, p), n); err != nil {
			t.Fatal(err)
		}
		return p
	}
	plainImage := func(size int64, opts disk.Options, key []byte) *disk.Unlocked {
		return unlocked(t, sized(size), "plain", opts, keyFile(key))
	}
	// LUKS2 images as package luks formats them, the first with
	// cryptsetup's default layout (data at 16 MiB = sector 32768), the
	// second with persistent flags, which become options in the order
	// the kernel prints them.
	luksDefault := filepath.Join(dir, "default.luks")
	luksImage(t, luksDefault, 1<<20, luks.FormatOptions{})
	luksFlags := filepath.Join(dir, "flags.luks")
	luksImage(t, luksFlags, 64<<10, luks.FormatOptions{SectorSize: 512, KeySize: 32, DataOffset: 1 << 20})
	setLUKS2Flags(t, luksFlags, "no-read-workqueue", "allow-discards", "same-cpu-crypt")
	for _, c := range []struct {
		name     string
		u        *disk.Unlocked
		keyBytes int
		want     string
	}{
		{"luks2, cryptsetup's default layout",
			unlocked(t, luksDefault, "luks", nil, passphrase(luksPass)), 64,
			"0 2048 crypt aes-xts-plain64 KEY 0 7:5 32768 1 sector_size:4096"},
		{"luks2, 512-byte sectors, AES-128, persistent flags",
			unlocked(t, luksFlags, "luks", nil, passphrase(luksPass)), 32,
			"0 128 crypt aes-xts-plain64 KEY 0 7:5 2048 3 allow_discards same_cpu_crypt no_read_workqueue"},
		{"volume, no tags, 1024-byte sectors",
			goldenVolume(t, "v1", "disk-xtsctl-nointegrity.vol"), 64,
			"0 4096 crypt aes-xts-plain64 KEY 0 7:5 2048 1 sector_size:1024"},
		{"volume, tags, 4096-byte sectors",
			goldenVolume(t, "v1", "disk-4096.vol"), 64,
			"0 4096 crypt aes-xts-plain64 KEY 0 7:5 2048 1 sector_size:4096"},
		{"volume, AES-128, 512-byte sectors",
			goldenVolume(t, "v1", "disk-512-aes128-tag16.vol"), 32,
			"0 4096 crypt aes-xts-plain64 KEY 0 7:5 2048"},
		{"plain, defaults",
			plainImage(1<<20, plainOptions(512, 0, 0, false), key64), 64,
			"0 2048 crypt aes-xts-plain64 KEY 0 7:5 0"},
		{"plain, --offset 8 --skip 16, AES-128",
			plainImage(8*512+1<<20, plainOptions(512, 8, 16, false), key32), 32,
			"0 2048 crypt aes-xts-plain64 KEY 16 7:5 8"},
		{"plain, --sector-size 4096",
			plainImage(2<<20, plainOptions(4096, 0, 0, false), key64), 64,
			"0 4096 crypt aes-xts-plain64 KEY 0 7:5 0 1 sector_size:4096"},
		{"plain, --sector-size 4096 --iv-large-sectors --offset 8 --skip 24",
			plainImage(8*512+64<<10, plainOptions(4096, 8, 24, true), key64), 64,
			"0 128 crypt aes-xts-plain64 KEY 24 7:5 8 2 sector_size:4096 iv_large_sectors"},
	} {
		if len(c.u.Key) != c.keyBytes {
			t.Errorf("%s: a %d-byte key, want %d", c.name, len(c.u.Key), c.keyBytes)
			continue
		}
		target, err := dmTarget(&Request{Unlocked: c.u})
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		table := cryptTable(target, c.u.Key, "7:5", false)
		line, err := table.AppendLine(nil)
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		hexKey := hex.EncodeToString(c.u.Key)
		want := strings.Replace(c.want, "KEY", hexKey, 1)
		if string(line) != want {
			t.Errorf("%s:\ngot  %s\nwant %s", c.name, line, want)
		}
		// What info --dm-table prints is this line, without the key;
		// printed tables never show the key.
		if tmpl := table.Template(); tmpl != strings.Replace(c.want, "KEY", dmtable.KeyPlaceholder, 1) {
			t.Errorf("%s: the template is\n%s", c.name, tmpl)
		}
		masked := table.String()
		if strings.Contains(masked, hexKey[2:34]) || len(masked) != len(want) {
			t.Errorf("%s: String() = %s shows the key or is not the line masked", c.name, masked)
		}
	}
}

// TestDMTableRefused: layouts dm-crypt cannot express are reported (and
// leave auto to choose fuse, below); a plain image with nothing after
// its offset is refused before, by its format.
func TestDMTableRefused(t *testing.T) {
	dir := t.TempDir()
	img, odd := filepath.Join(dir, "img"), filepath.Join(dir, "odd")
	os.Truncate(createEmpty(t, img), 1<<20)
	os.Truncate(createEmpty(t, odd), 512+1<<20)
	for _, c := range []struct {
		path string
		opts disk.Options
		want string
	}{
		{odd, plainOptions(4096, 1, 0, false), "offset 1 is not a multiple"},
		{img, plainOptions(4096, 0, 3, false), "iv offset 3 is not a multiple"},
	} {
		u := unlocked(t, c.path, "plain", c.opts, keyFile(seqKey(64)))
		if _, err := dmTarget(&Request{Unlocked: u}); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v, want %q", c.opts, err, c.want)
		}
	}
	if _, err := tryUnlock(t, img, "plain", &disk.Request{Slot: -1, Options: plainOptions(512, 4096, 0, false)}, keyFile(seqKey(64))); kindOf(err) != KindInput || !strings.Contains(err.Error(), "nothing after the offset") {
		t.Errorf("plain, --offset past the image: %v", err)
	}

	// Layouts no format here unlocks, but that the layer allows: several
	// extents, data not in 512-byte units, metadata only, and a
	// dm-crypt option the kernel does not take.
	ss := sector.Params{Size: 512}
	split := disk.Layout{Size: 2048, SectorSize: 512, Cipher: disk.XTSPlain64, KeyBits: 512, Extents: []disk.Extent{
		{Offset: 0, Length: 1024, Kind: disk.Crypt, Source: 0, Sector: ss},
		{Offset: 1024, Length: 1024, Kind: disk.Crypt, Source: 4096, Sector: ss},
	}}
	unaligned := disk.SingleExtent(100, 4096, ss, disk.XTSPlain64, 512)
	zero := disk.Layout{Size: 4096, SectorSize: 512, Cipher: disk.XTSPlain64, KeyBits: 512, Extents: []disk.Extent{{Length: 4096, Kind: disk.Zero}}}
	option := disk.SingleExtent(0, 4096, ss, disk.XTSPlain64, 512)
	option.DMOptions = []string{"no_such_option"}
	for _, c := range []struct {
		l    disk.Layout
		want string
	}{
		{split, "a layout of 2 extents is not one dm-crypt target"},
		{unaligned, "not in 512-byte units"},
		{zero, "is not one dm-crypt target"},
		{option, `dm-crypt option "no_such_option"`},
	} {
		if err := c.l.Check(1 << 20); err != nil {
			t.Fatalf("%+v: %v", c.l, err)
		}
		u := &disk.Unlocked{Format: "test", Layout: c.l, Key: seqKey(64)}
		_, err := dmTarget(&Request{Unlocked: u})
		if err == nil || !strings.Contains(err.Error(), c.want) || !errors.Is(err, disk.ErrUnsupported) {
			t.Errorf("%+v: %v, want %q", c.l, err, c.want)
		}
		if err := (dmBackend{}).suits(&Request{Unlocked: u}); err == nil {
			t.Errorf("%+v: dm suits it", c.l)
		}
	}
}

// TestPickBackend: --backend auto takes dm for what it can serve and
// leaves volumes with tags, and what dm-crypt cannot express, to fuse; a
// named backend is taken as named.
func TestPickBackend(t *testing.T) {
	if err := (fuseBackend{}).available(); err != nil {
		t.Skipf("the fuse backend is not available here: %v", err)
	}
	if err := checkLoopSupport(); err != nil {
		t.Skip(err)
	}
	dir := t.TempDir()
	img, odd := filepath.Join(dir, "img"), filepath.Join(dir, "odd")
	os.Truncate(createEmpty(t, img), 1<<20)
	// One 512-byte unit more: whole 4096-byte sectors after an --offset
	// of 1, which dm-crypt cannot take with them.
	os.Truncate(createEmpty(t, odd), 512+1<<20)
	plain := func(opts disk.Options) *Request {
		path := img
		if opts[plainpkg.OptOffset] == "1" {
			path = odd
		}
		return &Request{Path: path, Unlocked: unlocked(t, path, "plain", opts, keyFile(seqKey(64)))}
	}
	vol := func(name string) *Request {
		return &Request{Path: filepath.Join("../testimages/v1", name), Unlocked: goldenVolume(t, "v1", name)}
	}
	cases := []struct {
		what string
		req  *Request
		want string
		why  string // why dm does not suit
	}{
		{"plain image", plain(plainOptions(512, 0, 0, false)), "dm", ""},
		{"plain image, 4096-byte sectors", plain(plainOptions(4096, 0, 0, true)), "dm", ""},
		{"plain image, offset dm-crypt cannot take", plain(plainOptions(4096, 1, 0, false)), "fuse", "offset 1 is not a multiple of the 4096-byte sector size"},
		{"volume without tags", vol("disk-xtsctl-nointegrity.vol"), "dm", ""},
		{"volume with tags", vol("disk-4096.vol"), "fuse", "integrity tags"},
		{"volume with tags, read-only", func() *Request { r := vol("disk-512-aes128-tag16.vol"); r.ReadOnly = true; return r }(), "fuse", "integrity tags"},
	}
	fakeDM(t, nil)
	for _, c := range cases {
		if name, _, err := pickBackend("auto", c.req); err != nil || name != c.want {
			t.Errorf("auto, device-mapper available, %s: %q, %v; want %s", c.what, name, err, c.want)
		}
		if err := (dmBackend{}).suits(c.req); c.why == "" && err != nil || c.why != "" && (err == nil || !strings.Contains(err.Error(), c.why)) {
			t.Errorf("%s: dm suits it: %v, want %q", c.what, err, c.why)
		}
		if name, b, err := pickBackend("dm", c.req); err != nil || name != "dm" || b != (dmBackend{}) {
			t.Errorf("--backend dm, %s: %q, %v", c.what, name, err)
		}
	}

	missing := fmt.Errorf("%w: /dev/mapper/control missing and dm_mod not loaded (try modprobe dm_mod)", devmapper.ErrUnavailable)
	fakeDM(t, missing)
	for _, c := range cases {
		if name, _, err := pickBackend("auto", c.req); err != nil || name != "fuse" {
			t.Errorf("auto, device-mapper missing, %s: %q, %v; want fuse", c.what, name, err)
		}
	}
	_, _, err := pickBackend("dm", cases[0].req)
	if kindOf(err) != KindDevice || !errors.Is(err, devmapper.ErrUnavailable) || !strings.Contains(err.Error(), "dm_mod") {
		t.Errorf("--backend dm without device-mapper: %v (kind %d), want a device error naming what is missing", err, kindOf(err))
	}
	if h := hintsOf(err); len(h) != 1 || !strings.Contains(h[0], "--backend fuse") {
		t.Errorf("hints %q", h)
	}
}

// TestDMReadOnly: a volume with tags opens read-only through dm, with a
// warning, whatever was asked; other images open as asked, silently.
func TestDMReadOnly(t *testing.T) {
	tagged, untagged := goldenVolume(t, "v1", "disk-4096.vol"), goldenVolume(t, "v1", "disk-xtsctl-nointegrity.vol")
	img := filepath.Join(t.TempDir(), "p.img")
	os.Truncate(createEmpty(t, img), 1<<20)
	plain := unlocked(t, img, "plain", plainOptions(512, 0, 0, false), keyFile(seqKey(64)))
	for _, c := range []struct {
		req    Request
		ro     bool
		stderr string
	}{
		{Request{Path: "t.vol", Unlocked: tagged}, true,
			"t.vol has integrity tags, which dm-crypt neither checks nor updates: opening it read-only (--backend fuse verifies every read and can write)\n"},
		{Request{Path: "t.vol", Unlocked: tagged, ReadOnly: true}, true,
			"t.vol has integrity tags, which dm-crypt does not check: its reads are not verified (--backend fuse verifies every read)\n"},
		{Request{Path: "u.vol", Unlocked: untagged}, false, ""},
		{Request{Path: "u.vol", Unlocked: untagged, ReadOnly: true}, true, ""},
		{Request{Path: "p.img", Unlocked: plain}, false, ""},
		{Request{Path: "p.img", Unlocked: plain, ReadOnly: true}, true, ""},
	} {
		a, warnings := recording()
		if ro := dmReadOnly(a, &c.req); ro != c.ro || warnings.String() != c.stderr {
			t.Errorf("%s, read-only %v: %v, %q; want %v, %q", c.req.Path, c.req.ReadOnly, ro, warnings.String(), c.ro, c.stderr)
		}
	}
}

// recording returns a run whose warnings go to a buffer, one per line.
func recording() (*run, *bytes.Buffer) {
	var b bytes.Buffer
	return &run{ctx: context.Background(), Options: Options{Warn: func(format string, args ...any) {
		fmt.Fprintf(&b, format+"\n", args...)
	}}}, &b
}

// TestDMStateRecord: a dm record reads back as written, belongs to the dm
// backend, and is alive while its open is at work or its device exists.
func TestDMStateRecord(t *testing.T) {
	t.Setenv("XTSCTL_RUNDIR", t.TempDir())
	unlock, err := lockRunDir()
	if err != nil {
		t.Fatal(err)
	}
	unlock()
	st := &State{
		Name: "rec", Backend: "dm", Image: "/srv/disk.vol", ImageDev: 2049, ImageIno: 77,
		Type: "volume", Cipher: Cipher{Name: "aes-xts-plain64", KeyBits: 512, SectorSize: 4096, DataOffset: 1 << 20, Integrity: "none"},
		Device: "/dev/mapper/rec", Loop: "/dev/loop4", Mountpoint: "/mnt/rec", FSType: "ext4",
		Opened: time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC), Recovered: &Recovery{DirtyRegions: 2},
	}
	os.Mkdir(stateDir("rec"), 0o700)
	if err := writeState(st); err != nil {
		t.Fatal(err)
	}
	e, err := readEntry("rec")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(e.state, st) {
		t.Fatalf("read back\n%+v\nwant\n%+v", e.state, st)
	}
	if backendOf(e) != (dmBackend{}) {
		t.Fatalf("backendOf = %T", backendOf(e))
	}
	// No device named rec here (none at all without device-mapper).
	if (dmBackend{}).alive(e) {
		t.Error("alive without a device")
	}
	if vs, err := StatusOf("rec", Options{}); err != nil || vs.Condition != "dead" || vs.Loop != "/dev/loop4" {
		t.Errorf("status of a dm record without its device: %+v, %v", vs, err)
	}

	// The record an open writes first: no device yet, the opener at work.
	pid := os.Getpid()
	first := &State{Name: "rec", Backend: "dm", Image: st.Image, PID: pid, PIDStart: processStart(pid)}
	if err := writeState(first); err != nil {
		t.Fatal(err)
	}
	e, _ = readEntry("rec")
	if !(dmBackend{}).alive(e) {
		t.Error("not alive while its open is at work")
	}
	if vs, err := StatusOf("rec", Options{}); err != nil || vs.Condition != "opening" {
		t.Errorf("status while opening: %+v, %v", vs, err)
	}
}

var tagPass = []byte("dm backend")

// tagless makes a volume without tags (ext4-free, 1 MiB) and returns its
// path.
func tagless(t *testing.T, dir string) string {
	t.Helper()
	vol := filepath.Join(dir, "v.vol")
	f, err := os.OpenFile(vol, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	const size = 1 << 20
	if _, _, err := volume.Create(context.Background(), f, bytes.NewReader(make([]byte, size)), size,
		volume.CreateOptions{KDF: volume.KDFParams{Time: 1, MemoryKiB: 64, Threads: 1}, Passphrase: tagPass}, nil); err != nil {
		t.Fatal(err)
	}
	return vol
}

func stateOf(t *testing.T, path string) volume.State {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	st, _ := f.Stat()
	hs, err := volume.ReadHeaders(f, st.Size())
	if err != nil {
		t.Fatal(err)
	}
	s, _ := volume.ReadState(f, hs.Header)
	return s
}

// TestDMHandOverAndClose: a read-write dm session of a volume without tags
// (the volume format's KernelHandover, which the dm backend calls before
// the device appears) marks it dirty, its digest stale; once the device
// is gone (here it never existed: the record is all there is), close
// finishes the session and the volume reads as closed cleanly.
func TestDMHandOverAndClose(t *testing.T) {
	t.Setenv("XTSCTL_RUNDIR", t.TempDir())
	dir := t.TempDir()
	vol := tagless(t, dir)
	u := unlocked(t, vol, "volume", nil, passphrase(tagPass))
	h := handover(u.Format)
	if h == nil {
		t.Fatal("the volume format has no KernelHandover")
	}

	f, err := volume.LockImage(vol, false, 0)
	if err != nil {
		t.Fatal(err)
	}
	rep, token, err := h.BeginKernelWrites(f, u)
	if err != nil || rep.Recovered != nil || rep.Upgraded != "" || len(token) == 0 {
		t.Fatalf("BeginKernelWrites: %+v, %d-byte record, %v", rep, len(token), err)
	}
	// A second writer is refused while the session is on: the lock.
	if _, err := volume.Open(vol, tagPass, true); !errors.Is(err, volume.ErrInUse) {
		t.Errorf("a reader during the session: %v, want ErrInUse", err)
	}
	f.Close()
	if s := stateOf(t, vol); !s.Dirty || !s.DigestStale {
		t.Fatalf("state during the session %+v", s)
	}

	// The session, as its record says; its device is gone.
	var fst unix.Stat_t
	unix.Stat(vol, &fst)
	unlock, _ := lockRunDir()
	unlock()
	os.Mkdir(stateDir("hv"), 0o700)
	writeState(&State{Name: "hv", Backend: "dm", Image: vol, ImageDev: fst.Dev, ImageIno: fst.Ino,
		Type: u.Format, Device: "/dev/mapper/hv", Loop: "/dev/loop9", CloseRecord: token})
	var warned []string
	if _, err := Close(context.Background(), "hv", Options{Warn: func(f string, args ...any) { warned = append(warned, fmt.Sprintf(f, args...)) }}); err != nil ||
		len(warned) != 1 || !strings.Contains(warned[0], "hv was left open, but its device-mapper device is gone") {
		t.Fatalf("close: %v, warnings %q", err, warned)
	}
	if _, err := os.Stat(stateDir("hv")); !errors.Is(err, os.ErrNotExist) {
		t.Error("the record is still there")
	}
	if s := stateOf(t, vol); s.Dirty || !s.DigestStale || !s.Valid {
		t.Errorf("state after close %+v, want clean with the digest stale", s)
	}

	// A volume left dirty by a crash is recovered by the next session.
	vv, _ := volume.Open(vol, tagPass, false)
	vv.MarkModified()
	vv.Release()
	f, _ = volume.LockImage(vol, false, 0)
	defer f.Close()
	rep, token, err = h.BeginKernelWrites(f, u)
	if err != nil || rep.Recovered == nil || !rep.Recovered.Untagged || len(token) == 0 {
		t.Errorf("BeginKernelWrites of a dirty volume: %+v, %v", rep, err)
	}
}

// TestDMOpenRollsBack: an open whose device cannot be made (this host has
// no device-mapper; the backend is made to think it has) leaves nothing:
// no record, no loop device, the image unlocked and its volume clean.
func TestDMOpenRollsBack(t *testing.T) {
	if devmapper.Available() == nil {
		t.Skip("this host has device-mapper: the open would succeed")
	}
	skipUnlessDevices(t)
	fakeDM(t, nil)
	t.Setenv("XTSCTL_RUNDIR", t.TempDir())
	dir := t.TempDir()
	vol := tagless(t, dir)
	img := filepath.Join(dir, "p.img")
	os.Truncate(createEmpty(t, img), 1<<20)
	plain := unlocked(t, img, "plain", plainOptions(512, 0, 0, false), keyFile(seqKey(64)))
	for _, c := range []Request{
		{Path: vol, Unlocked: unlocked(t, vol, "volume", nil, passphrase(tagPass))},
		{Path: img, Unlocked: plain},
		{Path: img, Unlocked: plain, ReadOnly: true},
	} {
		f, err := os.Open(c.Path)
		if err != nil {
			t.Fatal(err)
		}
		c.Name, c.Image, c.Backend = "rb", f, "dm"
		_, err = Open(context.Background(), &c, Options{})
		f.Close()
		if kindOf(err) != KindDevice || !strings.Contains(fmt.Sprint(err), "device-mapper is not available") {
			t.Errorf("open %s: %v", c.Path, err)
		}
		if _, err := os.Stat(stateDir("rb")); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("open %s left its record", c.Path)
		}
		// The kernel frees the auto-clearing loop device, and with it
		// the image and its lock, in the release path of its last
		// close, which may lag behind it briefly.
		lf, err := os.OpenFile(c.Path, os.O_RDWR, 0)
		if err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(5 * time.Second)
		for {
			err := unix.Flock(int(lf.Fd()), unix.LOCK_EX|unix.LOCK_NB)
			if err == nil {
				break
			}
			if time.Now().After(deadline) {
				t.Errorf("open %s left the image locked: %v", c.Path, err)
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		lf.Close()
	}
	if s := stateOf(t, vol); s.Dirty || !s.Valid {
		t.Errorf("volume state after the failed open %+v, want clean", s)
	}

	// Parameters dm-crypt cannot express: refused before any device.
	odd := filepath.Join(dir, "odd.enc")
	os.Truncate(createEmpty(t, odd), 512+1<<20)
	f, _ := os.Open(odd)
	defer f.Close()
	req := &Request{Name: "rb", Image: f, Path: odd, Unlocked: unlocked(t, odd, "plain", plainOptions(4096, 1, 0, false), keyFile(seqKey(64))), Backend: "dm"}
	if _, err := Open(context.Background(), req, Options{}); kindOf(err) != KindUsage || !strings.Contains(err.Error(), "dm-crypt cannot map "+odd) || !strings.Contains(strings.Join(hintsOf(err), " "), "--backend fuse") {
		t.Errorf("open --offset 1 with 4096-byte sectors: %v", err)
	}
}
