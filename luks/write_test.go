package luks

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// fastArgon2 keeps keyslots we write cheap in tests (cryptsetup's minimum
// passes, 32 MiB).
var fastArgon2 = &Argon2Params{Time: 4, MemoryKiB: 32 << 10, Threads: 2}

func fastFormat(t testing.TB, path string, size int64, pass []byte, opt FormatOptions) (*os.File, *Header, []byte) {
	t.Helper()
	sparseFile(t, path, size)
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	if opt.Keyslot.Argon2 == nil {
		opt.Keyslot.Argon2 = fastArgon2
	}
	if opt.DigestIterations == 0 {
		opt.DigestIterations = 1000
	}
	h, key, err := Format(f, size, pass, opt)
	if err != nil {
		t.Fatalf("Format: %v", err)
	}
	return f, h, key
}

var fastSlot = KeyslotOptions{Argon2: fastArgon2}

// TestFormatLayout: a header Format writes has cryptsetup 2.6.1's default
// layout for a file, field for field and in the same order: only the
// random values (salts, digest, UUID) and the calibrated costs differ.
func TestFormatLayout(t *testing.T) {
	needCryptsetup(t)
	dir := t.TempDir()
	pass := []byte("layout")
	pf := writeFile(t, dir, "pass", pass)
	theirs := filepath.Join(dir, "theirs")
	sparseFile(t, theirs, 20<<20)
	cs(t, append([]string{"luksFormat", "--batch-mode", "--type", "luks2", "--key-file", pf, "--pbkdf", "argon2id"}, append(csArgon2, theirs)...)...)
	fastFormat(t, filepath.Join(dir, "ours"), 20<<20, pass, FormatOptions{})

	norm := func(path string) (string, *Header) {
		_, h := openHeader(t, path)
		m := h.meta.clone()
		kdf := m.get("keyslots").get("0").get("kdf")
		for _, f := range []string{"salt", "time", "memory", "cpus"} {
			kdf.set(f, jstr("X"))
		}
		d := m.get("digests").get("0")
		for _, f := range []string{"salt", "digest", "iterations"} {
			d.set(f, jstr("X"))
		}
		return string(m.marshal()), h
	}
	want, th := norm(theirs)
	got, oh := norm(filepath.Join(dir, "ours"))
	if got != want {
		t.Fatalf("metadata differs from cryptsetup's:\n ours %s\ntheirs %s", got, want)
	}
	if oh.MetadataSize != th.MetadataSize || oh.KeyslotsSize != th.KeyslotsSize || oh.checksumAlg != th.checksumAlg ||
		oh.Segment.Offset != 16<<20 || oh.KeySize != 64 || oh.Segment.SectorSize != 4096 {
		t.Fatalf("binary header or layout differs: ours %d %d %s, theirs %d %d %s",
			oh.MetadataSize, oh.KeyslotsSize, oh.checksumAlg, th.MetadataSize, th.KeyslotsSize, th.checksumAlg)
	}
}

// TestFormatOpensInCryptsetup: cryptsetup reads what Format and Encrypt
// wrote: the key it dumps with our passphrase is ours, and the data,
// decrypted by python3-cryptography with that key, is our plaintext.
func TestFormatOpensInCryptsetup(t *testing.T) {
	needCryptsetup(t)
	needPython(t)
	for _, c := range []struct {
		keySize, sectorSize int
		offset              uint64
	}{{64, 4096, 0}, {32, 4096, 0}, {64, 512, 0}, {32, 1024, 20 << 20}} {
		name := strconv.Itoa(c.keySize*8) + "-" + strconv.Itoa(c.sectorSize)
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			pass := append([]byte("format\n"), randBytes(t, 8)...)
			pf := writeFile(t, dir, "pass", pass)
			img := filepath.Join(dir, "img")
			off := c.offset
			if off == 0 {
				off = DefaultDataOffset
			}
			size := int64(off) + 1<<20
			uuid := "0badc0de-1234-4abc-8def-0123456789ab"
			f, h, key := fastFormat(t, img, size, pass, FormatOptions{
				KeySize: c.keySize, SectorSize: c.sectorSize, DataOffset: c.offset, UUID: uuid, Label: "xtsctl test",
			})
			plain := randBytes(t, 1<<20)
			if n, err := h.Encrypt(context.Background(), key, bytes.NewReader(plain), f, size, nil); err != nil || n != int64(len(plain)) {
				t.Fatalf("Encrypt: %d, %v", n, err)
			}
			if got := dumpKey(t, img, "", pf); !bytes.Equal(got, key) {
				t.Fatalf("cryptsetup dumps key %x, Format returned %x", got, key)
			}
			cs(t, "open", "--test-passphrase", "--key-file", pf, img)
			dump := cs(t, "luksDump", img)
			for _, want := range []string{uuid, "xtsctl test", "sector: " + strconv.Itoa(c.sectorSize), "offset: " + strconv.FormatUint(off, 10)} {
				if !strings.Contains(dump, want) {
					t.Fatalf("luksDump lacks %q:\n%s", want, dump)
				}
			}
			ct := make([]byte, 1<<20)
			if _, err := f.ReadAt(ct, int64(off)); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(xtsRef(t, "dec", key, ct, c.sectorSize, 0), plain) {
				t.Fatal("python3-cryptography does not decrypt our data segment to the plaintext")
			}
		})
	}
}

// TestKeyslotsWithCryptsetup: keyslots added by cryptsetup open here and
// the other way round; changed and removed keyslots behave in cryptsetup
// as they do here.
func TestKeyslotsWithCryptsetup(t *testing.T) {
	needCryptsetup(t)
	dir := t.TempDir()
	img := filepath.Join(dir, "img")
	const size = 17 << 20
	passA := []byte("passphrase A")
	pfA := writeFile(t, dir, "A", passA)
	f, _, key := fastFormat(t, img, size, passA, FormatOptions{})

	// cryptsetup adds B; we open with it.
	passB := []byte("passphrase B\n")
	pfB := writeFile(t, dir, "B", passB)
	cs(t, append(append([]string{"luksAddKey", "--batch-mode", "--key-file", pfA}, csArgon2...), img, pfB)...)
	h, err := ReadHeader(f, size)
	if err != nil {
		t.Fatal(err)
	}
	if k, slot := unlock(t, h, f, passB); !bytes.Equal(k, key) || slot != 1 {
		t.Fatalf("cryptsetup's keyslot: slot %d", slot)
	}
	seq := h.SeqID

	// We add C, preferred; cryptsetup opens with it.
	passC := []byte("passphrase C")
	pfC := writeFile(t, dir, "C", passC)
	opt := fastSlot
	opt.Priority = PriorityPrefer
	id, err := h.AddKeyslot(f, size, key, passC, opt)
	if err != nil || id != 2 {
		t.Fatalf("AddKeyslot: %d, %v", id, err)
	}
	if h.SeqID != seq+1 || h.Copies[0].State != CopyOK || h.Copies[1].State != CopyOK {
		t.Fatalf("after AddKeyslot: seqid %d (was %d), copies %+v", h.SeqID, seq, h.Copies)
	}
	if got := dumpKey(t, img, "", pfC, "--key-slot", "2"); !bytes.Equal(got, key) {
		t.Fatal("cryptsetup does not open our keyslot")
	}
	cs(t, "open", "--test-passphrase", "--key-file", pfC, "--key-slot", "2", img)
	if p := dumpJSON(t, img)["keyslots"].(map[string]any)["2"].(map[string]any)["priority"]; p != float64(2) {
		t.Fatalf("cryptsetup sees priority %v", p)
	}
	// Preferred slots are tried first.
	if _, slot := unlock(t, h, f, passC); slot != 2 {
		t.Fatalf("opened with slot %d", slot)
	}

	// We change C to D in place: cryptsetup opens slot 2 with D, not C.
	passD := []byte("passphrase D")
	pfD := writeFile(t, dir, "D", passD)
	oldArea := h.Keyslot(2).Area
	if err := h.ChangeKeyslot(f, size, 2, key, passD, fastSlot); err != nil {
		t.Fatal(err)
	}
	if h.Keyslot(2).Area == oldArea || h.Keyslot(2).Priority != PriorityPrefer {
		t.Fatalf("changed keyslot: area %+v (was %+v), priority %v", h.Keyslot(2).Area, oldArea, h.Keyslot(2).Priority)
	}
	if got := dumpKey(t, img, "", pfD, "--key-slot", "2"); !bytes.Equal(got, key) {
		t.Fatal("cryptsetup does not open the changed keyslot")
	}
	if out, err := csErr("open", "--test-passphrase", "--key-file", pfC, img); err == nil {
		t.Fatalf("the old passphrase still opens in cryptsetup: %s", out)
	}
	old := make([]byte, 64)
	f.ReadAt(old, int64(oldArea.Offset))
	if bytes.Equal(old, make([]byte, 64)) {
		t.Fatal("old area not overwritten with random bytes")
	}

	// We remove cryptsetup's B.
	if err := h.RemoveKeyslot(f, size, 1, RemoveOptions{}); err != nil {
		t.Fatal(err)
	}
	if out, err := csErr("open", "--test-passphrase", "--key-file", pfB, img); err == nil {
		t.Fatalf("a removed keyslot opens in cryptsetup: %s", out)
	}
	if _, ok := dumpJSON(t, img)["keyslots"].(map[string]any)["1"]; ok {
		t.Fatal("cryptsetup still lists keyslot 1")
	}
	cs(t, "open", "--test-passphrase", "--key-file", pfA, img)

	// cryptsetup kills ours; we see it gone.
	cs(t, "luksKillSlot", "--batch-mode", img, "2")
	h, err = ReadHeader(f, size)
	if err != nil {
		t.Fatal(err)
	}
	if h.Keyslot(2) != nil || len(h.Keyslots) != 1 {
		t.Fatalf("keyslots after luksKillSlot: %+v", h.Keyslots)
	}
	if err := h.RemoveKeyslot(f, size, 0, RemoveOptions{}); !errors.Is(err, ErrLastKeyslot) {
		t.Fatalf("removing the last keyslot: %v", err)
	}
	cs(t, "open", "--test-passphrase", "--key-file", pfA, img)

	// A wrong volume key is refused before anything is written.
	bad := bytes.Clone(key)
	bad[0] ^= 1
	if _, err := h.AddKeyslot(f, size, bad, passC, fastSlot); !errors.Is(err, ErrWrongPassphrase) {
		t.Fatalf("AddKeyslot with a wrong key: %v", err)
	}
}

// TestHeaderChanged: a write with a header read before someone else
// changed it is refused before anything is written.
func TestHeaderChanged(t *testing.T) {
	needCryptsetup(t)
	dir := t.TempDir()
	img := filepath.Join(dir, "img")
	const size = 17 << 20
	pass := []byte("changed")
	pf := writeFile(t, dir, "p", pass)
	f, h, key := fastFormat(t, img, size, pass, FormatOptions{})
	cs(t, append(append([]string{"luksAddKey", "--batch-mode", "--key-file", pf}, csArgon2...), img, pf)...)
	before, _ := os.ReadFile(img)
	if _, err := h.AddKeyslot(f, size, key, []byte("x"), fastSlot); !errors.Is(err, ErrHeaderChanged) {
		t.Fatalf("AddKeyslot with a stale header: %v", err)
	}
	if err := h.RemoveKeyslot(f, size, 0, RemoveOptions{AllowLast: true}); !errors.Is(err, ErrHeaderChanged) {
		t.Fatalf("RemoveKeyslot with a stale header: %v", err)
	}
	if after, _ := os.ReadFile(img); !bytes.Equal(before, after) {
		t.Fatal("the image changed")
	}
}

// TestBackupRestore: our backup is byte for byte cryptsetup's; a restore
// brings back the keyslots of the backup, and cryptsetup reads the result;
// a backup of another volume is refused.
func TestBackupRestore(t *testing.T) {
	needCryptsetup(t)
	dir := t.TempDir()
	const size = 17 << 20
	pass := []byte("backup")
	pf := writeFile(t, dir, "p", pass)

	for _, typ := range []string{"luks1", "luks2"} {
		img := filepath.Join(dir, typ)
		sparseFile(t, img, size)
		args := []string{"luksFormat", "--batch-mode", "--type", typ, "--key-file", pf, "--pbkdf-force-iterations", "1000"}
		if typ == "luks2" {
			args = append(args, "--pbkdf", "pbkdf2")
		}
		cs(t, append(args, img)...)
		theirs := filepath.Join(dir, typ+".cs-backup")
		cs(t, "luksHeaderBackup", "--batch-mode", img, "--header-backup-file", theirs)
		f, h := openHeader(t, img)
		var ours bytes.Buffer
		if _, err := h.Backup(f, &ours); err != nil {
			t.Fatal(err)
		}
		if want, _ := os.ReadFile(theirs); !bytes.Equal(ours.Bytes(), want) {
			t.Fatalf("%s: our backup (%d bytes) differs from cryptsetup's (%d bytes)", typ, ours.Len(), len(want))
		}
	}

	img := filepath.Join(dir, "img")
	f, h, key := fastFormat(t, img, size, pass, FormatOptions{})
	backup := filepath.Join(dir, "backup")
	var buf bytes.Buffer
	if _, err := h.Backup(f, &buf); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(backup, buf.Bytes(), 0o600)
	passC := []byte("added after the backup")
	pfC := writeFile(t, dir, "C", passC)
	if _, err := h.AddKeyslot(f, size, key, passC, fastSlot); err != nil {
		t.Fatal(err)
	}
	seq := h.SeqID
	bf, _ := os.Open(backup)
	defer bf.Close()
	r, err := Restore(f, size, bf, int64(buf.Len()), RestoreOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Keyslots) != 1 || r.SeqID <= seq || r.Copies[0].State != CopyOK || r.Copies[1].State != CopyOK {
		t.Fatalf("restored: %d keyslots, seqid %d (device had %d), copies %+v", len(r.Keyslots), r.SeqID, seq, r.Copies)
	}
	if _, err := csErr("open", "--test-passphrase", "--key-file", pfC, img); err == nil {
		t.Fatal("a keyslot added after the backup still opens")
	}
	if got := dumpKey(t, img, "", pf); !bytes.Equal(got, key) {
		t.Fatal("cryptsetup does not open the restored header")
	}

	// cryptsetup restores our backup too.
	cs(t, "luksHeaderRestore", "--batch-mode", img, "--header-backup-file", backup)
	cs(t, "open", "--test-passphrase", "--key-file", pf, img)

	// Another volume's backup is refused, and nothing is written.
	other := filepath.Join(dir, "other")
	fastFormat(t, other, size, pass, FormatOptions{})
	before, _ := os.ReadFile(other)
	of, _ := os.OpenFile(other, os.O_RDWR, 0)
	defer of.Close()
	if _, err := Restore(of, size, bf, int64(buf.Len()), RestoreOptions{}); !errors.Is(err, ErrUUIDMismatch) {
		t.Fatalf("restoring another volume's backup: %v", err)
	}
	if after, _ := os.ReadFile(other); !bytes.Equal(before, after) {
		t.Fatal("a refused restore wrote to the device")
	}

	// Onto a device with no header left: only when asked.
	zero(t, img, 0, 64<<10)
	if _, err := Restore(f, size, bf, int64(buf.Len()), RestoreOptions{}); err == nil {
		t.Fatal("restore onto a device without a header, not asked for")
	}
	if _, err := Restore(f, size, bf, int64(buf.Len()), RestoreOptions{NoHeader: true}); err != nil {
		t.Fatal(err)
	}
	cs(t, "open", "--test-passphrase", "--key-file", pf, img)
}

// TestFormatRefuses: bad parameters are refused before anything is written.
func TestFormatRefuses(t *testing.T) {
	for _, c := range []struct {
		opt  FormatOptions
		size int64
		want string
	}{
		{FormatOptions{KeySize: 48}, 17 << 20, "key size"},
		{FormatOptions{SectorSize: 8192}, 17 << 20, "sector size"},
		{FormatOptions{SectorSize: 3000}, 17 << 20, "sector size"},
		{FormatOptions{}, 16 << 20, "too small"},
		{FormatOptions{}, 17<<20 + 512, "whole number"},
		{FormatOptions{UUID: "not-a-uuid"}, 17 << 20, "UUID"},
		{FormatOptions{Label: strings.Repeat("x", 48)}, 17 << 20, "label"},
		{FormatOptions{Label: "a\x00b"}, 17 << 20, "NUL"},
		{FormatOptions{DataOffset: 64 << 10}, 17 << 20, "no room"},
		{FormatOptions{DataOffset: 1<<20 + 512}, 17 << 20, "multiple"},
		{FormatOptions{Keyslot: KeyslotOptions{Argon2: &Argon2Params{Time: 1, MemoryKiB: 1024, Threads: 1}}}, 17 << 20, "passes"},
	} {
		m := newMemFile(c.size)
		if _, _, err := Format(m, c.size, []byte("x"), c.opt); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Format(%+v, %d): %v, want an error about %s", c.opt, c.size, err, c.want)
		}
		// Check says so without a device, but for the device's size.
		if err := c.opt.Check(); c.want == "too small" || c.want == "whole number" {
			if err != nil {
				t.Errorf("Check(%+v): %v", c.opt, err)
			}
		} else if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Check(%+v): %v, want an error about %s", c.opt, err, c.want)
		}
		if !allZero(m.b) {
			t.Errorf("Format(%+v) wrote before refusing", c.opt)
		}
	}
}

// TestPriorityIgnore: like cryptsetup, a keyslot with priority "ignore"
// is tried only when picked.
func TestPriorityIgnore(t *testing.T) {
	img, pass := makeLUKS2(t)
	cs(t, "config", "--priority", "ignore", "--key-slot", "0", img)
	f, h := openHeader(t, img)
	if h.Keyslot(0).Priority != PriorityIgnore {
		t.Fatalf("priority %v", h.Keyslot(0).Priority)
	}
	if _, _, err := h.Unlock(context.Background(), f, pass, UnlockOptions{}); err == nil {
		t.Fatal("an ignored keyslot opened without being picked")
	}
	unlock(t, h, f, pass, 0)
}

// TestHeaderJSON: info --json can marshal a header as it is.
func TestHeaderJSON(t *testing.T) {
	img, _ := makeLUKS2(t)
	rewriteMeta(t, img, func(m *jvalue) { m.get("keyslots").get("0").get("kdf").set("type", jstr("scrypt")) }, nil)
	zero(t, img, 16384+4096, 1)
	h, err := readPath(t, img)
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(h)
	if err != nil {
		t.Fatal(err)
	}
	var back struct {
		Keyslots []struct {
			Priority string
			Error    string
		}
		Copies []struct{ State, Error string }
	}
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if back.Keyslots[0].Priority != "normal" || !strings.Contains(back.Keyslots[0].Error, "scrypt") ||
		back.Copies[1].State != "damaged" || !strings.Contains(back.Copies[1].Error, "checksum") {
		t.Fatalf("%s", b)
	}
}

// TestNoKeyslotLeft: a LUKS2 volume whose last keyslot cryptsetup killed
// still decrypts with its volume key, and a keyslot can be added back.
func TestNoKeyslotLeft(t *testing.T) {
	img, pass := makeLUKS2(t)
	dir := t.TempDir()
	pf := writeFile(t, dir, "p", pass)
	key := dumpKey(t, img, "", pf)
	cs(t, "luksKillSlot", "--batch-mode", img, "0")
	f, h := openHeader(t, img)
	if len(h.Keyslots) != 0 || h.KeySize != 0 || h.Supported() != nil {
		t.Fatalf("keyslots %v, key size %d, supported: %v", h.Keyslots, h.KeySize, h.Supported())
	}
	if _, _, err := h.Unlock(context.Background(), f, pass, UnlockOptions{}); err == nil {
		t.Fatal("unlocked with no keyslot")
	}
	if err := h.VerifyKey(key[:32], nil); !errors.Is(err, ErrWrongPassphrase) {
		t.Fatalf("VerifyKey with half the key: %v", err)
	}
	if err := h.VerifyKey(key, nil); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if _, err := h.Decrypt(context.Background(), key, f, 17<<20, &out, nil); err != nil || out.Len() != 1<<20 {
		t.Fatalf("Decrypt: %d bytes, %v", out.Len(), err)
	}
	newPass := []byte("back")
	if _, err := h.AddKeyslot(f, 17<<20, key, newPass, fastSlot); err != nil {
		t.Fatal(err)
	}
	if got := dumpKey(t, img, "", writeFile(t, dir, "n", newPass)); !bytes.Equal(got, key) {
		t.Fatal("cryptsetup does not open the keyslot added back")
	}
}
