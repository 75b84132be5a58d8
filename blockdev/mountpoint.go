package blockdev

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// CheckMountpoint checks dir, where a Request is to mount its filesystem,
// before anything is unlocked, and returns its real path (absolute,
// symlinks resolved), which is what Request.Mount takes: close unmounts
// exactly what was mounted, wherever a symlink on the way points by then.
// occupied says dir holds something, which mounting hides until close
// (mount(8) says nothing of it). Errors are *Error: KindUsage when dir does
// not exist or is not a directory, KindDevice when it cannot be examined.
func CheckMountpoint(dir string) (real string, occupied bool, err error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", false, usageError(err)
	}
	if r, err := filepath.EvalSymlinks(abs); err == nil {
		abs = r
	}
	fi, err := os.Stat(abs)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return "", false, usageError(fmt.Errorf("mountpoint %s does not exist", dir), "create it: mkdir -p "+dir)
	case err != nil:
		return "", false, withKind(KindDevice, err)
	case !fi.IsDir():
		return "", false, usageError(fmt.Errorf("mountpoint %s is not a directory", dir))
	}
	if d, err := os.Open(abs); err == nil {
		names, _ := d.Readdirnames(1)
		d.Close()
		occupied = len(names) > 0
	}
	return abs, occupied, nil
}
