package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/xtsctl/xtsctl/internal/keyfile"
	"github.com/xtsctl/xtsctl/internal/tty"
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
	// optional accepts an empty passphrase (VeraCrypt with keyfiles).
	optional bool
	// notice is said on the terminal before the prompt: why it is asked
	// again (a wrong passphrase).
	notice string
}

// readPassphrase returns the passphrase; the caller wipes it.
func readPassphrase(a *app, req passphraseRequest) ([]byte, error) {
	protectSecrets(a)
	if req.file != "" {
		var win keyfile.Window
		if req.flag == "passphrase-file" {
			win = a.keyWindow // cryptsetup's --keyfile-* apply to the unlocking key file, not the new one
		}
		return readPassphraseFile(a, req.file, win)
	}
	return readPassphraseTTY(a, req)
}

// readPassphraseFile returns the file's content with one trailing newline
// removed (what echo or an editor adds), or with win.Size set exactly the
// bytes it selects (keyfile.Options.Passphrase).
func readPassphraseFile(a *app, path string, win keyfile.Window) ([]byte, error) {
	p, err := readSecret(a, path, keyfile.Options{Name: "passphrase file", Limit: maxPassphrase, Window: win, Passphrase: true})
	if errors.Is(err, keyfile.ErrEmpty) {
		return nil, withCode(exitKey, fmt.Errorf("passphrase file %s is empty", path), "write the passphrase into it, e.g. with a text editor")
	}
	return p, err
}

// readPassphraseTTY asks on the controlling terminal, without echo.
// Ctrl-C stops the command (exit 130) and Ctrl-D gives no passphrase
// (exit 4), at once: see tty.Terminal.ReadLine.
func readPassphraseTTY(a *app, req passphraseRequest) ([]byte, error) {
	terminal, err := tty.Open()
	if err != nil {
		return nil, usageError(fmt.Errorf("no terminal to ask for %s", req.prompt),
			fmt.Sprintf("give it in a file: --%s FILE", req.flag))
	}
	defer terminal.Close()
	if req.notice != "" {
		a.promptTTY(terminal, "%s\n", req.notice)
	}
	ask := func(prompt string) ([]byte, error) {
		p, err := terminal.ReadLine(a.ctx, prompt+": ", true)
		switch {
		case errors.Is(err, context.Canceled):
			return nil, withCode(exitInterrupted, fmt.Errorf("%w at the prompt for %s", err, req.prompt))
		case errors.Is(err, tty.ErrNoInput):
			return nil, withCode(exitKey, fmt.Errorf("no passphrase given: the %w at the prompt for %s", err, req.prompt))
		case err != nil:
			return nil, withCode(exitKey, fmt.Errorf("cannot read the %s from the terminal: %w", req.prompt, err))
		}
		return p, nil
	}
	p, err := ask("Enter " + req.prompt)
	if err != nil {
		return nil, err
	}
	if len(p) == 0 && !req.optional {
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

// confirm asks the person at the terminal to type "yes" before something
// that cannot be undone; --batch-mode answers for them. It asks only when
// standard input is a terminal (someone is there; a script's input is
// not), on /dev/tty; otherwise it fails, naming --batch-mode.
func confirm(a *app, question string) error {
	if a.batch {
		return nil
	}
	in, ok := a.stdin.(*os.File)
	if !ok || !term.IsTerminal(int(in.Fd())) {
		return usageError(fmt.Errorf("%s, and there is no terminal to ask whether to go on", question),
			"to go on all the same, add --batch-mode")
	}
	terminal, err := tty.Open()
	if err != nil {
		return usageError(fmt.Errorf("%s, and there is no terminal to ask whether to go on", question),
			"to go on all the same, add --batch-mode")
	}
	defer terminal.Close()
	line, err := terminal.ReadLine(a.ctx, question+".\nType yes to go on: ", false)
	switch {
	case errors.Is(err, context.Canceled):
		return withCode(exitInterrupted, fmt.Errorf("%w at the question; nothing was changed", err))
	case err != nil || strings.TrimSpace(string(line)) != "yes":
		return usageError(errors.New("not confirmed; nothing was changed"))
	}
	return nil
}
