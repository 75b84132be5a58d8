package devmapper

import (
	"errors"
	"fmt"
	"time"

	"github.com/xtsctl/xtsctl/internal/dmtable"
	"golang.org/x/sys/unix"
)

// ioctlFunc issues one device-mapper ioctl with buf as its argument and
// returns the kernel's errno, if any. Tests replace the kernel with a fake.
type ioctlFunc func(cmd uint32, buf []byte) error

// A client sequences device-mapper commands over one control handle.
type client struct {
	ioctl ioctlFunc
	// statusBuffer is the payload size a status request starts with; it
	// doubles while the kernel reports DM_BUFFER_FULL_FLAG.
	statusBuffer int
	// removeTries and removeWait bound the retries of a remove that fails
	// with EBUSY while no one has the device open: a short-lived holder
	// such as a blkid probe goes away by itself.
	removeTries int
	removeWait  time.Duration
}

const (
	defaultStatusBuffer = 16 << 10
	maxStatusBuffer     = 16 << 20
)

func newClient(ioctl ioctlFunc) *client {
	return &client{
		ioctl:        ioctl,
		statusBuffer: defaultStatusBuffer,
		removeTries:  10,
		removeWait:   100 * time.Millisecond,
	}
}

// call issues command nr with buf and parses the header the kernel wrote
// back.
func (c *client) call(nr uint8, buf []byte) (header, error) {
	if err := c.ioctl(ioctlNumber(nr), buf); err != nil {
		return header{}, err
	}
	return parseHeader(buf)
}

// explain wraps the errno of a failed command for device name with the
// sentinel it stands for.
func explain(op, name string, err error) error {
	var sentinel error
	switch {
	case errors.Is(err, unix.ENXIO):
		sentinel = ErrNotFound
	case errors.Is(err, unix.EBUSY) && op == "create":
		sentinel = ErrExists
	case errors.Is(err, unix.EBUSY):
		sentinel = ErrBusy
	case errors.Is(err, unix.EACCES) && op == "load table for":
		return fmt.Errorf("devmapper: %s %q: %w (not root, or a read-only device in a read-write table)", op, name, err)
	case errors.Is(err, unix.EACCES), errors.Is(err, unix.EPERM):
		return fmt.Errorf("devmapper: %s %q: %w (device-mapper needs root: CAP_SYS_ADMIN)", op, name, err)
	case errors.Is(err, unix.EINVAL) && op == "load table for":
		return fmt.Errorf("devmapper: %s %q: the kernel rejected the table, its reason is in the kernel log (dmesg): %w", op, name, err)
	}
	if sentinel != nil {
		return fmt.Errorf("devmapper: %s %q: %w: %w", op, name, sentinel, err)
	}
	return fmt.Errorf("devmapper: %s %q: %w", op, name, err)
}

// version returns the kernel's ioctl interface version.
func (c *client) version() ([3]uint32, error) {
	h, err := c.call(cmdVersion, newRequest(header{}, 0))
	if err != nil {
		return [3]uint32{}, fmt.Errorf("devmapper: read the interface version: %w", err)
	}
	return h.version, nil
}

// create creates an empty, suspended device.
func (c *client) create(name, uuid string) (Info, error) {
	h, err := c.call(cmdDevCreate, newRequest(header{name: name, uuid: uuid}, 0))
	if err != nil {
		return Info{}, explain("create", name, err)
	}
	return infoFromHeader(h), nil
}

// load loads targets as the device's inactive table. The request buffer is
// wiped afterwards, and DM_SECURE_DATA_FLAG makes the kernel wipe its copy.
func (c *client) load(name string, readOnly bool, targets []loadTarget) (Info, error) {
	flags := uint32(flagSecureData)
	if readOnly {
		flags |= flagReadOnly
	}
	buf := newTableLoad(header{name: name, flags: flags}, targets)
	defer clear(buf)
	h, err := c.call(cmdTableLoad, buf)
	if err != nil {
		return Info{}, explain("load table for", name, err)
	}
	return infoFromHeader(h), nil
}

// resume activates the inactive table, if any, and resumes the device.
func (c *client) resume(name string) (Info, error) {
	h, err := c.call(cmdDevSuspend, newRequest(header{name: name, eventNr: udevCookie}, 0))
	if err != nil {
		return Info{}, explain("resume", name, err)
	}
	return infoFromHeader(h), nil
}

func (c *client) devStatus(name string) (Info, error) {
	h, err := c.call(cmdDevStatus, newRequest(header{name: name}, 0))
	if err != nil {
		return Info{}, explain("read the status of", name, err)
	}
	return infoFromHeader(h), nil
}

// tableStatus returns each target of the live table with its status, or
// with its table parameters if table is set, growing the buffer while the
// kernel reports it full. Crypt keys in table parameters are masked in the
// buffer before they are copied out, and the buffer is wiped.
func (c *client) tableStatus(name string, table bool) (Info, []Target, error) {
	flags := uint32(0)
	if table {
		flags = flagStatusTable | flagSecureData
	}
	for size := c.statusBuffer; ; size *= 2 {
		buf := newRequest(header{name: name, flags: flags}, size)
		h, err := c.call(cmdTableStatus, buf)
		if err != nil {
			clear(buf)
			return Info{}, nil, explain("read the table of", name, err)
		}
		if h.flags&flagBufferFull != 0 {
			clear(buf)
			if size >= maxStatusBuffer {
				return Info{}, nil, fmt.Errorf("devmapper: table of %q does not fit in %d bytes", name, size)
			}
			continue
		}
		raw, err := parseTargets(buf, h)
		if err != nil {
			clear(buf)
			return Info{}, nil, fmt.Errorf("devmapper: read the table of %q: %w", name, err)
		}
		targets := make([]Target, len(raw))
		for i, r := range raw {
			if table && r.typ == "crypt" {
				dmtable.MaskCryptKey(r.params)
			}
			targets[i] = Target{Start: r.start, Length: r.length, Type: r.typ, Params: string(r.params)}
		}
		clear(buf)
		return infoFromHeader(h), targets, nil
	}
}

// remove removes the device and its tables and returns what it was. A
// device that is open fails with ErrBusy at once; an EBUSY while nobody has
// it open is retried.
func (c *client) remove(name string) (Info, error) {
	info, err := c.devStatus(name)
	if err != nil {
		return Info{}, err
	}
	if info.OpenCount > 0 {
		return Info{}, fmt.Errorf("devmapper: remove %q: %w (open %d times: unmount or close it first)", name, ErrBusy, info.OpenCount)
	}
	for try := 1; ; try++ {
		_, err = c.call(cmdDevRemove, newRequest(header{name: name, eventNr: udevCookie}, 0))
		if !errors.Is(err, unix.EBUSY) || try >= c.removeTries {
			break
		}
		time.Sleep(c.removeWait)
	}
	if err != nil {
		return Info{}, explain("remove", name, err)
	}
	return info, nil
}

// createDevice creates device name with the given UUID, loads targets and
// activates them. If any step fails, the device is removed again.
func (c *client) createDevice(name, uuid string, readOnly bool, targets []loadTarget) (Info, error) {
	if _, err := c.create(name, uuid); err != nil {
		return Info{}, err
	}
	_, err := c.load(name, readOnly, targets)
	var info Info
	if err == nil {
		info, err = c.resume(name)
	}
	if err != nil {
		if _, rerr := c.remove(name); rerr != nil {
			err = errors.Join(err, fmt.Errorf("devmapper: undo the creation: %w", rerr))
		}
		return Info{}, err
	}
	return info, nil
}
