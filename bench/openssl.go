package bench

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"time"
)

// openssl runs `openssl speed` as the peer implementation. It measures one
// message length per process (-bytes N), encryption or, with -decrypt,
// decryption, for whole seconds; openssl divides by the CPU time the process
// used, as our single-core figures do.
type openssl struct {
	path    string
	version string
}

// errNoOpenSSL is returned by findOpenSSL when no openssl is on $PATH.
var errNoOpenSSL = errors.New("openssl is not installed (not found on $PATH)")

func findOpenSSL(ctx context.Context) (*openssl, error) {
	path, err := exec.LookPath("openssl")
	if err != nil {
		return nil, errNoOpenSSL
	}
	out, err := exec.CommandContext(ctx, path, "version").Output()
	if err != nil {
		return nil, fmt.Errorf("openssl version: %w", err)
	}
	return &openssl{path: path, version: strings.TrimSpace(string(out))}, nil
}

// opensslCipher names XTS with a key of keyBits bits for openssl -evp.
func opensslCipher(keyBits int) string { return fmt.Sprintf("aes-%d-xts", keyBits/2) }

// speedArgs are the arguments of one openssl speed run.
func speedArgs(keyBits, size int, decrypt bool, seconds int) []string {
	args := []string{"speed", "-evp", opensslCipher(keyBits), "-bytes", strconv.Itoa(size), "-seconds", strconv.Itoa(seconds)}
	if decrypt {
		args = append(args, "-decrypt")
	}
	return args
}

// multiArgs are the arguments of an openssl speed run that times the wall
// clock (-elapsed) over procs processes (-multi, when more than one): the
// peer of the sector layer's figures with that many workers.
func multiArgs(keyBits, size int, decrypt bool, seconds, procs int) []string {
	args := []string{"speed", "-elapsed"}
	if procs > 1 {
		args = append(args, "-multi", strconv.Itoa(procs))
	}
	return append(args, speedArgs(keyBits, size, decrypt, seconds)[1:]...)
}

// speed runs openssl speed for one point and returns its MB/s.
func (o *openssl) speed(ctx context.Context, keyBits, size int, decrypt bool, d time.Duration) (float64, error) {
	seconds := max(1, int((d+time.Second-1)/time.Second)) // openssl counts whole seconds
	return o.run(ctx, keyBits, size, speedArgs(keyBits, size, decrypt, seconds))
}

// speedMulti runs openssl speed -elapsed in procs processes at once and
// returns their total MB/s (openssl adds up what each process reports).
func (o *openssl) speedMulti(ctx context.Context, keyBits, size int, decrypt bool, d time.Duration, procs int) (float64, error) {
	seconds := max(1, int((d+time.Second-1)/time.Second))
	return o.run(ctx, keyBits, size, multiArgs(keyBits, size, decrypt, seconds, procs))
}

func (o *openssl) run(ctx context.Context, keyBits, size int, args []string) (float64, error) {
	cmd := exec.CommandContext(ctx, o.path, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		msg := strings.TrimSpace(stderr.String())
		if i := strings.LastIndexByte(msg, '\n'); i >= 0 {
			msg = msg[i+1:]
		}
		return 0, fmt.Errorf("openssl %s: %w (%s)", strings.Join(args, " "), err, msg)
	}
	bps, err := parseSpeed(out, opensslCipher(keyBits), size)
	if err != nil {
		return 0, err
	}
	return bps / 1e6, nil
}

// parseSpeed reads the result table of openssl speed:
//
//	The 'numbers' are in 1000s of bytes per second processed.
//	type             16 bytes     64 bytes ...
//	AES-256-XTS     602041.31k  2126959.93k ...
//
// (with -multi, the lengths come from the children's "Got: +H:16:64 from
// 0" lines instead of the "type" header)
// and returns the bytes per second of cipher (any case) at size.
func parseSpeed(out []byte, cipher string, size int) (float64, error) {
	var sizes []int
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 0 {
			continue
		}
		// With -multi the children report to the parent, whose table has
		// no header; "Got: +H:16:64 from 0" gives its lengths instead.
		if h, ok := strings.CutPrefix(sc.Text(), "Got: +H:"); ok && sizes == nil {
			h, _, _ = strings.Cut(h, " ")
			for _, field := range strings.Split(h, ":") {
				n, err := strconv.Atoi(field)
				if err != nil {
					return 0, fmt.Errorf("openssl speed: unexpected length list %q", sc.Text())
				}
				sizes = append(sizes, n)
			}
			continue
		}
		if f[0] == "type" {
			sizes = sizes[:0]
			for i := 1; i+1 < len(f); i += 2 {
				n, err := strconv.Atoi(f[i])
				if err != nil || f[i+1] != "bytes" {
					return 0, fmt.Errorf("openssl speed: unexpected column header %q", sc.Text())
				}
				sizes = append(sizes, n)
			}
			continue
		}
		if !strings.EqualFold(f[0], cipher) {
			continue
		}
		if sizes == nil {
			return 0, fmt.Errorf("openssl speed: %s results before the column header", f[0])
		}
		if len(f)-1 != len(sizes) {
			return 0, fmt.Errorf("openssl speed: %d results for %d lengths in %q", len(f)-1, len(sizes), sc.Text())
		}
		for i, n := range sizes {
			if n != size {
				continue
			}
			v, ok := strings.CutSuffix(f[1+i], "k")
			if !ok {
				return 0, fmt.Errorf("openssl speed: result %q is not in 1000s of bytes per second", f[1+i])
			}
			k, err := strconv.ParseFloat(v, 64)
			if err != nil || k < 0 {
				return 0, fmt.Errorf("openssl speed: bad result %q", f[1+i])
			}
			return k * 1000, nil
		}
		return 0, fmt.Errorf("openssl speed: no result for %d-byte messages", size)
	}
	return 0, fmt.Errorf("openssl speed: no %s result in the output", strings.ToUpper(cipher))
}
