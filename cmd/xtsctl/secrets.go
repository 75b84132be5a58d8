package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sync"

	"github.com/spf13/pflag"

	"github.com/xtsctl/xtsctl/internal/keyfile"
	"github.com/xtsctl/xtsctl/internal/secret"
	"golang.org/x/term"
)

// registerKeyWindow adds --keyfile-offset and --keyfile-size, once, for the
// command's key file (--key-file) or passphrase file (--passphrase-file).
func registerKeyWindow(a *app, fs *pflag.FlagSet) {
	if fs.Lookup("keyfile-offset") != nil {
		return
	}
	fs.Int64Var(&a.keyWindow.Offset, "keyfile-offset", 0, "skip `BYTES` at the start of the key or passphrase file (cryptsetup's --keyfile-offset)")
	fs.IntVarP(&a.keyWindow.Size, "keyfile-size", cryptsetupShort["keyfile-size"], 0, "read exactly `BYTES` of the key or passphrase file, taken as they are (cryptsetup's --keyfile-size; default: the rest of the file)")
}

// readSecret reads a key or passphrase from the file at path or, for "-",
// from standard input (keyfile.Read, keyfile.ReadStdin), after locking
// memory, and maps the errors. The caller wipes the secret.
func readSecret(a *app, path string, o keyfile.Options) ([]byte, error) {
	if err := o.Window.Check(o.Limit); err != nil {
		return nil, usageError(fmt.Errorf("--keyfile-%w", err))
	}
	protectSecrets(a)
	var p []byte
	var err error
	if path == "-" {
		// Standard input: from a pipe (a terminal would echo it).
		if err := a.takeStdin("the " + o.Name); err != nil {
			return nil, err
		}
		if f, ok := a.stdin.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
			return nil, usageError(fmt.Errorf("%s - reads standard input, which is a terminal", o.Name),
				"pipe it in, or leave the option out to be asked without echo")
		}
		p, err = interruptible(a.ctx, func() ([]byte, error) { return keyfile.ReadStdin(a.stdin, o) })
	} else {
		o.Exposed = func(perm fs.FileMode) {
			a.warningf("%s %s is accessible by other users (mode %04o)", o.Name, path, perm)
			a.hintf("chmod 600 %s", path)
		}
		p, err = interruptible(a.ctx, func() ([]byte, error) { return keyfile.Read(path, o) })
	}
	if errors.Is(err, context.Canceled) {
		return nil, err // an interruption: exitInterrupted, not a key error
	}
	var se *keyfile.ShortError
	if errors.As(err, &se) {
		err = fmt.Errorf("%s %s holds %d bytes after --keyfile-offset %d; --keyfile-size wants %d", o.Name, path, se.Got, se.Window.Offset, se.Window.Size)
	}
	return p, withCode(exitKey, err)
}

// interruptible runs read, which may block for ever (a FIFO without a
// writer blocks in open(2), a pipe whose writer never writes in read(2)),
// so that SIGINT or SIGTERM still ends the command at once with the
// signal's exit code. A secret that arrives after that is wiped.
func interruptible(ctx context.Context, read func() ([]byte, error)) ([]byte, error) {
	type result struct {
		secret []byte
		err    error
	}
	done := make(chan result, 1)
	go func() {
		p, err := read()
		done <- result{p, err}
	}()
	select {
	case r := <-done:
		return r.secret, r.err
	case <-ctx.Done():
		go func() { clear((<-done).secret) }()
		return nil, context.Cause(ctx)
	}
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

// maxKeyFile bounds a key file a format reads whole (a LUKS passphrase):
// cryptsetup's default --keyfile-size limit (8 MiB).
const maxKeyFile = 8 << 20
