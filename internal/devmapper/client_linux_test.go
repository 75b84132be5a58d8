package devmapper

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/xtsctl/xtsctl/internal/dmtable"
	"golang.org/x/sys/unix"
)

// fakeKernel stands in for drivers/md/dm-ioctl.c. It decodes requests and
// encodes replies with literal uapi offsets, independently of ioctl.go, and
// follows the kernel's rules: names are unique, a load fills the inactive
// slot, a resume swaps it in, status replies count next from the first spec
// and set DM_BUFFER_FULL_FLAG when the payload does not fit.
type fakeKernel struct {
	t       *testing.T
	devs    map[string]*fakeDev
	minor   uint32
	calls   []string
	loadBuf []byte   // the last DM_TABLE_LOAD buffer, to check it was wiped
	sizes   []int    // buffer sizes of DM_TABLE_STATUS requests
	cookies []uint32 // event_nr of resumes and removes

	failLoad, failResume error
	removeBusy           int // EBUSY this many removes first
}

type fakeDev struct {
	uuid           string
	minor          uint32
	live, inactive []replyTarget
	suspended, ro  bool
	open           int32
}

func newFakeKernel(t *testing.T) *fakeKernel {
	return &fakeKernel{t: t, devs: map[string]*fakeDev{}}
}

func (k *fakeKernel) client() *client {
	c := newClient(k.ioctl)
	c.removeWait = 0
	return c
}

var cmdNames = map[uint32]string{0: "version", 3: "create", 4: "remove", 6: "suspend", 7: "status", 9: "load", 12: "table"}

func (k *fakeKernel) ioctl(cmd uint32, buf []byte) error {
	le := binary.LittleEndian
	if cmd>>30 != 3 || cmd>>16&0x3fff != 312 || cmd>>8&0xff != 0xfd {
		k.t.Fatalf("ioctl %#x is not _IOWR(0xfd, nr, 312 bytes)", cmd)
	}
	nr := cmd & 0xff
	k.calls = append(k.calls, cmdNames[nr])
	if len(buf) < 312 || le.Uint32(buf[12:]) != uint32(len(buf)) || le.Uint32(buf[16:]) != 312 {
		k.t.Fatalf("%s: buffer %d bytes, data_size %d, data_start %d", cmdNames[nr], len(buf), le.Uint32(buf[12:]), le.Uint32(buf[16:]))
	}
	if le.Uint32(buf[0:]) != 4 || le.Uint32(buf[4:]) > 47 {
		return unix.EINVAL
	}
	le.PutUint32(buf[0:], 4)
	le.PutUint32(buf[4:], 47)
	le.PutUint32(buf[8:], 0)
	if nr == 0 {
		return nil
	}
	name := string(buf[48 : 48+bytes.IndexByte(buf[48:176], 0)])
	flags := le.Uint32(buf[28:])
	size := len(buf)
	le.PutUint32(buf[12:], 312)
	le.PutUint32(buf[28:], flags&^(1<<8|1<<15))

	if nr == 3 {
		if k.devs[name] != nil {
			return unix.EBUSY
		}
		uuid := string(buf[176 : 176+bytes.IndexByte(buf[176:305], 0)])
		k.devs[name] = &fakeDev{uuid: uuid, minor: k.minor, suspended: true}
		k.minor++
	}
	d := k.devs[name]
	if d == nil {
		return unix.ENXIO
	}
	switch nr {
	case 9:
		k.loadBuf = buf
		if k.failLoad != nil {
			return k.failLoad
		}
		if flags&(1<<15) == 0 {
			k.t.Error("table load without DM_SECURE_DATA_FLAG")
		}
		d.inactive = nil
		next := 312
		for i := 0; i < int(le.Uint32(buf[20:])); i++ {
			spec := buf[next:]
			params := spec[40:]
			d.inactive = append(d.inactive, replyTarget{
				start:  le.Uint64(spec[0:]),
				length: le.Uint64(spec[8:]),
				typ:    string(spec[24 : 24+bytes.IndexByte(spec[24:40], 0)]),
				params: string(params[:bytes.IndexByte(params, 0)]),
			})
			next += int(le.Uint32(spec[20:])) // relative to this spec on load
		}
		d.ro = flags&1 != 0
	case 6:
		k.cookies = append(k.cookies, le.Uint32(buf[32:]))
		if k.failResume != nil {
			return k.failResume
		}
		if d.inactive != nil {
			d.live, d.inactive = d.inactive, nil
		}
		d.suspended = false
	case 4:
		k.cookies = append(k.cookies, le.Uint32(buf[32:]))
		if d.open > 0 || k.removeBusy > 0 {
			k.removeBusy--
			return unix.EBUSY
		}
		delete(k.devs, name)
	case 12:
		k.sizes = append(k.sizes, size)
		k.tableReply(buf, d, flags)
	}
	k.devStatus(buf, d)
	return nil
}

// devStatus fills in the header as the kernel's __dev_status does.
func (k *fakeKernel) devStatus(buf []byte, d *fakeDev) {
	le := binary.LittleEndian
	flags := le.Uint32(buf[28:]) &^ (1 | 2 | 1<<5 | 1<<6)
	if d.ro {
		flags |= 1
	}
	if d.suspended {
		flags |= 2
	}
	if d.live != nil {
		flags |= 1 << 5
	}
	if d.inactive != nil {
		flags |= 1 << 6
	}
	le.PutUint32(buf[28:], flags)
	le.PutUint32(buf[24:], uint32(d.open))
	le.PutUint64(buf[40:], uint64(d.minor&0xff|254<<8|(d.minor&^0xff)<<12))
	if le.Uint32(buf[12:]) == 312 { // not a table reply
		le.PutUint32(buf[20:], uint32(len(d.live)))
	}
	clear(buf[176:305])
	copy(buf[176:], d.uuid)
}

// tableReply writes the live table like retrieve_status: a spec per target,
// its status or table string, next counted from the first spec.
func (k *fakeKernel) tableReply(buf []byte, d *fakeDev, flags uint32) {
	le := binary.LittleEndian
	clear(buf[312:])
	pos := 312
	for _, tg := range d.live {
		text := fmt.Sprintf("status of %s", tg.typ)
		if flags&(1<<4) != 0 {
			text = tg.params
		}
		if pos+40+len(text)+1 > len(buf) {
			le.PutUint32(buf[28:], le.Uint32(buf[28:])|1<<8)
			return
		}
		spec := buf[pos:]
		le.PutUint64(spec[0:], tg.start)
		le.PutUint64(spec[8:], tg.length)
		copy(spec[24:40], tg.typ)
		copy(spec[40:], text)
		pos = (pos + 40 + len(text) + 1 + 7) &^ 7
		le.PutUint32(spec[20:], uint32(pos-312))
	}
	le.PutUint32(buf[12:], uint32(pos))
	le.PutUint32(buf[20:], uint32(len(d.live)))
}

func testCrypt() *CryptTable {
	return &CryptTable{Key: seqKey(64), Device: "7:0", Length: 2048, SectorSize: 4096, IVOffset: 8, Offset: 16}
}

func TestCreateDevice(t *testing.T) {
	k := newFakeKernel(t)
	c := k.client()
	k.minor = 300
	tab := testCrypt()
	info, err := c.createDevice("vol", "XTSCTL-vol", true, []loadTarget{cryptTarget(tab)})
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(k.calls, " "); got != "create load suspend" {
		t.Errorf("commands %q, want create, load, resume", got)
	}
	if info.Major != 254 || info.Minor != 300 || info.Suspended || !info.LiveTable || !info.ReadOnly || info.UUID != "XTSCTL-vol" {
		t.Errorf("info after resume: %+v", info)
	}
	d := k.devs["vol"]
	want := "aes-xts-plain64 " + hex64 + " 8 7:0 16 1 sector_size:4096"
	if len(d.live) != 1 || d.live[0] != (replyTarget{0, 2048, "crypt", want}) {
		t.Errorf("kernel got table %+v, want one crypt target with %q", d.live, want)
	}
	if !bytes.Equal(k.loadBuf, make([]byte, len(k.loadBuf))) {
		t.Error("the table load buffer, which held the key, was not wiped")
	}
	if len(k.cookies) != 1 || k.cookies[0] != 0x000f0000 {
		t.Errorf("resume cookie %#x, want the udev-disable flags only", k.cookies)
	}

	if _, err := c.createDevice("vol", "XTSCTL-vol", false, []loadTarget{cryptTarget(tab)}); !errors.Is(err, ErrExists) || !errors.Is(err, unix.EBUSY) {
		t.Errorf("second create: %v, want ErrExists", err)
	}
	if len(k.devs["vol"].live) != 1 {
		t.Error("the failed second create damaged the first device")
	}
}

func TestCreateDeviceRollback(t *testing.T) {
	for _, c := range []struct {
		name    string
		setup   func(k *fakeKernel)
		want    string
		wantErr error
	}{
		{"load fails", func(k *fakeKernel) { k.failLoad = unix.EINVAL }, "create load status remove", unix.EINVAL},
		{"resume fails", func(k *fakeKernel) { k.failResume = unix.ENOMEM }, "create load suspend status remove", unix.ENOMEM},
	} {
		t.Run(c.name, func(t *testing.T) {
			k := newFakeKernel(t)
			c.setup(k)
			_, err := k.client().createDevice("vol", "XTSCTL-vol", false, []loadTarget{cryptTarget(testCrypt())})
			if !errors.Is(err, c.wantErr) {
				t.Errorf("error %v, want %v", err, c.wantErr)
			}
			if got := strings.Join(k.calls, " "); got != c.want {
				t.Errorf("commands %q, want %q", got, c.want)
			}
			if len(k.devs) != 0 {
				t.Errorf("devices left after the failed create: %v", k.devs)
			}
			if strings.Contains(err.Error(), "0001020304") {
				t.Errorf("error shows the key: %v", err)
			}
		})
	}
	k := newFakeKernel(t)
	k.failLoad = unix.EINVAL
	_, err := k.client().createDevice("vol", "", false, []loadTarget{cryptTarget(testCrypt())})
	if !strings.Contains(fmt.Sprint(err), "dmesg") {
		t.Errorf("rejected table: %v, want a hint to the kernel log", err)
	}
	if !bytes.Equal(k.loadBuf, make([]byte, len(k.loadBuf))) {
		t.Error("the rejected table load buffer was not wiped")
	}
}

func TestTableStatusGrowsBuffer(t *testing.T) {
	k := newFakeKernel(t)
	c := k.client()
	c.statusBuffer = 64
	var targets []loadTarget
	var want []Target
	for i := range 20 {
		p := fmt.Sprintf("7:%d %d", i, i*100)
		targets = append(targets, rawParams(uint64(i*8), 8, "linear", p))
		want = append(want, Target{uint64(i * 8), 8, "linear", p})
	}
	tab := testCrypt()
	tab.Length = 8
	targets = append(targets, loadTarget{start: 160, length: 8, typ: "crypt", paramsLen: tab.ParamsLen(),
		appendParams: func(dst []byte) []byte { return tab.AppendParams(dst) }})
	want = append(want, Target{160, 8, "crypt", "aes-xts-plain64 " + strings.Repeat("0", 128) + " 8 7:0 16 1 sector_size:4096"})
	if _, err := c.createDevice("many", "", false, targets); err != nil {
		t.Fatal(err)
	}

	_, got, err := c.tableStatus("many", true)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("table\n got %v\nwant %v", got, want)
	}
	// 20 short targets and one crypt line need about 1.5 KiB: 64 bytes of
	// payload doubled until it fits.
	wantSizes := []int{312 + 64, 312 + 128, 312 + 256, 312 + 512, 312 + 1024, 312 + 2048}
	if fmt.Sprint(k.sizes) != fmt.Sprint(wantSizes) {
		t.Errorf("status buffer sizes %v, want %v", k.sizes, wantSizes)
	}

	k.sizes = nil
	info, status, err := c.tableStatus("many", false)
	if err != nil {
		t.Fatal(err)
	}
	if len(status) != 21 || status[0].Params != "status of linear" || status[20].Params != "status of crypt" || info.TargetCount != 21 {
		t.Errorf("status %v, info %+v", status, info)
	}
}

func TestTableStatusGivesUp(t *testing.T) {
	k := newFakeKernel(t)
	c := k.client()
	c.statusBuffer = maxStatusBuffer / 2
	huge := strings.Repeat("x", maxStatusBuffer)
	if _, err := c.createDevice("huge", "", false, []loadTarget{rawParams(0, 8, "linear", huge)}); err != nil {
		t.Fatal(err)
	}
	_, _, err := c.tableStatus("huge", true)
	if err == nil || !strings.Contains(err.Error(), "does not fit") {
		t.Errorf("got %v, want a does-not-fit error", err)
	}
	if len(k.sizes) != 2 {
		t.Errorf("%d status calls, want 2 (half the limit, then the limit)", len(k.sizes))
	}
}

func TestTableMasksKey(t *testing.T) {
	k := newFakeKernel(t)
	c := k.client()
	tab := testCrypt()
	if _, err := c.createDevice("vol", "", false, []loadTarget{cryptTarget(tab)}); err != nil {
		t.Fatal(err)
	}
	var lastBuf []byte
	c.ioctl = func(cmd uint32, buf []byte) error {
		lastBuf = buf
		return k.ioctl(cmd, buf)
	}
	_, targets, err := c.tableStatus("vol", true)
	if err != nil {
		t.Fatal(err)
	}
	if len(targets) != 1 || strings.Contains(targets[0].Params, hex64[:16]) {
		t.Fatalf("table shows the key: %v", targets)
	}
	ci, err := dmtable.ParseCrypt(targets[0].Params)
	if err != nil {
		t.Fatal(err)
	}
	if ci.KeySize != 64 || ci.IVOffset != 8 || ci.Offset != 16 || ci.SectorSize != 4096 || ci.Device != "7:0" {
		t.Errorf("parsed %+v", ci)
	}
	if !bytes.Equal(lastBuf, make([]byte, len(lastBuf))) {
		t.Error("the table reply buffer was not wiped")
	}
}

func TestRemove(t *testing.T) {
	k := newFakeKernel(t)
	c := k.client()
	if _, err := c.createDevice("vol", "", false, []loadTarget{cryptTarget(testCrypt())}); err != nil {
		t.Fatal(err)
	}

	k.devs["vol"].open = 1
	k.calls = nil
	if _, err := c.remove("vol"); !errors.Is(err, ErrBusy) || !strings.Contains(err.Error(), "open 1 times") {
		t.Errorf("remove while open: %v, want ErrBusy", err)
	}
	if got := strings.Join(k.calls, " "); got != "status" {
		t.Errorf("remove while open issued %q; it must not try", got)
	}

	k.devs["vol"].open = 0
	k.removeBusy = 3
	k.calls, k.cookies = nil, nil
	info, err := c.remove("vol")
	if err != nil {
		t.Fatalf("remove with a passing EBUSY: %v", err)
	}
	if got := strings.Join(k.calls, " "); got != "status remove remove remove remove" {
		t.Errorf("commands %q, want status and 4 removes", got)
	}
	if info.Minor != 0 || k.devs["vol"] != nil {
		t.Errorf("info %+v, devices %v", info, k.devs)
	}
	for _, ck := range k.cookies {
		if ck != 0x000f0000 {
			t.Errorf("remove cookie %#x, want the udev-disable flags only", ck)
		}
	}

	if _, err := c.remove("vol"); !errors.Is(err, ErrNotFound) {
		t.Errorf("remove of a removed device: %v, want ErrNotFound", err)
	}

	if _, err := c.createDevice("stuck", "", false, []loadTarget{cryptTarget(testCrypt())}); err != nil {
		t.Fatal(err)
	}
	k.removeBusy = 100
	if _, err := c.remove("stuck"); !errors.Is(err, ErrBusy) {
		t.Errorf("remove of a device that stays busy: %v, want ErrBusy", err)
	}
}

func TestVersionAndErrors(t *testing.T) {
	k := newFakeKernel(t)
	c := k.client()
	v, err := c.version()
	if err != nil || v != [3]uint32{4, 47, 0} {
		t.Errorf("version %v, %v", v, err)
	}
	if _, err := c.devStatus("nope"); !errors.Is(err, ErrNotFound) || !errors.Is(err, unix.ENXIO) {
		t.Errorf("status of a missing device: %v", err)
	}
	c.ioctl = func(uint32, []byte) error { return unix.EACCES }
	if _, err := c.devStatus("x"); err == nil || !strings.Contains(err.Error(), "root") {
		t.Errorf("permission error: %v, want a hint about root", err)
	}
}
