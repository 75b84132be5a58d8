package blockdev

// Open volumes are recorded under the run directory (/run/xtsctl), one
// directory per NAME, so that close and status find them and so that what
// a killed server left behind can be recognised and cleaned:
//
//	/run/xtsctl/.lock          flock held while volumes are opened or closed
//	/run/xtsctl/NAME/state.json the record below, written once the device is ready
//	                           (dm: first without a device, before anything is set up)
//	/run/xtsctl/NAME/pid       the server's pid, written as soon as it starts (fuse)
//	/run/xtsctl/NAME/ctl.sock  the server's control socket (status, close)
//	/run/xtsctl/NAME/fuse/     the server's FUSE mount (file "data")
//	/run/xtsctl/.mnt/NAME/     where a FUSE program mounts NAME's filesystem
//	                           before the mount is moved onto the mountpoint
//	/run/xtsctl/NAME.log       the server's log, kept after close

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// runDir is where open volumes are recorded. XTSCTL_RUNDIR overrides it,
// so that tests do not share state with real volumes.
func runDir() string {
	if d := os.Getenv("XTSCTL_RUNDIR"); d != "" {
		return d
	}
	return "/run/xtsctl"
}

// State is what state.json records about an open volume.
type State struct {
	Name     string `json:"name"`
	Backend  string `json:"backend"` // "fuse" or "dm"
	Image    string `json:"image"`   // absolute path
	ImageDev uint64 `json:"image_dev"`
	ImageIno uint64 `json:"image_ino"`
	Type     string `json:"type"` // "plain", "volume" or "luks"
	Cipher   Cipher `json:"cipher"`
	Device   string `json:"device"`
	// Link is the device's stable name, /dev/xtsctl/NAME, while it
	// points at Device (found, not recorded).
	Link       string    `json:"link,omitempty"`
	Loop       string    `json:"loop,omitempty"` // dm: the loop device on the image, under the table
	Mountpoint string    `json:"mountpoint,omitempty"`
	FSType     string    `json:"fstype,omitempty"`
	ReadOnly   bool      `json:"read_only"`
	PID        int       `json:"pid,omitempty"`       // the serving process, if any (dm: the opening one, until the device is ready)
	PIDStart   uint64    `json:"pid_start,omitempty"` // its start time, against pid reuse
	Opened     time.Time `json:"opened"`
	Recovered  *Recovery `json:"recovered,omitempty"` // what open checked after an unclean shutdown
	Upgraded   bool      `json:"upgraded,omitempty"`  // open upgraded a version-1 volume to version 2
	// CloseRecord (dm, version-2 volume without tags) is the state record,
	// made with the key at open, that close writes to record the clean
	// close without the passphrase (volume.Release).
	CloseRecord []byte `json:"close_record,omitempty"`
	// MountDev and MountIno identify the directory mounted on: a close
	// that unmounted it and then found the device busy mounts it again
	// there, and on no other directory the path may lead to by then.
	MountDev uint64 `json:"mount_dev,omitempty"`
	MountIno uint64 `json:"mount_ino,omitempty"`
	// FSHelper is the FUSE program that serves the mount where the
	// kernel has no driver for the filesystem (fuse backend), HelperPID
	// and HelperStart its daemon: the cleanup after a dead server ends
	// it once the mount is gone.
	FSHelper    string `json:"fs_helper,omitempty"`
	HelperPID   int    `json:"helper_pid,omitempty"`
	HelperStart uint64 `json:"helper_start,omitempty"`
}

var nameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

// CheckName checks a NAME: up to 64 letters, digits, ".", "_" or "-", starting
// with a letter or digit (it names a directory and a device-mapper device).
func CheckName(name string) error {
	if !nameRE.MatchString(name) {
		return usageError(fmt.Errorf("invalid NAME %q: use up to 64 letters, digits, '.', '_' or '-', starting with a letter or digit", name))
	}
	return nil
}

func stateDir(name string) string { return filepath.Join(runDir(), name) }

// LogPath is the server log of NAME, kept after close. Logs live in a
// directory no NAME can be (names start with a letter or digit), so that
// NAME "x.log" cannot collide with the log of NAME "x".
func LogPath(name string) string { return filepath.Join(runDir(), ".log", name+".log") }

// lockRunDir takes the run directory's lock, creating the directory. Opens
// and closes hold it, so two of them never race for a NAME or an image.
func lockRunDir() (unlock func(), err error) {
	if err := os.MkdirAll(runDir(), 0o700); err != nil {
		return nil, withKind(KindDevice, fmt.Errorf("cannot create %s: %w", runDir(), err))
	}
	f, err := os.OpenFile(filepath.Join(runDir(), ".lock"), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, withKind(KindDevice, fmt.Errorf("cannot lock %s: %w", runDir(), err))
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX); err != nil {
		f.Close()
		return nil, withKind(KindDevice, fmt.Errorf("cannot lock %s: %w", runDir(), err))
	}
	return func() { f.Close() }, nil
}

// writeState saves st atomically.
func writeState(st *State) error {
	b, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return err
	}
	path := filepath.Join(stateDir(st.Name), "state.json")
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, append(b, '\n'), 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// ErrNotOpen: no image is open as that NAME.
var ErrNotOpen = errors.New("not open")

// entry is one state directory, as found.
type entry struct {
	name  string
	state *State // nil while the volume is being opened, or if the record is lost
	pid   int    // from state or the pid file
	start uint64
}

func readEntry(name string) (*entry, error) {
	dir := stateDir(name)
	if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
		return nil, ErrNotOpen
	}
	e := &entry{name: name}
	if b, err := os.ReadFile(filepath.Join(dir, "state.json")); err == nil {
		var st State
		if err := json.Unmarshal(b, &st); err == nil {
			e.state = &st
			e.pid, e.start = st.PID, st.PIDStart
		}
	}
	if e.pid == 0 {
		if b, err := os.ReadFile(filepath.Join(dir, "pid")); err == nil {
			f := strings.Fields(string(b))
			if len(f) == 2 {
				e.pid, _ = strconv.Atoi(f[0])
				e.start, _ = strconv.ParseUint(f[1], 10, 64)
			}
		}
	}
	return e, nil
}

// listEntries returns every state directory, sorted by name.
func listEntries() ([]*entry, error) {
	des, err := os.ReadDir(runDir())
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []*entry
	for _, de := range des {
		if !de.IsDir() || !nameRE.MatchString(de.Name()) {
			continue
		}
		if e, err := readEntry(de.Name()); err == nil {
			out = append(out, e)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out, nil
}

// processStart returns the start time of process pid (field 22 of
// /proc/PID/stat, in clock ticks since boot), or 0 if it does not exist.
// Together with the pid it names one process, whatever pid reuse happens.
func processStart(pid int) uint64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// The command name (field 2) may contain spaces; fields after the
	// closing parenthesis are plain.
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 20 {
		return 0
	}
	if f[0] == "Z" { // a zombie serves nothing
		return 0
	}
	v, _ := strconv.ParseUint(f[19], 10, 64)
	return v
}

// processAlive reports whether pid still is the process that started at start.
func processAlive(pid int, start uint64) bool {
	return pid > 0 && start != 0 && processStart(pid) == start
}

// Cipher describes an open image's encryption, field by field (status
// --json); String gives the one-line summary.
type Cipher struct {
	Name           string `json:"name"` // dm-crypt's cipher spec: "aes-xts-plain64"
	KeyBits        int    `json:"key_bits"`
	SectorSize     int    `json:"sector_size"`
	IVLargeSectors bool   `json:"iv_large_sectors"`
	IVOffset       uint64 `json:"iv_offset"`           // added to each tweak, in 512-byte units (cryptsetup --skip)
	DataOffset     int64  `json:"data_offset"`         // where the encrypted data starts in the image, in bytes
	Integrity      string `json:"integrity,omitempty"` // volumes: "blake2b" (per-sector tags) or "none"; "" for plain images
	TagSize        int    `json:"tag_size,omitempty"`
}

// UnmarshalJSON also reads the one-line text that state files of earlier
// versions recorded, so that status shows images they opened.
func (c *Cipher) UnmarshalJSON(b []byte) error {
	var text string
	if json.Unmarshal(b, &text) == nil {
		*c = Cipher{Name: text}
		return nil
	}
	type plain Cipher
	return json.Unmarshal(b, (*plain)(c))
}

func (c Cipher) String() string {
	if c.KeyBits == 0 {
		return c.Name
	}
	s := fmt.Sprintf("%s, %d-bit key, %d-byte sectors", c.Name, c.KeyBits, c.SectorSize)
	if c.IVLargeSectors {
		s += ", iv_large_sectors"
	}
	if c.IVOffset != 0 {
		s += fmt.Sprintf(", skip %d", c.IVOffset)
	}
	switch c.Integrity {
	case "": // plain: where the data starts is one of its parameters
		if c.DataOffset != 0 {
			s += fmt.Sprintf(", offset %d", c.DataOffset/512)
		}
	case "none":
		s += ", no integrity tags"
	default:
		s += fmt.Sprintf(", %s %d-byte tags", c.Integrity, c.TagSize)
	}
	return s
}
