//go:build linux

package main

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/xtsctl/xtsctl/blockdev"
	"github.com/xtsctl/xtsctl/internal/mount"
	"github.com/xtsctl/xtsctl/volume"
)

// testVolume formats a volume of size bytes of data with 4096-byte
// sectors and integrity tags, at a low KDF cost, and returns the flags
// that open it.
func testVolume(t *testing.T, dir string, size string) (img string, flags []string) {
	t.Helper()
	img = filepath.Join(dir, "disk.vol")
	pass := filepath.Join(dir, "pass")
	if err := os.WriteFile(pass, []byte("open sesame\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	mustRun(t, "format", "-q", "--size", size, "--kdf-memory", "64", "--kdf-iterations", "1", "--passphrase-file", pass, img)
	return img, []string{"--passphrase-file", pass}
}

// blockOf finds which data sector of the volume holds the 4096 bytes
// want, by reading the open device.
func blockOf(t *testing.T, dev string, want []byte) uint64 {
	t.Helper()
	b, err := os.ReadFile(dev)
	if err != nil {
		t.Fatal(err)
	}
	at := bytes.Index(b, want)
	if at < 0 || at%4096 != 0 {
		t.Fatalf("block not found sector-aligned on %s (at %d)", dev, at)
	}
	return uint64(at / 4096)
}

// TestVolumeOpenEndToEnd: format, open, mkfs.ext4, mount, write files of
// several sizes, close, open, read and compare, close, verify clean. Then
// flip one byte of a file's sector in the image: reading that file fails
// with EIO, the others read, status counts the error.
func TestVolumeOpenEndToEnd(t *testing.T) {
	skipUnlessServing(t)
	dir := servingEnv(t)
	img, flags := testVolume(t, dir, "64M")
	formatExt4(t, img, "v", flags)
	mnt := filepath.Join(dir, "mnt")
	os.Mkdir(mnt, 0o755)

	mustRun(t, args("open", flags, "--mount", mnt, img, "v")...)
	files := makeFiles(t, mnt)
	victim := make([]byte, 16*4096)
	rand.Read(victim)
	writeSynced(t, filepath.Join(mnt, "victim"), victim)
	mustRun(t, "close", "v")
	verified := mustRun(t, "verify", "--passphrase-file", flags[1], img)
	if !strings.Contains(verified.stdout, "state: closed cleanly") {
		t.Errorf("verify after close: %q", verified.stdout)
	}

	dev := strings.TrimSpace(mustRun(t, args("open", flags, "--read-only", img, "v")...).stdout)
	n := blockOf(t, dev, victim[5*4096:6*4096])
	// The header is not rewritten under an open volume, even a read-only
	// one: commands that would are refused (docs/CLI.md).
	backup := filepath.Join(dir, "v.hdr")
	mustRun(t, "header", "backup", img, backup)
	mustFail(t, exitDevice, "in use by another process", "passphrase", "add", "--passphrase-file", flags[1], "--new-passphrase-file", flags[1],
		"--kdf-memory", "1M", "--kdf-iterations", "1", img)
	mustFail(t, exitDevice, "in use by another process", "header", "restore", "--force", img, backup)
	mustRun(t, "close", "v")

	// Flip a byte of that sector's ciphertext in the image.
	f, err := os.OpenFile(img, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	hs, err := volume.ReadHeaders(f, fileSize(t, f))
	if err != nil {
		t.Fatal(err)
	}
	off := hs.Header.Layout.SectorOffset(n) + 1000
	b := make([]byte, 1)
	f.ReadAt(b, off)
	b[0] ^= 0x40
	f.WriteAt(b, off)
	f.Close()

	mustRun(t, args("open", flags, "--mount", mnt, img, "v")...)
	if _, err := os.ReadFile(filepath.Join(mnt, "victim")); !errors.Is(err, syscall.EIO) {
		t.Errorf("reading the file over the flipped sector: %v, want EIO", err)
	}
	checkFiles(t, mnt, files)
	vs := statusOf(t, "v")
	if c := vs.Cipher; c == nil || c.Name != "aes-xts-plain64" || c.Integrity != "blake2b" || c.TagSize != 32 || c.SectorSize != 4096 || c.DataOffset%4096 != 0 || c.DataOffset == 0 {
		t.Errorf("status cipher of a volume: %+v", c)
	}
	if vs.Stats == nil || vs.Stats.IntegrityErrors == 0 || len(vs.Stats.BadSectors) != 1 || vs.Stats.BadSectors[0] != n {
		t.Errorf("status after the EIO: %+v, want integrity errors for sector %d", vs.Stats, n)
	}
	r := mustRun(t, "close", "v")
	if !strings.Contains(r.stderr, "integrity errors were seen") {
		t.Errorf("close did not mention the integrity errors: %q", r.stderr)
	}
	log, _ := os.ReadFile(blockdev.LogPath("v"))
	if !strings.Contains(string(log), "sector "+itoa(n)+" failed verification") {
		t.Errorf("the server log does not name sector %d:\n%s", n, log)
	}
}

// TestVolumeKillRecovery: SIGKILL the server in the middle of writes; the
// next open recovers, reporting the dirty regions; fsck is clean, every
// write fsynced before the kill is intact, and verify finds every tag good.
func TestVolumeKillRecovery(t *testing.T) {
	skipUnlessServing(t)
	dir := servingEnv(t)
	img, flags := testVolume(t, dir, "64M")
	formatExt4(t, img, "vk", flags)
	mnt := filepath.Join(dir, "mnt")
	os.Mkdir(mnt, 0o755)
	mustRun(t, args("open", flags, "--mount", mnt, img, "vk")...)
	synced := makeFiles(t, mnt)

	type chunk struct {
		n    int
		data []byte
	}
	durable := make(chan chunk, 1<<12)
	writerDone := make(chan error, 1)
	go func() {
		f, err := os.Create(filepath.Join(mnt, "appending"))
		if err != nil {
			writerDone <- err
			return
		}
		defer f.Close()
		for n := 0; n < 1<<12; n++ {
			data := make([]byte, 64<<10)
			rand.Read(data)
			if _, err := f.WriteAt(data, int64(n)*int64(len(data))); err != nil {
				writerDone <- err
				return
			}
			if err := f.Sync(); err != nil {
				writerDone <- err
				return
			}
			durable <- chunk{n, data}
		}
		writerDone <- errors.New("the writer was never interrupted")
	}()
	for len(durable) < 16 {
		time.Sleep(5 * time.Millisecond)
	}
	e := serverOf(t, "vk")
	syscall.Kill(e.PID, syscall.SIGKILL)
	if err := <-writerDone; err == nil || err.Error() == "the writer was never interrupted" {
		t.Errorf("the writer ended with %v, want an I/O error", err)
	}
	close(durable)
	for running(e.PID) {
		time.Sleep(10 * time.Millisecond)
	}

	r := mustRun(t, args("open", flags, img, "vk")...)
	report := regexp.MustCompile(`was not closed cleanly: checked [1-9][0-9]* dirty regions?(, [1-9][0-9]* sectors: every tag matches|; ([1-9][0-9]*) sectors? do(es)? not match their tags and read as I/O errors: [0-9, ]+)`).FindStringSubmatch(r.stderr)
	if report == nil {
		t.Fatalf("open after the kill does not report the recovery: %q", r.stderr)
	}
	if report[2] != "" {
		// The kill tore sectors that were being written: at most those of
		// the requests in flight (up to 1 MiB each, 16 queues). Accept
		// them, as the hint says.
		if n, _ := strconv.Atoi(report[2]); n > 16*256 {
			t.Errorf("%d sectors torn by one kill", n)
		}
		if !strings.Contains(r.stderr, "open it again with --recover") {
			t.Errorf("no hint to --recover: %q", r.stderr)
		}
		mustRun(t, "close", "vk")
		r = mustRun(t, args("open", append([]string{"--recover"}, flags...), img, "vk")...)
		if !strings.Contains(r.stderr, "re-tagged "+report[2]+" sector") {
			t.Errorf("open --recover: %q", r.stderr)
		}
		t.Logf("the kill tore %s sectors; open --recover accepted them", report[2])
	}
	dev := strings.TrimSpace(r.stdout)
	if err := mount.Mount(dev, mnt, "ext4", false); err != nil { // replays the journal
		t.Fatal(err)
	}
	checkFiles(t, mnt, synced)
	appended, _ := os.ReadFile(filepath.Join(mnt, "appending"))
	for c := range durable {
		at := c.n * len(c.data)
		if len(appended) < at+len(c.data) || sha256.Sum256(appended[at:at+len(c.data)]) != sha256.Sum256(c.data) {
			t.Errorf("chunk %d was fsynced before the kill but is lost or changed", c.n)
		}
	}
	if err := mount.Unmount(mnt); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("e2fsck", "-f", "-n", dev).CombinedOutput(); err != nil {
		t.Errorf("e2fsck after the kill: %v\n%s", err, out)
	}
	if vs := statusOf(t, "vk"); vs.Stats.IntegrityErrors != 0 || vs.Recovered == nil || vs.Recovered.DirtyRegions == 0 {
		t.Errorf("status after recovery: %+v, recovered %+v; want no integrity errors and the recovery recorded", vs.Stats, vs.Recovered)
	}
	mustRun(t, "close", "vk")
	v := mustRun(t, "verify", "--passphrase-file", flags[1], img)
	if !strings.Contains(v.stdout, "state: closed cleanly") {
		t.Errorf("verify after recovery and close: %q", v.stdout)
	}
}

func fileSize(t *testing.T, f *os.File) int64 {
	fi, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

func itoa(n uint64) string { return strconv.FormatUint(n, 10) }
