// Package mount mounts and unmounts the filesystem on a block device and
// tells what is mounted where. It knows nothing of images or encryption.
package mount

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// Detect names the filesystem on the block device at path from its
// superblock: ext2/3/4 (mounted as ext4, whose driver serves all three),
// xfs, btrfs or vfat; "" when it finds none. It reads the device itself,
// so it sees what mount(2) would.
func Detect(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	buf := make([]byte, 128<<10)
	n, err := f.ReadAt(buf, 0)
	if n < 4096 {
		if err == nil {
			err = errors.New("device too small")
		}
		return "", fmt.Errorf("read superblock of %s: %w", path, err)
	}
	buf = buf[:n]
	return detect(buf), nil
}

// detect recognises superblock magics in the first bytes of a device;
// "" means none. Offsets are from each filesystem's on-disk format.
func detect(b []byte) string {
	has := func(off int, magic []byte) bool {
		return len(b) >= off+len(magic) && bytes.Equal(b[off:off+len(magic)], magic)
	}
	switch {
	case len(b) >= 1082 && binary.LittleEndian.Uint16(b[1080:]) == 0xEF53:
		return "ext4"
	case has(0, []byte("XFSB")):
		return "xfs"
	case has(0x10040, []byte("_BHRfS_M")):
		return "btrfs"
	case has(0x52, []byte("FAT32   ")), has(0x36, []byte("FAT16   ")), has(0x36, []byte("FAT12   ")):
		return "vfat"
	}
	return ""
}

// Mount mounts the filesystem of type fstype on device at dir.
func Mount(device, dir, fstype string, readOnly bool) error {
	var flags uintptr
	if readOnly {
		flags |= unix.MS_RDONLY
	}
	if err := unix.Mount(device, dir, fstype, flags, ""); err != nil {
		return fmt.Errorf("mount %s (%s) on %s: %w", device, fstype, dir, err)
	}
	return nil
}

// Unmount unmounts dir, retrying briefly while it is busy (udev and
// blkid probes hold new devices open for a moment). dir itself is never
// followed if it is a symlink (UMOUNT_NOFOLLOW).
func Unmount(dir string) error {
	var err error
	for range 50 {
		err = unix.Unmount(dir, unix.UMOUNT_NOFOLLOW)
		if !errors.Is(err, unix.EBUSY) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if errors.Is(err, unix.EINVAL) {
		return fmt.Errorf("unmount %s: %w (not a mountpoint)", dir, err)
	}
	if err != nil {
		return fmt.Errorf("unmount %s: %w", dir, err)
	}
	return nil
}

// Source returns the source (the device) of the topmost mount at dir
// according to /proc/self/mountinfo, or "" when nothing is mounted there.
func Source(dir string) string {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return ""
	}
	src := ""
	for line := range bytes.SplitSeq(b, []byte("\n")) {
		// id parent major:minor root mountpoint opts... - fstype source superopts
		fields := bytes.Fields(line)
		if len(fields) < 10 || unescapeMountinfo(string(fields[4])) != dir {
			continue
		}
		for i, f := range fields {
			if string(f) == "-" && i+2 < len(fields) {
				src = unescapeMountinfo(string(fields[i+2])) // the last (topmost) mount wins
			}
		}
	}
	return src
}

// unescapeMountinfo undoes the octal escapes (\040 for space, ...) the
// kernel puts in mountinfo paths.
func unescapeMountinfo(s string) string {
	if !bytes.ContainsRune([]byte(s), '\\') {
		return s
	}
	var out []byte
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			var v byte
			ok := true
			for _, c := range []byte(s[i+1 : i+4]) {
				if c < '0' || c > '7' {
					ok = false
					break
				}
				v = v*8 + (c - '0')
			}
			if ok {
				out = append(out, v)
				i += 3
				continue
			}
		}
		out = append(out, s[i])
	}
	return string(out)
}
