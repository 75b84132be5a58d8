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

// speed runs openssl speed for one point and returns its MB/s.
func (o *openssl) speed(ctx context.Context, keyBits, size int, decrypt bool, d time.Duration) (float64, error) {
	seconds := max(1, int((d+time.Second-1)/time.Second)) // openssl counts whole seconds
	cmd := exec.CommandContext(ctx, o.path, speedArgs(keyBits, size, decrypt, seconds)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		msg := strings.TrimSpace(stderr.String())
		if i := strings.LastIndexByte(msg, '\n'); i >= 0 {
			msg = msg[i+1:]
		}
		return 0, fmt.Errorf("openssl %s: %w (%s)", strings.Join(speedArgs(keyBits, size, decrypt, seconds), " "), err, msg)
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
// and returns the bytes per second of cipher (any case) at size.
func parseSpeed(out []byte, cipher string, size int) (float64, error) {
	var sizes []int
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 0 {
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
