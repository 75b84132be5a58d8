// Command xtsctl encrypts, decrypts, checks and serves disk images with
// AES-XTS: headerless images byte-compatible with cryptsetup's plain mode,
// and xtsctl volumes with passphrase key slots and integrity tags.
//
// Each subcommand lives in its own cmd_<verb>.go and registers itself with
// registerCommand; all output goes through ui.go; exit codes are decided in
// exitcodes.go.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/cobra"
	"github.com/xtsctl/xtsctl/blockdev"
	"github.com/xtsctl/xtsctl/internal/keyfile"
	"github.com/xtsctl/xtsctl/internal/safefile"
	"golang.org/x/sys/unix"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

// app is what every command shares: the output rules, the context that is
// cancelled by an interrupting signal (interruptContext), and stdin.
type app struct {
	ui
	ctx   context.Context
	stdin io.Reader
	// allowExpensiveKDF (--allow-expensive-kdf) runs key slots whatever
	// their Argon2id costs.
	allowExpensiveKDF bool
	// progressJSON (--progress-json) reports progress as JSON lines.
	progressJSON bool
	// keySlot (--key-slot) is the only key slot to try, or -1.
	keySlot int
	// tries (--tries) is how many times a passphrase typed at the
	// terminal is asked for when it is wrong.
	tries int
	// batch (--batch-mode) answers yes to every question instead of asking.
	batch bool
	// keyWindow (--keyfile-offset, --keyfile-size) selects the bytes of
	// the key or passphrase file that hold the secret.
	keyWindow keyfile.Window
	// stdinTaken names what standard input is read for ("" if nothing):
	// it can serve only one of the input, a key, a passphrase.
	stdinTaken string
}

// takeStdin claims standard input for what, or says what already has it.
func (a *app) takeStdin(what string) error {
	if a.stdinTaken != "" {
		return usageError(fmt.Errorf("standard input cannot give both %s and %s", a.stdinTaken, what),
			"give one of them as a file")
	}
	a.stdinTaken = what
	return nil
}

// commandFactories holds one constructor per subcommand (registered from
// init functions), so a fresh command tree is built for every run.
var commandFactories []func(*app) *cobra.Command

func registerCommand(f func(*app) *cobra.Command) { commandFactories = append(commandFactories, f) }

func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	ctx, stop := interruptContext(args)
	defer stop()
	// However the command ends, it leaves no temporary output named
	// (where the filesystem needs named ones: see package safefile).
	defer safefile.RemoveTemporaries()
	results := &resultWriter{w: stdout}
	a := &app{ui: ui{stdout: results, stderr: stderr}, ctx: ctx, stdin: stdin, keySlot: -1, tries: defaultTries}
	root := newRootCmd(a)
	root.SetArgs(args)
	err := root.ExecuteContext(ctx)
	// Results that could not be printed explain a failure to print them,
	// and a stop by SIGPIPE.
	if results.err != nil && (err == nil || errors.Is(err, results.err) || errors.Is(err, context.Canceled)) {
		err = results.failure()
	}
	if err != nil {
		a.reportError(err)
	}
	return exitCode(err)
}

// interruptedError is the cause of a context cancelled by a signal: it
// names the signal, and is a context.Canceled.
type interruptedError struct{ sig os.Signal }

func (e *interruptedError) Error() string {
	if sig, ok := e.sig.(syscall.Signal); ok && unix.SignalName(sig) != "" {
		return "interrupted by " + unix.SignalName(sig)
	}
	return "interrupted by " + e.sig.String()
}

func (e *interruptedError) Unwrap() error { return context.Canceled }

// interruptContext returns a context that is cancelled when a signal that
// stops a command as Ctrl-C does arrives: SIGINT, SIGTERM, SIGHUP (a
// dropped ssh connection, a closed terminal) and SIGPIPE (the reader of
// standard output or error went away). The command then cleans up (a
// partial output is dropped) and exits with exitInterrupted, or with
// exitOutput when its output lost its reader (finish). Writes to a pipe
// without reader fail with EPIPE instead of killing the process. stop
// restores the signals' dispositions.
//
// The background server (blockdev.ServeCommand) sets its own dispositions
// (it ignores SIGHUP, SIGINT and SIGPIPE, and closes on SIGTERM): it gets
// only SIGINT and SIGTERM here, as it always has.
func interruptContext(args []string) (ctx context.Context, stop func()) {
	sigs := []os.Signal{os.Interrupt, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGPIPE}
	if len(args) > 0 && args[0] == blockdev.ServeCommand {
		sigs = sigs[:2]
	}
	ctx, cancel := context.WithCancelCause(context.Background())
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, sigs...)
	done := make(chan struct{})
	go func() {
		for {
			select {
			case sig := <-ch:
				// A write to any pipe or socket without reader raises
				// SIGPIPE; one of our own (the output, a server's
				// socket) fails with EPIPE and says so. Only a reader
				// gone from standard output or error stops the command
				// here.
				if sig == syscall.SIGPIPE && !safefile.ReaderGone(os.Stdout) && !safefile.ReaderGone(os.Stderr) {
					continue
				}
				cancel(&interruptedError{sig})
				return // later signals are dropped until stop
			case <-done:
				return
			}
		}
	}()
	return ctx, func() {
		signal.Stop(ch)
		close(done)
		cancel(nil)
	}
}

func newRootCmd(a *app) *cobra.Command {
	root := &cobra.Command{
		Use:   "xtsctl",
		Short: "Encrypt, check and mount disk images with AES-XTS",
		Long: `xtsctl encrypts and decrypts disk images with AES-XTS (IEEE 1619): its own
volumes (a header, passphrase key slots, per-sector BLAKE2b integrity
tags; the data area stays dm-crypt compatible), cryptsetup's plain mode
(headerless, byte-compatible with --type plain --cipher aes-xts-plain64)
and LUKS, and reads other formats. Each command's help lists the formats
it takes.

` + formatsParagraph(rootUse, false),
		Version:       versionString(),
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetOut(a.stdout)
	root.SetErr(a.stderr)
	root.SetIn(a.stdin)
	root.SetFlagErrorFunc(func(cmd *cobra.Command, err error) error {
		return usageError(err, fmt.Sprintf("see '%s --help'", cmd.CommandPath()))
	})
	root.PersistentFlags().BoolVarP(&a.quiet, "quiet", "q", false, "print only errors and warnings")
	root.PersistentFlags().BoolVarP(&a.verbose, "verbose", "v", false, "say more about what is done (the AES kernel, key slots tried)")
	root.PersistentFlags().BoolVar(&a.batch, "batch-mode", false, "ask no questions: proceed where xtsctl would ask for a confirmation (cryptsetup's --batch-mode)")
	root.Flags().BoolP("version", "V", false, "print the version")
	// cryptsetup's spellings, where they mean the same.
	root.SetGlobalNormalizationFunc(normalizeFlag)
	root.PersistentPreRun = func(cmd *cobra.Command, args []string) {
		currentVerb.name, currentVerb.hasType = cmd.Name(), cmd.Annotations[takesPlain] != ""
	}
	for _, f := range commandFactories {
		root.AddCommand(f(a))
	}
	root.InitDefaultCompletionCmd()
	addFormatHelp(root)
	registerCompletions(root)
	return root
}

// argsNamed checks the positional arguments against their names, so a
// missing one is reported by name.
func argsNamed(names ...string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		switch {
		case len(args) < len(names):
			missing := strings.Join(names[len(args):], " ")
			return usageError(fmt.Errorf("%s: missing argument %s", cmd.Name(), missing),
				fmt.Sprintf("usage: %s", cmd.UseLine()))
		case len(args) > len(names):
			takes := "takes " + strings.Join(names, " ")
			if len(names) == 0 {
				takes = "takes no arguments"
			}
			return usageError(fmt.Errorf("%s: unexpected argument %q (%s)", cmd.Name(), args[len(names)], takes),
				fmt.Sprintf("usage: %s", cmd.UseLine()))
		}
		for i, arg := range args {
			if arg == "" {
				return usageError(fmt.Errorf("%s: %s is empty", cmd.Name(), names[i]))
			}
		}
		return nil
	}
}

// takesPlain annotates the verbs that read plain images (--type plain),
// for hints.
const takesPlain = "plain"
