package bitlk

import (
	"context"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/xtsctl/xtsctl/disk"
)

// wantErr checks an error's kind, sentinel and words.
func wantErr(t *testing.T, err error, kind disk.Kind, sentinel error, words ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error; want a %s error", kind)
	}
	if got := disk.KindOf(err); got != kind {
		t.Errorf("kind %s, want %s: %v", got, kind, err)
	}
	if sentinel != nil && !errors.Is(err, sentinel) {
		t.Errorf("error does not wrap %q: %v", sentinel, err)
	}
	for _, w := range words {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error does not say %q: %v", w, err)
		}
	}
}

// copySample copies a sample (sparse) to a temporary file to edit.
func copySample(t *testing.T, name string) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), name)
	if out, err := exec.Command("cp", "--sparse=always", samplePath(t, name), dst).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v: %s", err, out)
	}
	return dst
}

// editCopies changes every metadata copy of the image at path with edit
// (which gets the covered block and the offsets of its top-level
// entries) and recomputes the copies' CRC-32, as a tool that rewrote the
// metadata would; the validation hash, which needs the VMK, is left.
func editCopies(t *testing.T, path string, copies []int, edit func(block []byte, entries []int)) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var boot [512]byte
	if _, err := f.ReadAt(boot[:], 0); err != nil {
		t.Fatal(err)
	}
	for _, i := range copies {
		off := int64(binary.LittleEndian.Uint64(boot[176+8*i:]))
		buf := make([]byte, metadataArea)
		if _, err := f.ReadAt(buf, off); err != nil {
			t.Fatal(err)
		}
		s := int(binary.LittleEndian.Uint16(buf[8:])) * 16
		end := blockHeaderSize + int(binary.LittleEndian.Uint32(buf[64:]))
		var entries []int
		for at := entriesOffset; at+8 <= end; {
			n := int(binary.LittleEndian.Uint16(buf[at:]))
			if n == 0 {
				break
			}
			entries = append(entries, at)
			at += n
		}
		edit(buf[:s], entries)
		binary.LittleEndian.PutUint32(buf[s+4:], crc32.ChecksumIEEE(buf[:s]))
		if _, err := f.WriteAt(buf, off); err != nil {
			t.Fatal(err)
		}
	}
}

var allCopies = []int{0, 1, 2}

// TestRefuseEditedSamples: a Windows-made sample edited to need a TPM, to
// be half encrypted, or to be Vista's is refused by Check, before any
// secret, with a clear error (KindInput, ErrUnsupported).
func TestRefuseEditedSamples(t *testing.T) {
	const name = "bitlk-aes-xts-128.img"
	t.Run("tpm-only", func(t *testing.T) {
		path := copySample(t, name)
		editCopies(t, path, allCopies, func(b []byte, entries []int) {
			for _, e := range entries {
				if binary.LittleEndian.Uint16(b[e+2:]) == entryVMK {
					binary.LittleEndian.PutUint16(b[e+entryHeaderSize+26:], protTPM)
				}
			}
		})
		_, err := mustOpen(t, path).Check(request())
		wantErr(t, err, disk.KindInput, disk.ErrUnsupported, "no protector", "TPM")
		if hints := disk.HintsOf(err); len(hints) == 0 || !strings.Contains(hints[0], "recovery password") {
			t.Errorf("hints %q do not mention the recovery password", hints)
		}
	})
	t.Run("encryption-in-progress", func(t *testing.T) {
		path := copySample(t, name)
		editCopies(t, path, allCopies, func(b []byte, _ []int) { binary.LittleEndian.PutUint16(b[12:], 2) })
		_, err := mustOpen(t, path).Check(request())
		wantErr(t, err, disk.KindInput, disk.ErrUnsupported, "being encrypted", "fully encrypted")
	})
	t.Run("decryption-in-progress", func(t *testing.T) {
		path := copySample(t, name)
		editCopies(t, path, allCopies, func(b []byte, _ []int) {
			binary.LittleEndian.PutUint16(b[12:], 2)
			binary.LittleEndian.PutUint16(b[14:], 1)
		})
		_, err := mustOpen(t, path).Check(request())
		wantErr(t, err, disk.KindInput, disk.ErrUnsupported, "being decrypted")
	})
	t.Run("vista", func(t *testing.T) {
		path := copySample(t, name)
		f, err := os.OpenFile(path, os.O_RDWR, 0)
		if err != nil {
			t.Fatal(err)
		}
		f.WriteAt(bootCodeV1, 0)
		f.Close()
		if !probeFile(t, path) {
			t.Fatal("Probe does not recognise a Vista volume (it must, to refuse it by name)")
		}
		h := mustOpen(t, path)
		_, err = h.Check(request())
		wantErr(t, err, disk.KindInput, disk.ErrUnsupported, "version 1", "Vista")
		r, err := h.Report(disk.ReportOptions{})
		if err != nil || r.Doc.(*ReportDoc).Version != 1 || r.Doc.(*ReportDoc).Unsupported == "" {
			t.Errorf("Report of a Vista volume: %+v, %v", r, err)
		}
	})
	t.Run("metadata-changed", func(t *testing.T) {
		// A change that keeps the CRC right but not the SHA-256 the VMK
		// authenticates: the password opens the VMK, and the unlock then
		// refuses the metadata.
		path := copySample(t, name)
		editCopies(t, path, allCopies, func(b []byte, _ []int) { b[112+8] ^= 1 })
		_, err := unlock(t, path, request(), &disk.Secret{Passphrase: []byte("anaconda")})
		wantErr(t, err, disk.KindIntegrity, nil, "authenticated SHA-256")
	})
	t.Run("copy-0-damaged", func(t *testing.T) {
		// A damaged first copy (no CRC fix): the second is used, info
		// says so, and the device still reads as Windows sees it.
		path := copySample(t, name)
		f, err := os.OpenFile(path, os.O_RDWR, 0)
		if err != nil {
			t.Fatal(err)
		}
		f.WriteAt([]byte{0xff}, 35213312+200)
		f.Close()
		h := mustOpen(t, path)
		d := reportDoc(t, h)
		if d.Copies[0].Valid || !d.Copies[1].Used || d.CopiesAgree || !strings.Contains(d.Copies[0].Error, "CRC-32") {
			t.Errorf("report: %+v", d.Copies)
		}
		u := mustUnlock(t, path, request(), &disk.Secret{Passphrase: []byte("anaconda")})
		if !strings.Contains(strings.Join(u.Warnings, "\n"), "copy 1 is used") {
			t.Errorf("warnings %q do not say which copy is used", u.Warnings)
		}
		if _, r := serve(t, path, u); deviceSHA256(t, r) != samples[0].sha256 {
			t.Error("the device differs with copy 1")
		}
	})
	t.Run("truncated", func(t *testing.T) {
		// The image ends inside the third metadata area: refused before
		// any prompt, naming the area.
		path := copySample(t, name)
		if err := os.Truncate(path, 57909248+32768); err != nil {
			t.Fatal(err)
		}
		_, err := mustOpen(t, path).Check(request())
		wantErr(t, err, disk.KindInput, disk.ErrUnsupported, "metadata copy 2", "inside the")
	})
	t.Run("all-copies-damaged", func(t *testing.T) {
		path := copySample(t, name)
		f, err := os.OpenFile(path, os.O_RDWR, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range []int64{35213312, 46256128, 57909248} {
			f.WriteAt([]byte{0xff}, o+200)
		}
		f.Close()
		_, err = openHeader(t, path)
		wantErr(t, err, disk.KindIntegrity, nil, "no valid BitLocker metadata", "copy 0", "copy 2", "CRC-32")
	})
}

func probeFile(t *testing.T, path string) bool {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fi, _ := f.Stat()
	return Format{}.Probe(f, fi.Size())
}

// TestRefuseBuilt: crafted volumes xtsctl cannot serve are refused by
// Check, before any prompt; with TestOnly their secret can still be
// checked and the result says why the data cannot be served.
func TestRefuseBuilt(t *testing.T) {
	pw := []protSpec{{protection: protPassword, secret: "anaconda"}}
	for _, c := range []struct {
		name  string
		spec  buildSpec
		words []string
	}{
		{"tpm-only", buildSpec{method: 0x8004, protectors: []protSpec{{protection: protTPM}}}, []string{"TPM", "no protector"}},
		{"tpm-pin-only", buildSpec{method: 0x8004, protectors: []protSpec{{protection: protTPMPIN}}}, []string{"TPM", "no protector"}},
		{"smart-card-only", buildSpec{method: 0x8004, protectors: []protSpec{{protection: protSmartCard}}}, []string{"smart card"}},
		{"eow", buildSpec{method: 0x8004, eow: true, protectors: pw}, []string{"encrypt-on-write", "partially encrypted"}},
		{"encrypting", buildSpec{method: 0x8004, state: [2]uint16{2, 4}, protectors: pw}, []string{"being encrypted"}},
		{"paused", buildSpec{method: 0x8004, state: [2]uint16{5, 4}, protectors: pw}, []string{"being encrypted", "paused"}},
		{"vista", buildSpec{method: 0x8004, version1: true, protectors: pw}, []string{"version 1", "Vista"}},
		{"unknown-method", buildSpec{method: 0x8009, protectors: pw}, []string{"method 0x8009"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			c.spec.seed = 5
			b := buildImage(t, t.TempDir(), c.spec)
			h := mustOpen(t, b.path)
			_, err := h.Check(request())
			wantErr(t, err, disk.KindInput, disk.ErrUnsupported, c.words...)
			if r, err := h.Report(disk.ReportOptions{}); err != nil || len(r.Lines) == 0 {
				t.Errorf("no report of a refused volume: %v", err)
			}
			if c.spec.protectors[0].protection != protPassword || c.spec.version1 {
				return
			}
			req := request()
			req.TestOnly = true
			if _, err := h.Check(req); err != nil {
				t.Fatalf("Check with TestOnly: %v", err)
			}
			u, err := h.Unlock(context.Background(), req, &disk.Secret{Passphrase: []byte("anaconda")})
			if err != nil || u.Unservable == "" || len(u.Key) != 0 {
				t.Fatalf("TestOnly unlock: %+v, %v; want an unservable result without a key", u, err)
			}
			_, err = h.Unlock(context.Background(), req, &disk.Secret{Passphrase: []byte("anacondb")})
			wantErr(t, err, disk.KindKey, disk.ErrWrongSecret)
		})
	}
	t.Run("explicit-tpm", func(t *testing.T) {
		b := buildImage(t, t.TempDir(), buildSpec{method: 0x8004, seed: 6, protectors: []protSpec{{protection: protTPM}, {protection: protRecovery, secret: testRecovery}}})
		h := mustOpen(t, b.path)
		need, err := h.Check(request())
		if err != nil || need.Passphrase != disk.WantRequired || !strings.Contains(need.Prompt, "recovery password") || need.Tries != "protector 1 (recovery password)" {
			t.Fatalf("Check beside a TPM protector: %+v, %v", need, err)
		}
		_, err = h.Check(request(OptProtector, "tpm"))
		wantErr(t, err, disk.KindInput, disk.ErrUnsupported, "protector 0", "TPM")
		req := request()
		req.Slot = 0
		_, err = h.Check(req)
		wantErr(t, err, disk.KindInput, disk.ErrUnsupported, "TPM")
	})
	t.Run("too-many-passwords", func(t *testing.T) {
		var ps []protSpec
		for range maxStretches + 1 {
			ps = append(ps, protSpec{protection: protTPM})
		}
		b := buildImage(t, t.TempDir(), buildSpec{method: 0x8004, seed: 7, protectors: ps})
		// Turn the TPM protectors into password protectors without
		// stretching nine times to build them: Check needs no key.
		editCopiesAt(t, b, func(blk []byte, entries []int) {
			for _, e := range entries {
				if binary.LittleEndian.Uint16(blk[e+2:]) == entryVMK {
					binary.LittleEndian.PutUint16(blk[e+entryHeaderSize+26:], protPassword)
					// The TPM blob becomes a stretch key (salt and all).
					binary.LittleEndian.PutUint16(blk[e+entryHeaderSize+vmkHeaderSize+4:], valueStretchKey)
				}
			}
		})
		h := mustOpen(t, b.path)
		_, err := h.Check(request())
		wantErr(t, err, disk.KindInput, nil, "9 password protectors", "2^20")
		req := request()
		req.AllowExpensiveKDF = true
		if need, err := h.Check(req); err != nil || need.Passphrase != disk.WantRequired {
			t.Fatalf("Check allowing expensive KDFs: %+v, %v", need, err)
		}
		req = request(OptProtector, b.prots[3].String())
		if need, err := h.Check(req); err != nil || need.Tries != "protector 3 (password)" {
			t.Fatalf("Check of one protector by GUID: %+v, %v", need, err)
		}
	})
}

// editCopiesAt edits a built image's metadata copies.
func editCopiesAt(t *testing.T, b *built, edit func(block []byte, entries []int)) {
	t.Helper()
	editCopies(t, b.path, allCopies, edit)
}

// TestWrongSecrets: what does not open a volume fails with KindKey and
// ErrWrongSecret (or says precisely what is wrong with the request).
func TestWrongSecrets(t *testing.T) {
	xts := samplePath(t, "bitlk-aes-xts-128.img")
	startup := samplePath(t, "bitlk-aes-xts-128-startup-key.img")
	bek, err := os.ReadFile(filepath.Join(sampleDir(t), "4381F759-C4F8-4DE0-BB61-FC33A831BDA5.BEK"))
	if err != nil {
		t.Fatal(err)
	}
	otherRecovery := samples[1].recovery
	for _, c := range []struct {
		name   string
		path   string
		req    *disk.Request
		sec    *disk.Secret
		kind   disk.Kind
		secret bool // wraps ErrWrongSecret
		words  []string
	}{
		{"password", xts, request(), &disk.Secret{Passphrase: []byte("anacondA")}, disk.KindKey, true, []string{"no protector", "password"}},
		{"recovery", xts, request(), &disk.Secret{Passphrase: []byte(otherRecovery)}, disk.KindKey, true, []string{"recovery password"}},
		{"recovery-checksum", xts, request(OptRecovery, "true"), &disk.Secret{Passphrase: []byte("235818-357951-253979-013365-241120-245575-342914-591911")}, disk.KindKey, true, []string{"group 8"}},
		{"recovery-shape", xts, request(OptRecovery, "true"), &disk.Secret{Passphrase: []byte("anaconda")}, disk.KindKey, true, []string{"not a recovery password"}},
		{"password-as-protector-1", xts, request(OptProtector, "recovery"), &disk.Secret{Passphrase: []byte("anaconda")}, disk.KindKey, true, []string{"not a recovery password"}},
		{"slot-0-with-recovery", xts, func() *disk.Request { r := request(); r.Slot = 0; return r }(), &disk.Secret{Passphrase: []byte(samples[0].recovery)}, disk.KindKey, true, []string{"protector 0"}},
		{"startup-key-elsewhere", xts, request(), &disk.Secret{KeyFiles: [][]byte{bek}}, disk.KindUsage, false, []string{"no startup key protector"}},
		{"not-a-bek", startup, request(), &disk.Secret{KeyFiles: [][]byte{[]byte("anaconda")}}, disk.KindKey, false, []string{"not a startup key"}},
		{"bek-other-guid", startup, request(), &disk.Secret{KeyFiles: [][]byte{withGUID(bek, 16)}}, disk.KindKey, true, []string{"opens no protector"}},
		{"bek-wrong-key", startup, request(), &disk.Secret{KeyFiles: [][]byte{flipLast(bek)}}, disk.KindKey, true, []string{"startup key"}},
		{"two-key-files", startup, request(), &disk.Secret{KeyFiles: [][]byte{bek, bek}}, disk.KindUsage, false, []string{"one startup key"}},
		{"nothing", xts, request(), &disk.Secret{}, disk.KindUsage, false, []string{"no secret"}},
		{"no-such-protector", xts, request(OptProtector, "startup-key"), &disk.Secret{}, disk.KindUsage, false, []string{"no protector", "matches"}},
		{"no-such-slot", xts, func() *disk.Request { r := request(); r.Slot = 5; return r }(), &disk.Secret{}, disk.KindUsage, false, []string{"no protector 5"}},
		{"not-utf8", xts, request(OptProtector, "password"), &disk.Secret{Passphrase: []byte("anaconda\xa3")}, disk.KindKey, false, []string{"UTF-8"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := unlock(t, c.path, c.req, c.sec)
			var sentinel error
			if c.secret {
				sentinel = disk.ErrWrongSecret
			}
			wantErr(t, err, c.kind, sentinel, c.words...)
			for _, s := range []string{"anaconda", "235818", "363770"} {
				if c.sec != nil && strings.Contains(string(c.sec.Passphrase), s) && strings.Contains(err.Error(), s) {
					t.Errorf("the error shows the secret: %v", err)
				}
			}
		})
	}
}

func withGUID(bek []byte, at int) []byte {
	b := append([]byte(nil), bek...)
	b[at] ^= 0xff
	return b
}

func flipLast(bek []byte) []byte {
	b := append([]byte(nil), bek...)
	b[len(b)-1] ^= 1
	return b
}

// TestUnlockInterrupted: a cancelled context stops the stretching; the
// error is the context's (the command line reports an interruption).
func TestUnlockInterrupted(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	h := mustOpen(t, samplePath(t, "bitlk-aes-xts-128.img"))
	_, err := h.Unlock(ctx, request(), &disk.Secret{Passphrase: []byte("anaconda")})
	if !errors.Is(err, context.Canceled) || disk.KindOf(err) != disk.KindInterrupted {
		t.Fatalf("Unlock with a cancelled context: %v (kind %s)", err, disk.KindOf(err))
	}
}

// TestNotBitLocker: what is not BitLocker is not claimed by Probe and is
// refused by Open with ErrNotFormat.
func TestNotBitLocker(t *testing.T) {
	dir := t.TempDir()
	fat := make([]byte, 1<<20)
	copy(fat, "\xeb\x58\x90MSWIN4.1") // a FAT volume, whose OEM name To Go borrows
	fat[510], fat[511] = 0x55, 0xaa
	for name, img := range map[string][]byte{"zeros": make([]byte, 1<<20), "fat": fat, "short": []byte("-FVE-FS-")} {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, img, 0o600); err != nil {
			t.Fatal(err)
		}
		if probeFile(t, path) {
			t.Errorf("%s: Probe claims it", name)
		}
		_, err := openHeader(t, path)
		wantErr(t, err, disk.KindInput, disk.ErrNotFormat)
	}
	f, _ := os.Open(samplePath(t, samples[0].file))
	defer f.Close()
	_, err := Format{}.Open(&disk.Image{Path: "x", File: f, Size: 104857600, HeaderFile: f, HeaderPath: "hdr"}, nil)
	wantErr(t, err, disk.KindUsage, nil, "detached header")
}

func reportDoc(t *testing.T, h *Header) *ReportDoc {
	t.Helper()
	r, err := h.Report(disk.ReportOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return r.Doc.(*ReportDoc)
}
