package tcrypt

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/xtsctl/xtsctl/disk"
	"github.com/xtsctl/xtsctl/xts"
)

// errText is an error's message and hints, for tests that look for words.
func errText(err error) string {
	return err.Error() + "\n" + strings.Join(disk.HintsOf(err), "\n")
}

func wantWrongSecret(t *testing.T, err error, words ...string) {
	t.Helper()
	if err == nil || !errors.Is(err, disk.ErrWrongSecret) || disk.KindOf(err) != disk.KindKey ||
		!strings.Contains(err.Error(), "no key available with this passphrase") {
		t.Fatalf("err = %v (kind %v), want a wrong-secret error", err, disk.KindOf(err))
	}
	for _, w := range words {
		if !strings.Contains(errText(err), w) {
			t.Errorf("the error does not mention %q:\n%s", w, errText(err))
		}
	}
}

func TestWrongSecrets(t *testing.T) {
	vc := testImage(t, "vc_1-sha512-xts-aes")
	tck := testImage(t, "tck_5-sha512-xts-aes")
	for _, c := range []struct {
		name  string
		path  string
		opts  disk.Options
		sec   disk.Secret
		words []string
	}{
		{"wrong passphrase", vc, disk.Options{OptHash: "sha512"}, disk.Secret{Passphrase: []byte("aaaaaaaaaaab")},
			[]string{"--veracrypt-pim", "--key-file", "--tcrypt-hidden", "--tcrypt-system", "--tcrypt-backup", "--tcrypt-hash sha512"}},
		{"wrong PIM", vc, disk.Options{OptPIM: "1", OptHash: "sha512"}, disk.Secret{Passphrase: passA},
			[]string{"check the PIM"}},
		{"keyfile missing", tck, disk.Options{OptHash: "sha512"}, disk.Secret{Passphrase: passA, KeyFiles: [][]byte{keyfile(t, "keyfile1")}},
			[]string{"none missing"}},
		{"keyfiles forgotten", tck, disk.Options{OptHash: "sha512"}, disk.Secret{Passphrase: passA},
			[]string{"needs every one of them"}},
		{"no hidden volume", vc, disk.Options{OptHidden: "true", OptPIM: "1"}, disk.Secret{Passphrase: passA},
			[]string{"may hold no hidden volume"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, _, err := unlockImage(t, openImage(t, c.path, false), c.opts, &c.sec)
			wantWrongSecret(t, err, c.words...)
		})
	}
}

// TestBackupHeader: with the primary header destroyed, the error says
// that the backup header may open, and --tcrypt-backup opens it.
func TestBackupHeader(t *testing.T) {
	for _, c := range []struct {
		file   string
		opts   disk.Options
		pass   []byte
		uuid   string
		zeroAt int64
	}{
		{"tc_5-sha512-xts-aes", nil, passA, "DEAD-BABE", 0},
		{"vc_1-sha512-xts-aes", disk.Options{OptHash: "sha512"}, passA, "DEAD-BABE", 0},
	} {
		path := testImage(t, c.file)
		f, err := os.OpenFile(path, os.O_RDWR, 0)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.WriteAt(make([]byte, 512), c.zeroAt); err != nil {
			t.Fatal(err)
		}
		f.Close()
		opts := disk.Options{OptHash: "sha512"}
		_, _, err = unlockImage(t, openImage(t, path, false), opts, &disk.Secret{Passphrase: c.pass})
		wantWrongSecret(t, err, "--tcrypt-backup")
		opts[OptBackup] = "true"
		_, u, err := unlockImage(t, openImage(t, path, false), opts, &disk.Secret{Passphrase: c.pass})
		if err != nil {
			t.Fatalf("%s: the backup header: %v", c.file, err)
		}
		if got, err := fatSerial(plaintext(t, path, u)[:512]); err != nil || got != c.uuid {
			t.Fatalf("%s through the backup header: %s, %v", c.file, got, err)
		}
	}
}

// TestHiddenBackup opens the hidden volume through its backup header.
func TestHiddenBackup(t *testing.T) {
	path := testImage(t, "tc_4-sha512-xts-aes-hidden")
	opts := disk.Options{OptHidden: "true", OptBackup: "true", OptHash: "sha512"}
	_, u, err := unlockImage(t, openImage(t, path, false), opts, &disk.Secret{Passphrase: passB})
	if err != nil {
		t.Fatal(err)
	}
	if got, err := fatSerial(plaintext(t, path, u)[:512]); err != nil || got != "CAFE-BABE" {
		t.Fatalf("hidden volume through its backup header: %s, %v", got, err)
	}
}

// TestTruncated: an image cut short opens its header, and the data area
// that runs past the end is refused, naming it; a tiny file is no volume.
func TestTruncated(t *testing.T) {
	path := testImage(t, "tc_5-sha512-xts-aes")
	if err := os.Truncate(path, 150000); err != nil {
		t.Fatal(err)
	}
	_, _, err := unlockImage(t, openImage(t, path, false), disk.Options{OptHash: "sha512"}, &disk.Secret{Passphrase: passA})
	if err == nil || disk.KindOf(err) != disk.KindInput || !strings.Contains(err.Error(), "truncated") || !strings.Contains(err.Error(), "passphrase is right") {
		t.Fatalf("truncated image: %v", err)
	}
	if err := os.Truncate(path, 100); err != nil {
		t.Fatal(err)
	}
	_, _, err = unlockImage(t, openImage(t, path, false), nil, &disk.Secret{Passphrase: passA})
	if !errors.Is(err, disk.ErrNotFormat) || !strings.Contains(err.Error(), "too small") {
		t.Fatalf("100-byte image: %v", err)
	}
	_, _, err = unlockImage(t, openImage(t, path, false), disk.Options{OptHidden: "true"}, &disk.Secret{Passphrase: passA})
	if !errors.Is(err, disk.ErrNotFormat) || !strings.Contains(err.Error(), "hidden") {
		t.Fatalf("100-byte image, hidden: %v", err)
	}
}

// TestDamagedHeader: a single flipped bit anywhere in the encrypted
// header (a synthetic VeraCrypt one, PIM 1, for speed) makes it fail the
// CRCs, which reads as a wrong passphrase; unflipped it opens.
func TestDamagedHeader(t *testing.T) {
	s := defaultSynth()
	opts := disk.Options{OptHash: "sha512", OptPIM: "1"}
	for _, at := range []int64{-1, 0, 64, 64 + 100, 64 + 250, 511} {
		path := s.volume(t, passA, 256<<10+64<<10, 0)
		if at >= 0 {
			b, _ := os.ReadFile(path)
			b[at] ^= 0x10
			os.WriteFile(path, b, 0o600)
		}
		_, _, err := unlockImage(t, openImage(t, path, false), opts, &disk.Secret{Passphrase: passA})
		if at < 0 {
			if err != nil {
				t.Fatalf("the undamaged synthetic header: %v", err)
			}
			continue
		}
		wantWrongSecret(t, err)
	}
}

// TestSystemPartitionCopy opens the encrypted partition copied out of the
// drive, with the drive's first track as a detached header: the units
// still count from the drive's start.
func TestSystemPartitionCopy(t *testing.T) {
	drive := testImage(t, "sys_vc_1_mbr_part-sha256-xts-aes.gz")
	b, err := os.ReadFile(drive)
	if err != nil {
		t.Fatal(err)
	}
	part := drive + ".p1"
	if err := os.WriteFile(part, b[1<<20:1<<20+16<<20], 0o600); err != nil {
		t.Fatal(err)
	}
	track := drive + ".track"
	if err := os.WriteFile(track, b[:1<<20], 0o600); err != nil {
		t.Fatal(err)
	}
	img := openImage(t, part, false)
	hf, err := os.Open(track)
	if err != nil {
		t.Fatal(err)
	}
	defer hf.Close()
	img.HeaderFile, img.HeaderPath, img.HeaderSize = hf, track, 1<<20
	_, u, err := unlockImage(t, img, disk.Options{OptSystem: "true", OptHash: "sha256"}, &disk.Secret{Passphrase: passA})
	if err != nil {
		t.Fatal(err)
	}
	if e := u.Layout.Extents[0]; e.Source != 0 || e.Sector.IVOffset != 2048 {
		t.Fatalf("extent %+v, want the partition from byte 0 with units from 2048", e)
	}
	if got, err := fatSerial(plaintext(t, part, u)[:512]); err != nil || got != "DEAD-BABE" {
		t.Fatalf("partition copy: %s, %v", got, err)
	}
}

// TestUnitNumbering decrypts the first data sector of a normal volume by
// hand with xts (key = the header's key area, data unit 256 = byte
// 131072 / 512), independently of the layout, and finds the boot sector.
func TestUnitNumbering(t *testing.T) {
	path := testImage(t, "vc_1-sha512-xts-aes")
	_, u, err := unlockImage(t, openImage(t, path, false), disk.Options{OptHash: "sha512"}, &disk.Secret{Passphrase: passA})
	if err != nil {
		t.Fatal(err)
	}
	c, err := xts.NewCipher(u.Key)
	if err != nil {
		t.Fatal(err)
	}
	img, _ := os.ReadFile(path)
	sec := make([]byte, 512)
	c.Decrypt(sec, img[131072:131072+512], 256)
	if got, err := fatSerial(sec); err != nil || got != "DEAD-BABE" {
		t.Fatalf("unit 256 by hand: %s, %v", got, err)
	}
	c.Decrypt(sec, img[131072:131072+512], 0)
	if _, err := fatSerial(sec); err == nil {
		t.Fatal("unit 0 decrypts the boot sector too")
	}
}

// TestWriteRoundTrip writes through the device read-write, then unlocks
// again and reads it back; outside the data area the image is unchanged.
func TestWriteRoundTrip(t *testing.T) {
	path := testImage(t, "tc_5-sha512-xts-aes")
	before, _ := os.ReadFile(path)
	opts := disk.Options{OptHash: "sha512"}
	_, u, err := unlockImage(t, openImage(t, path, true), opts, &disk.Secret{Passphrase: passA})
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	d, err := disk.NewDevice(f, u.Layout, u.Key, disk.AttachOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pattern := bytes.Repeat([]byte("xtsctl tcrypt "), 700)
	if _, err := disk.NewWriterAt(d).WriteAt(pattern, 20000); err != nil {
		t.Fatal(err)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	after, _ := os.ReadFile(path)
	off, n := u.Layout.Extents[0].Source, u.Layout.Size
	if !bytes.Equal(before[:off], after[:off]) || !bytes.Equal(before[off+n:], after[off+n:]) {
		t.Fatal("a write changed the image outside its data area")
	}
	_, u2, err := unlockImage(t, openImage(t, path, false), opts, &disk.Secret{Passphrase: passA})
	if err != nil {
		t.Fatal(err)
	}
	plain := plaintext(t, path, u2)
	if !bytes.Equal(plain[20000:20000+len(pattern)], pattern) {
		t.Fatal("the written bytes do not read back")
	}
	if got, _ := fatSerial(plain[:512]); got != "DEAD-BABE" {
		t.Fatalf("the boot sector reads %s after the write", got)
	}
}

func TestOptionsAndCheck(t *testing.T) {
	path := testImage(t, "vc_1-sha512-xts-aes")
	for _, c := range []struct {
		opts disk.Options
		want string
	}{
		{disk.Options{OptSystem: "true", OptHidden: "true"}, "do not go together"},
		{disk.Options{OptSystem: "true", OptBackup: "true"}, "do not go together"},
		{disk.Options{OptPIM: "x"}, "whole number"},
		{disk.Options{OptPIM: "-3"}, "whole number"},
		{disk.Options{OptPIM: "2147469"}, "whole number"},
		{disk.Options{OptSystem: "true", OptPIM: "65536"}, "65535"},
		{disk.Options{OptHash: "md5"}, "not a VeraCrypt"},
		{disk.Options{OptHash: "sha1", OptPIM: "5"}, "TrueCrypt's alone"},
	} {
		_, err := Format.Open(openImage(t, path, false), c.opts)
		if err == nil || disk.KindOf(err) != disk.KindUsage || !strings.Contains(err.Error(), c.want) {
			t.Errorf("options %v: %v, want a usage error with %q", c.opts, err, c.want)
		}
	}
	h, err := Format.Open(openImage(t, path, false), disk.Options{OptHash: "SHA-512"})
	if err != nil {
		t.Fatal(err)
	}
	need, err := h.Check(&disk.Request{Slot: -1})
	if err != nil {
		t.Fatal(err)
	}
	if need.Passphrase != disk.WantRequired || need.KeyFile != disk.WantOptional || !strings.Contains(need.Tries, "2 key derivations") {
		t.Errorf("need without keyfiles %+v, want a passphrase", need)
	}
	// With keyfiles VeraCrypt takes an empty passphrase.
	if need, err := h.Check(&disk.Request{Slot: -1, KeyFiles: 2}); err != nil || need.Passphrase != disk.WantOptional {
		t.Errorf("need with keyfiles %+v, %v: want the passphrase optional", need, err)
	}
	if _, err := h.Check(&disk.Request{Slot: 0}); err == nil || disk.KindOf(err) != disk.KindUsage {
		t.Errorf("--key-slot 0: %v", err)
	}
	if _, err := h.Unlock(context.Background(), &disk.Request{Slot: -1}, &disk.Secret{}); err == nil || disk.KindOf(err) != disk.KindUsage {
		t.Errorf("no passphrase and no keyfile: %v", err)
	}
	rep, err := h.Report(disk.ReportOptions{})
	if err != nil || len(rep.Lines) != 2 || !strings.Contains(rep.Lines[1].Value, "unlock to read it") {
		t.Errorf("report before unlock: %+v, %v", rep, err)
	}
	u, err := h.Unlock(context.Background(), &disk.Request{Slot: -1}, &disk.Secret{Passphrase: passA})
	if err != nil {
		t.Fatal(err)
	}
	key := func(o disk.ReportOptions) string {
		rep, err := h.Report(o)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range rep.Lines {
			if l.Key == "key" {
				return l.Value
			}
		}
		return ""
	}
	if k := key(disk.ReportOptions{Unlocked: u}); k != "" {
		t.Error("the key is shown without ShowKey")
	}
	if k := key(disk.ReportOptions{ShowKey: true, Unlocked: u}); len(k) != 128 {
		t.Errorf("ShowKey shows %q", k)
	}
	rep, _ = h.Report(disk.ReportOptions{Unlocked: u})
	doc, err := json.Marshal(rep.Doc)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(doc), `"volume_size":36864`) || !strings.Contains(string(doc), `"magic":"VERA"`) || strings.Contains(string(doc), "key") {
		t.Errorf("--json document: %s", doc)
	}
}

// TestCancel: an unlock over every KDF stops when its context is
// cancelled, with the context's error.
func TestCancel(t *testing.T) {
	path := testImage(t, "vc_1-sha512-xts-aes")
	h, err := Format.Open(openImage(t, path, false), nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() {
		_, err := h.Unlock(ctx, &disk.Request{Slot: -1, AllowExpensiveKDF: false}, &disk.Secret{Passphrase: []byte("wrong")})
		done <- err
	}()
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) || disk.KindOf(err) != disk.KindInterrupted {
		t.Fatalf("cancelled unlock: %v", err)
	}
}
