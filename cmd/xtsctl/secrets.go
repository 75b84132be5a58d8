package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"sync"

	"github.com/xtsctl/xtsctl/internal/secret"
)

// readKeyFile reads a raw XTS key (cryptsetup plain mode --key-file: the
// file's bytes are the key, no hashing). It must hold exactly 32 or 64
// bytes, and its two halves must differ. The caller wipes the key.
func readKeyFile(a *app, path string) ([]byte, error) {
	protectSecrets(a)
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, withCode(exitKey, fmt.Errorf("key file %s does not exist", path))
	} else if err != nil {
		return nil, withCode(exitKey, fmt.Errorf("cannot read key file: %w", err))
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, withCode(exitKey, fmt.Errorf("cannot read key file: %w", err))
	}
	if fi.IsDir() {
		return nil, withCode(exitKey, fmt.Errorf("key file %s is a directory", path))
	}
	warnIfExposed(a, "key file", path, fi)
	buf := make([]byte, 65) // one more than the largest key, to detect long files
	n, err := io.ReadFull(f, buf)
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
		secret.Wipe(buf)
		return nil, withCode(exitKey, fmt.Errorf("cannot read key file %s: %w", path, err))
	}
	key := buf[:n]
	if n != 32 && n != 64 {
		secret.Wipe(buf)
		size := fmt.Sprintf("%d bytes", n)
		if n == 65 {
			size = "more than 64 bytes"
		}
		return nil, withCode(exitKey, fmt.Errorf("key file %s holds %s; want exactly 32 (XTS-AES-128) or 64 (XTS-AES-256) raw bytes", path, size),
			"make one with: head -c 64 /dev/urandom > KEYFILE")
	}
	if bytes.Equal(key[:n/2], key[n/2:]) {
		secret.Wipe(buf)
		return nil, withCode(exitKey, fmt.Errorf("key file %s has two equal halves; XTS needs two independent AES keys", path))
	}
	return key, nil
}

// protectSecrets locks memory and disables core dumps before any secret is
// read (see internal/secret); where memory cannot be locked it warns once.
func protectSecrets(a *app) {
	if err := secret.Protect(); err != nil {
		memoryWarning.Do(func() {
			a.warningf("%v", err)
			a.hintf("run as root, or raise the locked-memory limit (ulimit -l)")
		})
	}
}

var memoryWarning sync.Once

// warnIfExposed warns when a file holding secrets can be read by other users.
func warnIfExposed(a *app, what, path string, fi fs.FileInfo) {
	if fi.Mode().IsRegular() && fi.Mode().Perm()&0o077 != 0 {
		a.warningf("%s %s is accessible by other users (mode %04o)", what, path, fi.Mode().Perm())
		a.hintf("chmod 600 %s", path)
	}
}
