package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"

	"golang.org/x/term"
)

// Passphrases come from the terminal (/dev/tty, without echo) or from a file
// named with --passphrase-file; never from arguments or the environment.

// maxPassphrase bounds a passphrase file: a passphrase, or a random key
// file used as one, is far smaller.
const maxPassphrase = 64 << 10

// passphraseRequest says where one passphrase comes from and how to ask.
type passphraseRequest struct {
	file    string // --passphrase-file (or --new-passphrase-file), "" for the terminal
	flag    string // the flag's name, for messages
	prompt  string // e.g. "passphrase for disk.img"
	confirm bool   // ask twice on the terminal (a new passphrase)
}

// readPassphrase returns the passphrase; the caller wipes it.
func readPassphrase(a *app, req passphraseRequest) ([]byte, error) {
	protectSecrets(a)
	if req.file != "" {
		return readPassphraseFile(a, req.file)
	}
	return readPassphraseTTY(a, req)
}

// readPassphraseFile returns the file's content with one trailing newline
// removed (what echo or an editor adds). An empty passphrase is an error.
func readPassphraseFile(a *app, path string) ([]byte, error) {
	buf, n, err := readSecretFile(a, "passphrase file", path, maxPassphrase)
	if err != nil {
		return nil, err
	}
	if n > maxPassphrase {
		clear(buf)
		return nil, withCode(exitKey, fmt.Errorf("passphrase file %s is larger than %d bytes", path, maxPassphrase))
	}
	p := bytes.TrimSuffix(buf[:n], []byte("\n"))
	if len(p) == 0 {
		clear(buf)
		return nil, withCode(exitKey, fmt.Errorf("passphrase file %s is empty", path),
			"write the passphrase into it, e.g. with a text editor")
	}
	out := bytes.Clone(p)
	clear(buf)
	return out, nil
}

// readPassphraseTTY asks on the controlling terminal, without echo.
func readPassphraseTTY(a *app, req passphraseRequest) ([]byte, error) {
	tty, err := os.OpenFile("/dev/tty", os.O_RDWR, 0)
	if err != nil {
		return nil, usageError(fmt.Errorf("no terminal to ask for %s", req.prompt),
			fmt.Sprintf("give it in a file: --%s FILE", req.flag))
	}
	defer tty.Close()
	ask := func(prompt string) ([]byte, error) {
		a.promptTTY(tty, "%s: ", prompt)
		p, err := term.ReadPassword(int(tty.Fd()))
		a.promptTTY(tty, "\n")
		if err != nil {
			return nil, withCode(exitKey, fmt.Errorf("cannot read the %s from the terminal: %w", req.prompt, err))
		}
		return p, nil
	}
	p, err := ask("Enter " + req.prompt)
	if err != nil {
		return nil, err
	}
	if len(p) == 0 {
		return nil, withCode(exitKey, errors.New("empty passphrase"))
	}
	if req.confirm {
		again, err := ask("Confirm " + req.prompt)
		if err != nil {
			clear(p)
			return nil, err
		}
		same := bytes.Equal(p, again)
		clear(again)
		if !same {
			clear(p)
			return nil, withCode(exitKey, errors.New("the passphrases do not match"))
		}
	}
	return p, nil
}
