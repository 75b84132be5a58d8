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

	"github.com/xtsctl/xtsctl/internal/devmapper"
	"github.com/xtsctl/xtsctl/internal/dmtable"
	"github.com/xtsctl/xtsctl/luks"
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

// seqKey is the key 00 01 02 ... of n bytes.
func seqKey(n int) []byte {
	k := make([]byte, n)
	for i := range k {
		k[i] = byte(i)
	}
	return k
}

func goldenHeader(t *testing.T, name string) *volume.Header {
	t.Helper()
	f, err := os.Open(filepath.Join("../testimages/v1", name))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	st, _ := f.Stat()
	hs, err := volume.ReadHeaders(f, st.Size())
	if err != nil {
		t.Fatal(err)
	}
	return hs.Header
}

// TestDMTable: the table the dm backend loads, byte for byte, for volumes
// (from their headers) and plain images (from the open flags). The
// expected lines are worked out by hand from docs/FORMAT.md's layout and
// docs/DM.md's units: a 2 MiB data area at 1 MiB is 4096 sectors at
// sector 2048; tweaks count 512-byte units unless iv_large_sectors.
func TestDMTable(t *testing.T) {
	key64, key32 := seqKey(64), seqKey(32)
	hex64, hex32 := hex.EncodeToString(key64), hex.EncodeToString(key32)
	dir := t.TempDir()
	sized := func(n int64) string {
		p := filepath.Join(dir, fmt.Sprint(n))
		if err := os.Truncate(createEmpty(t, p), n); err != nil {
			t.Fatal(err)
		}
		return p
	}
	// LUKS2 images as package luks formats them, the first with
	// cryptsetup's default layout (data at 16 MiB = sector 32768), the
	// second with persistent flags, which become options in the order
	// the kernel prints them.
	luksDefault := filepath.Join(dir, "default.luks")
	hDefault, _, _ := luksImage(t, luksDefault, 1<<20, luks.FormatOptions{})
	luksFlags := filepath.Join(dir, "flags.luks")
	hFlags, _, _ := luksImage(t, luksFlags, 64<<10, luks.FormatOptions{SectorSize: 512, KeySize: 32, DataOffset: 1 << 20})
	hFlags.Flags = []string{"no-read-workqueue", "allow-discards", "same-cpu-crypt"}
	for _, c := range []struct {
		name string
		req  Request
		want string
	}{
		{"luks2, cryptsetup's default layout",
			Request{Type: TypeLUKS, Path: luksDefault, LUKS: hDefault, Key: key64},
			"0 2048 crypt aes-xts-plain64 " + hex64 + " 0 7:5 32768 1 sector_size:4096"},
		{"luks2, 512-byte sectors, AES-128, persistent flags",
			Request{Type: TypeLUKS, Path: luksFlags, LUKS: hFlags, Key: key32},
			"0 128 crypt aes-xts-plain64 " + hex32 + " 0 7:5 2048 3 allow_discards same_cpu_crypt no_read_workqueue"},
		{"volume, no tags, 1024-byte sectors",
			Request{Type: TypeVolume, Header: goldenHeader(t, "disk-xtsctl-nointegrity.vol"), Key: key64},
			"0 4096 crypt aes-xts-plain64 " + hex64 + " 0 7:5 2048 1 sector_size:1024"},
		{"volume, tags, 4096-byte sectors",
			Request{Type: TypeVolume, Header: goldenHeader(t, "disk-4096.vol"), Key: key64},
			"0 4096 crypt aes-xts-plain64 " + hex64 + " 0 7:5 2048 1 sector_size:4096"},
		{"volume, AES-128, 512-byte sectors",
			Request{Type: TypeVolume, Header: goldenHeader(t, "disk-512-aes128-tag16.vol"), Key: key32},
			"0 4096 crypt aes-xts-plain64 " + hex32 + " 0 7:5 2048"},
		{"plain, defaults",
			Request{Type: TypePlain, Path: sized(1 << 20), Plain: volume.Plain{Sector: sector.Params{Size: 512}}, Key: key64},
			"0 2048 crypt aes-xts-plain64 " + hex64 + " 0 7:5 0"},
		{"plain, --offset 8 --skip 16, AES-128",
			Request{Type: TypePlain, Path: sized(8*512 + 1<<20), Plain: volume.Plain{Sector: sector.Params{Size: 512, IVOffset: 16}, Offset: 8}, Key: key32},
			"0 2048 crypt aes-xts-plain64 " + hex32 + " 16 7:5 8"},
		{"plain, --sector-size 4096",
			Request{Type: TypePlain, Path: sized(2 << 20), Plain: volume.Plain{Sector: sector.Params{Size: 4096}}, Key: key64},
			"0 4096 crypt aes-xts-plain64 " + hex64 + " 0 7:5 0 1 sector_size:4096"},
		{"plain, --sector-size 4096 --iv-large-sectors --offset 8 --skip 24",
			Request{Type: TypePlain, Path: sized(8*512 + 64<<10), Plain: volume.Plain{Sector: sector.Params{Size: 4096, IVMode: sector.Plain64LargeSectors, IVOffset: 24}, Offset: 8}, Key: key64},
			"0 128 crypt aes-xts-plain64 " + hex64 + " 24 7:5 8 2 sector_size:4096 iv_large_sectors"},
	} {
		size, err := imageSize(c.req.Path)
		if c.req.Type == TypeVolume {
			size, err = c.req.Header.Size, nil
		}
		if err != nil {
			t.Fatal(err)
		}
		target, err := dmTarget(&c.req, size)
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		table := cryptTable(target, c.req.Key, "7:5", false)
		line, err := table.AppendLine(nil)
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		if string(line) != c.want {
			t.Errorf("%s:\ngot  %s\nwant %s", c.name, line, c.want)
		}
		// What info --dm-table prints is this line, without the key;
		// printed tables never show the key.
		hexKey := hex.EncodeToString(c.req.Key)
		if tmpl := table.Template(); tmpl != strings.Replace(c.want, hexKey, dmtable.KeyPlaceholder, 1) {
			t.Errorf("%s: the template is\n%s", c.name, tmpl)
		}
		masked := table.String()
		if strings.Contains(masked, hex64[2:34]) || strings.Contains(masked, hex32[2:34]) || len(masked) != len(c.want) {
			t.Errorf("%s: String() = %s shows the key or is not the line masked", c.name, masked)
		}
	}
}

// TestDMTableRefused: parameters dm-crypt cannot express are reported (and
// leave auto to choose fuse, below).
func TestDMTableRefused(t *testing.T) {
	img := filepath.Join(t.TempDir(), "img")
	os.Truncate(createEmpty(t, img), 1<<20)
	for _, c := range []struct {
		p    volume.Plain
		size int64
		want string
	}{
		{volume.Plain{Sector: sector.Params{Size: 4096}, Offset: 1}, 512 + 1<<20, "offset 1 is not a multiple"},
		{volume.Plain{Sector: sector.Params{Size: 4096, IVOffset: 3}}, 1 << 20, "iv offset 3 is not a multiple"},
		{volume.Plain{Sector: sector.Params{Size: 512}, Offset: 4096}, 1 << 20, "nothing after the offset"},
	} {
		req := &Request{Type: TypePlain, Path: img, Plain: c.p, Key: seqKey(64)}
		if _, err := dmTarget(req, c.size); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want %q", c.p, err, c.want)
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
	plain := func(p volume.Plain) *Request {
		if p.Offset == 1 {
			return &Request{Type: TypePlain, Path: odd, Plain: p, Key: seqKey(64)}
		}
		return &Request{Type: TypePlain, Path: img, Plain: p, Key: seqKey(64)}
	}
	vol := func(name string) *Request {
		return &Request{Type: TypeVolume, Path: img, Header: goldenHeader(t, name), Key: seqKey(64)}
	}
	cases := []struct {
		what string
		req  *Request
		want string
		why  string // why dm does not suit
	}{
		{"plain image", plain(volume.Plain{Sector: sector.Params{Size: 512}}), "dm", ""},
		{"plain image, 4096-byte sectors", plain(volume.Plain{Sector: sector.Params{Size: 4096, IVMode: sector.Plain64LargeSectors}}), "dm", ""},
		{"plain image, offset dm-crypt cannot take", plain(volume.Plain{Sector: sector.Params{Size: 4096}, Offset: 1}), "fuse", "offset 1 is not a multiple of the 4096-byte sector size"},
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
	tagged, untagged := goldenHeader(t, "disk-4096.vol"), goldenHeader(t, "disk-xtsctl-nointegrity.vol")
	for _, c := range []struct {
		req    Request
		ro     bool
		stderr string
	}{
		{Request{Path: "t.vol", Type: TypeVolume, Header: tagged}, true,
			"t.vol has integrity tags, which dm-crypt neither checks nor updates: opening it read-only (--backend fuse verifies every read and can write)\n"},
		{Request{Path: "t.vol", Type: TypeVolume, Header: tagged, ReadOnly: true}, true,
			"t.vol has integrity tags, which dm-crypt does not check: its reads are not verified (--backend fuse verifies every read)\n"},
		{Request{Path: "u.vol", Type: TypeVolume, Header: untagged}, false, ""},
		{Request{Path: "u.vol", Type: TypeVolume, Header: untagged, ReadOnly: true}, true, ""},
		{Request{Path: "p.img", Type: TypePlain}, false, ""},
		{Request{Path: "p.img", Type: TypePlain, ReadOnly: true}, true, ""},
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
		Type: TypeVolume, Cipher: Cipher{Name: "aes-xts-plain64", KeyBits: 512, SectorSize: 4096, DataOffset: 1 << 20, Integrity: "none"},
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
// marks it dirty, its digest stale, before the device appears; once the
// device is gone (here it never existed: the record is all there is),
// close finishes the session and the volume reads as closed cleanly.
func TestDMHandOverAndClose(t *testing.T) {
	t.Setenv("XTSCTL_RUNDIR", t.TempDir())
	dir := t.TempDir()
	vol := tagless(t, dir)
	v, err := volume.Open(vol, tagPass, true)
	if err != nil {
		t.Fatal(err)
	}
	key := v.MasterKey()
	h := v.Header()
	v.Close()

	f, err := volume.LockImage(vol, false, 0)
	if err != nil {
		t.Fatal(err)
	}
	size, _ := f.Seek(0, 2)
	a, _ := recording()
	req := &Request{Path: vol, Type: TypeVolume, Header: &h, Key: key}
	session := &State{}
	if err := handOver(a, f, size, req, session); err != nil || session.Recovered != nil || len(session.CloseRecord) == 0 {
		t.Fatalf("handOver: %+v, %v", session, err)
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
		Type: TypeVolume, Device: "/dev/mapper/hv", Loop: "/dev/loop9", CloseRecord: session.CloseRecord})
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
	session = &State{}
	err = handOver(a, f, size, req, session)
	if err != nil || session.Recovered == nil || !session.Recovered.Untagged {
		t.Errorf("handOver of a dirty volume: %+v, %v", session, err)
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
	v, err := volume.Open(vol, tagPass, true)
	if err != nil {
		t.Fatal(err)
	}
	h, key := v.Header(), v.MasterKey()
	v.Close()
	img := filepath.Join(dir, "p.img")
	os.Truncate(createEmpty(t, img), 1<<20)
	plain := volume.Plain{Sector: sector.Params{Size: 512}}
	for _, c := range []Request{
		{Path: vol, Type: TypeVolume, Header: &h, Key: key},
		{Path: img, Type: TypePlain, Plain: plain, Key: seqKey(64)},
		{Path: img, Type: TypePlain, Plain: plain, Key: seqKey(64), ReadOnly: true},
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
	req := &Request{Name: "rb", Image: f, Path: odd, Type: TypePlain, Plain: volume.Plain{Sector: sector.Params{Size: 4096}, Offset: 1}, Key: seqKey(64), Backend: "dm"}
	if _, err := Open(context.Background(), req, Options{}); kindOf(err) != KindUsage || !strings.Contains(err.Error(), "dm-crypt cannot map "+odd) || !strings.Contains(strings.Join(hintsOf(err), " "), "--backend fuse") {
		t.Errorf("open --offset 1 with 4096-byte sectors: %v", err)
	}
}
