package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"sync"

	"github.com/spf13/pflag"

	"github.com/xtsctl/xtsctl/internal/secret"
	"github.com/xtsctl/xtsctl/xts"
	"golang.org/x/term"
)

// readKeyFile reads a raw XTS key (cryptsetup plain mode --key-file: the
// file's bytes are the key, no hashing). It must hold exactly 32 or 64
// bytes that xts.NewCipher accepts (its two halves must differ). The caller
// wipes the key.
func readKeyFile(a *app, path string) ([]byte, error) {
	buf, n, err := readSecretFile(a, "key file", path, 64, a.keyWindow)
	if err != nil {
		return nil, err
	}
	key := buf[:n]
	if n != 32 && n != 64 {
		secret.Wipe(buf)
		size := fmt.Sprintf("%d bytes", n)
		if n == 65 {
			size = "more than 64 bytes"
		}
		hint := "make one with: head -c 64 /dev/urandom > KEYFILE"
		if n == 65 {
			hint = "if the key is a part of the file, say which: --keyfile-offset BYTES --keyfile-size 64 (or 32)"
		}
		return nil, withCode(exitKey, fmt.Errorf("key file %s holds %s; want exactly 32 (XTS-AES-128) or 64 (XTS-AES-256) raw bytes", path, size), hint)
	}
	// The xts package judges the key; here its refusal gets the file's name.
	c, err := xts.NewCipher(key)
	if err != nil {
		secret.Wipe(buf)
		if errors.Is(err, xts.ErrEqualKeyHalves) {
			err = fmt.Errorf("key file %s has two equal halves; XTS needs two independent AES keys", path)
		}
		return nil, withCode(exitKey, err)
	}
	c.Wipe()
	return key, nil
}

// keyWindow is the part of a key or passphrase file that holds the secret:
// cryptsetup's --keyfile-offset and --keyfile-size, so that a key can live
// inside a larger file or device.
type keyWindow struct {
	offset int64 // bytes skipped at the start
	size   int   // bytes read exactly (taken as they are), or 0: the rest of the file
}

// registerKeyWindow adds --keyfile-offset and --keyfile-size, once, for the
// command's key file (--key-file) or passphrase file (--passphrase-file).
func registerKeyWindow(a *app, fs *pflag.FlagSet) {
	if fs.Lookup("keyfile-offset") != nil {
		return
	}
	fs.Int64Var(&a.keyWindow.offset, "keyfile-offset", 0, "skip `BYTES` at the start of the key or passphrase file (cryptsetup's --keyfile-offset)")
	fs.IntVar(&a.keyWindow.size, "keyfile-size", 0, "read exactly `BYTES` of the key or passphrase file, taken as they are (cryptsetup's --keyfile-size; default: the rest of the file)")
}

// check validates the window against limit, the most a secret may hold.
func (w keyWindow) check(limit int) error {
	switch {
	case w.offset < 0:
		return usageError(fmt.Errorf("--keyfile-offset %d is negative", w.offset))
	case w.size < 0:
		return usageError(fmt.Errorf("--keyfile-size %d is negative", w.size))
	case w.size > limit:
		return usageError(fmt.Errorf("--keyfile-size %d is more than the %d bytes this file can hold", w.size, limit))
	}
	return nil
}

// readSecretFile reads up to limit+1 bytes of the file at path, which holds
// a key or passphrase ("what" names it in messages), so that callers can
// tell a file that is too long; win, if set, selects the bytes to read. It
// locks memory first, refuses directories and warns when other users can
// read the file. The caller wipes buf, of which the first n bytes were
// read.
func readSecretFile(a *app, what, path string, limit int, win keyWindow) (buf []byte, n int, err error) {
	if err := win.check(limit); err != nil {
		return nil, 0, err
	}
	buf, n, err = readSecretPrefix(a, what, path, limit, win.offset)
	if err != nil || win.size == 0 {
		return buf, n, err
	}
	if n < win.size {
		secret.Wipe(buf)
		return nil, 0, withCode(exitKey, fmt.Errorf("%s %s holds %d bytes after --keyfile-offset %d; --keyfile-size wants %d", what, path, n, win.offset, win.size))
	}
	return buf, win.size, nil
}

// readSecretPrefix reads up to limit+1 bytes of the file at path from byte
// offset on.
func readSecretPrefix(a *app, what, path string, limit int, offset int64) (buf []byte, n int, err error) {
	protectSecrets(a)
	if path == "-" {
		// Standard input: from a pipe (a terminal would echo it).
		if err := a.takeStdin("the " + what); err != nil {
			return nil, 0, err
		}
		if f, ok := a.stdin.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
			return nil, 0, usageError(fmt.Errorf("%s - reads standard input, which is a terminal", what),
				"pipe it in, or leave the option out to be asked without echo")
		}
		if _, err := io.CopyN(io.Discard, a.stdin, offset); err != nil && !errors.Is(err, io.EOF) {
			return nil, 0, withCode(exitKey, fmt.Errorf("cannot read the %s from standard input: %w", what, err))
		}
		buf = make([]byte, limit+1)
		n, err = io.ReadFull(a.stdin, buf)
		if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
			secret.Wipe(buf)
			return nil, 0, withCode(exitKey, fmt.Errorf("cannot read the %s from standard input: %w", what, err))
		}
		return buf, n, nil
	}
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, 0, withCode(exitKey, fmt.Errorf("%s %s does not exist", what, path))
	} else if err != nil {
		return nil, 0, withCode(exitKey, fmt.Errorf("cannot read %s: %w", what, err))
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, 0, withCode(exitKey, fmt.Errorf("cannot read %s: %w", what, err))
	}
	if fi.IsDir() {
		return nil, 0, withCode(exitKey, fmt.Errorf("%s %s is a directory", what, path))
	}
	warnIfExposed(a, what, path, fi)
	if offset > 0 {
		// Seek where it can (files, devices), read past where not (pipes).
		if _, err := f.Seek(offset, io.SeekStart); err != nil {
			if _, err := io.CopyN(io.Discard, f, offset); err != nil && !errors.Is(err, io.EOF) {
				return nil, 0, withCode(exitKey, fmt.Errorf("cannot read %s %s: %w", what, path, err))
			}
		}
	}
	buf = make([]byte, limit+1)
	n, err = io.ReadFull(f, buf)
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
		secret.Wipe(buf)
		return nil, 0, withCode(exitKey, fmt.Errorf("cannot read %s %s: %w", what, path, err))
	}
	return buf, n, nil
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
