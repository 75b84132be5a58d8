package blockdev

// The FUSE backend's processes talk over three channels:
//
//   - fd 3 of the server: the parent writes the configuration and the
//     secret (key or passphrase), then closes it. Secrets never travel in
//     argv or the environment, where other users could read them.
//   - fd 4 of the server: the server writes one readyMsg when the device
//     is ready (or why it is not) and closes it; the parent returns then,
//     as gocryptfs's -notifypid does with a signal.
//   - ctl.sock in the state directory: one JSON request, one JSON reply
//     per connection (status, close).

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"path/filepath"
	"time"

	"github.com/xtsctl/xtsctl/blockdev/fusefile"
	"github.com/xtsctl/xtsctl/disk"
)

// serverConfig is everything the server needs except the secret.
type serverConfig struct {
	Name     string `json:"name"`
	RunDir   string `json:"run_dir"`
	Image    string `json:"image"`
	ImageDev uint64 `json:"image_dev"`
	ImageIno uint64 `json:"image_ino"`
	// Format and Layout describe what to serve (disk.Unlocked, whose key
	// travels as the secret); Session is the format's own state for it.
	Format   string      `json:"format"`
	Layout   disk.Layout `json:"layout"`
	Session  []byte      `json:"session,omitempty"`
	Cipher   Cipher      `json:"cipher"`
	ReadOnly bool        `json:"read_only"`
	Mount    string      `json:"mount,omitempty"`
	MountDev uint64      `json:"mount_dev,omitempty"` // the directory Mount names, handed over as fd 6
	MountIno uint64      `json:"mount_ino,omitempty"`
	FSType   string      `json:"fstype,omitempty"`
	Recover  bool        `json:"recover,omitempty"` // open --recover: accept mismatched sectors after a crash
}

// maxConfig bounds what the server reads from fd 3.
const maxConfig = 1 << 16

// writeConfig frames cfg and secret as two length-prefixed blocks.
func writeConfig(w io.Writer, cfg *serverConfig, secret []byte) error {
	b, err := json.Marshal(cfg)
	if err != nil {
		return err
	}
	var n [4]byte
	binary.BigEndian.PutUint32(n[:], uint32(len(b)))
	if _, err := w.Write(append(n[:], b...)); err != nil {
		return err
	}
	binary.BigEndian.PutUint32(n[:], uint32(len(secret)))
	if _, err := w.Write(n[:]); err != nil {
		return err
	}
	_, err = w.Write(secret)
	return err
}

// readConfig reads what writeConfig wrote. The caller wipes the secret.
func readConfig(r io.Reader) (*serverConfig, []byte, error) {
	block := func() ([]byte, error) {
		var n [4]byte
		if _, err := io.ReadFull(r, n[:]); err != nil {
			return nil, err
		}
		size := binary.BigEndian.Uint32(n[:])
		if size > maxConfig {
			return nil, fmt.Errorf("configuration block of %d bytes is too large", size)
		}
		b := make([]byte, size)
		_, err := io.ReadFull(r, b)
		return b, err
	}
	b, err := block()
	if err != nil {
		return nil, nil, fmt.Errorf("read configuration: %w", err)
	}
	var cfg serverConfig
	if err := json.Unmarshal(b, &cfg); err != nil {
		return nil, nil, fmt.Errorf("read configuration: %w", err)
	}
	secret, err := block()
	if err != nil {
		return nil, nil, fmt.Errorf("read secret: %w", err)
	}
	return &cfg, secret, nil
}

// readyMsg is the server's answer on fd 4, and its reply on ctl.sock.
type readyMsg struct {
	OK        bool            `json:"ok"`
	Device    string          `json:"device,omitempty"`
	FSType    string          `json:"fstype,omitempty"`
	Recovered *Recovery       `json:"recovered,omitempty"`
	Upgraded  bool            `json:"upgraded,omitempty"` // a version-1 volume was rewritten as version 2
	Warnings  []string        `json:"warnings,omitempty"`
	Stats     *fusefile.Stats `json:"stats,omitempty"`
	Error     string          `json:"error,omitempty"`
	Kind      Kind            `json:"kind,omitempty"`
	Hints     []string        `json:"hints,omitempty"`
}

// Recovery reports what open checked after an unclean shutdown, for the
// record and for the user (disk.Recovery).
type Recovery = disk.Recovery

func errorMsg(err error) *readyMsg {
	return &readyMsg{Error: err.Error(), Kind: kindOf(err), Hints: hintsOf(err)}
}

// asError turns a failed reply back into an error with its kind.
func (m *readyMsg) asError() error {
	if m.OK {
		return nil
	}
	return withKind(m.Kind, errors.New(m.Error), m.Hints...)
}

// ctlRequest is a request on ctl.sock.
type ctlRequest struct {
	Op string `json:"op"` // "status" or "close"
}

func ctlPath(name string) string { return filepath.Join(stateDir(name), "ctl.sock") }

// ctlCall sends one request to the server of name and reads its reply.
func ctlCall(name, op string, timeout time.Duration) (*readyMsg, error) {
	c, err := net.DialTimeout("unix", ctlPath(name), 2*time.Second)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(timeout))
	if err := json.NewEncoder(c).Encode(ctlRequest{Op: op}); err != nil {
		return nil, err
	}
	var m readyMsg
	if err := json.NewDecoder(bufio.NewReader(c)).Decode(&m); err != nil {
		return nil, fmt.Errorf("no reply from the server of %s: %w", name, err)
	}
	return &m, nil
}
