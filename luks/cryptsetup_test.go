package luks

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// Low costs so that cryptsetup and we both unlock quickly.
var (
	csPBKDF2 = []string{"--pbkdf", "pbkdf2", "--pbkdf-force-iterations", "1000"}
	csArgon2 = []string{"--pbkdf-memory", "32768", "--pbkdf-force-iterations", "4", "--pbkdf-parallel", "2"}
)

type csCase struct {
	name           string
	args           []string // luksFormat options
	dataOffset     int64    // where the data starts, to size the image
	detached       bool     // --header in a separate file
	slot5          bool     // the passphrase only in keyslot 5
	destroyPrimary bool     // zero the first 4 KiB of the header before we read it
}

func csCases() []csCase {
	l1 := func(a ...string) []string {
		return append([]string{"--type", "luks1", "--pbkdf-force-iterations", "1000"}, a...)
	}
	l2 := func(a ...string) []string { return append([]string{"--type", "luks2"}, a...) }
	with := func(a []string, b ...string) []string { return append(append([]string(nil), a...), b...) }
	return []csCase{
		{name: "luks1-sha1-512", args: l1("--hash", "sha1", "--key-size", "512"), dataOffset: 4096 * 512},
		{name: "luks1-sha256-256", args: l1("--hash", "sha256", "--key-size", "256"), dataOffset: 4096 * 512},
		{name: "luks1-sha512", args: l1("--hash", "sha512"), dataOffset: 4096 * 512},
		{name: "luks1-ripemd160", args: l1("--hash", "ripemd160"), dataOffset: 4096 * 512},
		{name: "luks1-offset", args: l1("--offset", "10000"), dataOffset: 10000 * 512},
		{name: "luks1-plain", args: l1("--cipher", "aes-xts-plain", "--key-size", "256"), dataOffset: 4096 * 512},
		{name: "luks1-detached", args: l1(), detached: true},
		{name: "luks1-slot5", args: l1(), dataOffset: 4096 * 512, slot5: true},
		{name: "luks2-pbkdf2-sha1", args: l2(with(csPBKDF2, "--hash", "sha1")...), dataOffset: 16 << 20},
		{name: "luks2-pbkdf2-sha256", args: l2(with(csPBKDF2, "--hash", "sha256")...), dataOffset: 16 << 20},
		{name: "luks2-pbkdf2-sha512-256", args: l2(with(csPBKDF2, "--hash", "sha512", "--key-size", "256")...), dataOffset: 16 << 20},
		{name: "luks2-argon2i", args: l2(with(csArgon2, "--pbkdf", "argon2i")...), dataOffset: 16 << 20},
		{name: "luks2-argon2id-256", args: l2(with(csArgon2, "--pbkdf", "argon2id", "--key-size", "256")...), dataOffset: 16 << 20},
		{name: "luks2-sector512", args: l2(with(csArgon2, "--sector-size", "512", "--label", "a label")...), dataOffset: 16 << 20},
		{name: "luks2-sector2048", args: l2(with(csPBKDF2, "--sector-size", "2048")...), dataOffset: 16 << 20},
		{name: "luks2-offset", args: l2(with(csPBKDF2, "--offset", "40960")...), dataOffset: 40960 * 512},
		{name: "luks2-detached", args: l2(csArgon2...), detached: true},
		{name: "luks2-slot5", args: l2(csArgon2...), dataOffset: 16 << 20, slot5: true},
		{name: "luks2-destroyed-primary", args: l2(csArgon2...), dataOffset: 16 << 20, destroyPrimary: true},
		{name: "luks2-64k-destroyed-primary", args: l2(with(csPBKDF2, "--luks2-metadata-size", "64k", "--luks2-keyslots-size", "2m")...),
			dataOffset: 3 << 20, destroyPrimary: true},
		{name: "luks2-detached-destroyed-primary", args: l2(csPBKDF2...), detached: true, destroyPrimary: true},
	}
}

// TestCryptsetupImages unlocks images cryptsetup made and decrypts their
// data: the key must be the one cryptsetup dumps, the plaintext the one
// whose ciphertext python3-cryptography wrote with that key, and the
// parsed header what cryptsetup's luksDump shows.
func TestCryptsetupImages(t *testing.T) {
	needCryptsetup(t)
	needPython(t)
	for _, c := range csCases() {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			testCryptsetupImage(t, c)
		})
	}
}

func testCryptsetupImage(t *testing.T, c csCase) {
	dir := t.TempDir()
	// Key files are read whole: a newline and a NUL are part of the passphrase.
	pass := append([]byte("pass\nword\x00"), randBytes(t, 8)...)
	passFile := writeFile(t, dir, "pass", pass)
	img := filepath.Join(dir, "img")
	const dataLen = 1 << 20
	size := c.dataOffset + dataLen
	hdr := ""
	args := append([]string{"luksFormat", "--batch-mode", "--key-file", passFile}, c.args...)
	if c.detached {
		hdr = filepath.Join(dir, "hdr")
		sparseFile(t, hdr, 16<<20)
		args = append(args, "--header", hdr)
		size = dataLen
	}
	sparseFile(t, img, size)
	cs(t, append(args, img)...)
	wantSlot := 0
	if c.slot5 {
		newPass := randBytes(t, 16)
		newFile := writeFile(t, dir, "pass5", newPass)
		add := []string{"luksAddKey", "--batch-mode", "--key-file", passFile, "--key-slot", "5"}
		if strings.Contains(strings.Join(c.args, " "), "luks1") {
			add = append(add, "--pbkdf-force-iterations", "1000")
		} else {
			add = append(add, csArgon2...)
		}
		cs(t, append(add, img, newFile)...)
		cs(t, "luksKillSlot", "--batch-mode", img, "0")
		pass, passFile, wantSlot = newPass, newFile, 5
	}
	want := dumpKey(t, img, hdr, passFile)
	hdrPath := img
	if hdr != "" {
		hdrPath = hdr
	}
	var csJSON map[string]any
	var csText string
	if strings.Contains(strings.Join(c.args, " "), "luks2") {
		csJSON = dumpJSON(t, hdrPath)
	} else {
		csText = cs(t, "luksDump", hdrPath)
	}
	if c.destroyPrimary {
		// After every cryptsetup call: cryptsetup repairs a damaged copy
		// when it reads the header.
		zero(t, hdrPath, 0, 4096)
	}

	hf, h := openHeader(t, hdrPath)
	if c.destroyPrimary {
		if h.Copies[0].State == CopyOK || h.Copies[1].State != CopyOK || !h.Copies[1].Used {
			t.Fatalf("copies after zeroing the primary: %+v", h.Copies)
		}
	}
	if csJSON != nil {
		compareWithJSON(t, h, csJSON)
	} else {
		compareWithLUKS1Dump(t, h, csText)
	}
	if err := h.Supported(); err != nil {
		t.Fatalf("Supported: %v", err)
	}
	key, slot := unlock(t, h, hf, pass)
	if !bytes.Equal(key, want) || slot != wantSlot {
		t.Fatalf("Unlock: slot %d key %x, cryptsetup dumped %x (slot %d)", slot, key, want, wantSlot)
	}
	if _, _, err := h.Unlock(context.Background(), hf, append(pass, 'x'), UnlockOptions{}); !errors.Is(err, ErrWrongPassphrase) {
		t.Fatalf("wrong passphrase: %v", err)
	}
	if _, _, err := h.Unlock(context.Background(), hf, pass, UnlockOptions{Keyslots: []int{wantSlot + 1}}); err == nil {
		t.Fatal("an inactive keyslot opened")
	}

	// Data: the ciphertext of a random plaintext written by the
	// independent implementation decrypts to it, and our encryption of it
	// is that ciphertext.
	df, err := os.OpenFile(img, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer df.Close()
	off, n, err := h.DataRange(size)
	if err != nil {
		t.Fatal(err)
	}
	if wantOff := c.dataOffset; c.detached {
		wantOff = 0
		if off != wantOff {
			t.Fatalf("data offset %d, want %d", off, wantOff)
		}
	} else if off != wantOff || n != dataLen {
		t.Fatalf("data range %d+%d, want %d+%d", off, n, wantOff, dataLen)
	}
	plain := randBytes(t, int(n))
	ct := xtsRef(t, "enc", key, plain, h.Segment.SectorSize, 0)
	if _, err := df.WriteAt(ct, off); err != nil {
		t.Fatal(err)
	}
	var got bytes.Buffer
	if m, err := h.Decrypt(context.Background(), key, df, size, &got, nil); err != nil || m != n {
		t.Fatalf("Decrypt: %d bytes, %v", m, err)
	}
	if !bytes.Equal(got.Bytes(), plain) {
		t.Fatal("Decrypt: plaintext differs from what python3-cryptography encrypted")
	}
	out := newMemFile(size)
	if m, err := h.Encrypt(context.Background(), key, bytes.NewReader(plain), out, size, nil); err != nil || m != n {
		t.Fatalf("Encrypt: %d bytes, %v", m, err)
	}
	if !bytes.Equal(out.b[off:off+n], ct) {
		t.Fatal("Encrypt: ciphertext differs from python3-cryptography's")
	}

	// The dm table: what cryptsetup would load (with the hex key).
	table, err := h.DMTable(size)
	if err != nil {
		t.Fatal(err)
	}
	table.Key, table.Device = key, "/dev/vda"
	b, err := table.AppendLine(nil)
	if err != nil {
		t.Fatal(err)
	}
	line := string(b)
	wantLine := fmt.Sprintf("0 %d crypt %s %x 0 /dev/vda %d", n/512, h.Segment.Cipher, key, off/512)
	if h.Segment.SectorSize != 512 {
		wantLine += fmt.Sprintf(" 1 sector_size:%d", h.Segment.SectorSize)
	}
	if line != wantLine {
		t.Fatalf("DMTable:\n got %s\nwant %s", line, wantLine)
	}
}

func zero(t testing.TB, path string, off, n int64) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt(make([]byte, n), off); err != nil {
		t.Fatal(err)
	}
}

// memFile is an in-memory io.ReaderAt and io.WriterAt.
type memFile struct{ b []byte }

func newMemFile(size int64) *memFile { return &memFile{b: make([]byte, size)} }

func (m *memFile) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 || off > int64(len(m.b)) {
		return 0, errors.New("memFile: offset out of range")
	}
	n := copy(p, m.b[off:])
	if n < len(p) {
		return n, errors.New("memFile: EOF")
	}
	return n, nil
}

func (m *memFile) WriteAt(p []byte, off int64) (int, error) {
	if off < 0 || off+int64(len(p)) > int64(len(m.b)) {
		return 0, errors.New("memFile: write out of range")
	}
	return copy(m.b[off:], p), nil
}

// compareWithJSON checks our parse of a LUKS2 header against
// cryptsetup's --dump-json-metadata.
func compareWithJSON(t *testing.T, h *Header, m map[string]any) {
	t.Helper()
	str := func(v any) string { return fmt.Sprint(v) }
	num := func(v any) uint64 {
		switch x := v.(type) {
		case float64:
			return uint64(x)
		case string:
			n, err := strconv.ParseUint(x, 10, 64)
			if err != nil {
				t.Fatalf("not a number: %q", x)
			}
			return n
		}
		t.Fatalf("not a number: %v", v)
		return 0
	}
	slots := m["keyslots"].(map[string]any)
	if len(slots) != len(h.Keyslots) {
		t.Fatalf("%d keyslots, cryptsetup shows %d", len(h.Keyslots), len(slots))
	}
	for _, k := range h.Keyslots {
		js := slots[strconv.Itoa(k.ID)].(map[string]any)
		area, kdf, af := js["area"].(map[string]any), js["kdf"].(map[string]any), js["af"].(map[string]any)
		got := fmt.Sprintln(k.Type, k.KeySize, k.Area.Offset, k.Area.Size, k.Area.Cipher, k.Area.KeySize, k.AF.Type, k.AF.Stripes, k.AF.Hash, k.KDF.Type)
		want := fmt.Sprintln(js["type"], num(js["key_size"]), num(area["offset"]), num(area["size"]), area["encryption"], num(area["key_size"]),
			af["type"], num(af["stripes"]), af["hash"], kdf["type"])
		if k.KDF.Type == "pbkdf2" {
			got += fmt.Sprintln(k.KDF.Hash, k.KDF.Iterations)
			want += fmt.Sprintln(kdf["hash"], num(kdf["iterations"]))
		} else {
			got += fmt.Sprintln(k.KDF.Time, k.KDF.MemoryKiB, k.KDF.Threads)
			want += fmt.Sprintln(num(kdf["time"]), num(kdf["memory"]), num(kdf["cpus"]))
		}
		if got != want {
			t.Fatalf("keyslot %d:\n got %s\nwant %s", k.ID, got, want)
		}
	}
	seg := m["segments"].(map[string]any)["0"].(map[string]any)
	s := h.Segment
	got := fmt.Sprintln(s.Type, s.Offset, s.Dynamic, s.IVTweak, s.Cipher, s.SectorSize)
	want := fmt.Sprintln(seg["type"], num(seg["offset"]), seg["size"] == "dynamic", num(seg["iv_tweak"]), seg["encryption"], num(seg["sector_size"]))
	if got != want {
		t.Fatalf("segment:\n got %s\nwant %s", got, want)
	}
	d := m["digests"].(map[string]any)["0"].(map[string]any)
	if h.Digests[0].Hash != str(d["hash"]) || uint64(h.Digests[0].Iterations) != num(d["iterations"]) {
		t.Fatalf("digest %+v, cryptsetup %v", h.Digests[0], d)
	}
	cfg := m["config"].(map[string]any)
	if h.MetadataSize-4096 != num(cfg["json_size"]) || h.KeyslotsSize != num(cfg["keyslots_size"]) {
		t.Fatalf("sizes %d %d, cryptsetup %v", h.MetadataSize, h.KeyslotsSize, cfg)
	}
}

var luks1DumpRE = regexp.MustCompile(`(?m)^(Cipher name|Cipher mode|Hash spec|Payload offset|MK bits|UUID|MK iterations):\s*(\S+)`)
var luks1SlotRE = regexp.MustCompile(`Key Slot (\d): ENABLED\n\s*Iterations:\s*(\d+)\n(?:.*\n){2}\s*Key material offset:\s*(\d+)\n\s*AF stripes:\s*(\d+)`)

// compareWithLUKS1Dump checks our parse of a LUKS1 header against
// cryptsetup's luksDump text.
func compareWithLUKS1Dump(t *testing.T, h *Header, dump string) {
	t.Helper()
	f := map[string]string{}
	for _, m := range luks1DumpRE.FindAllStringSubmatch(dump, -1) {
		f[m[1]] = m[2]
	}
	got := fmt.Sprintln(h.Cipher, h.Hash, h.Segment.Offset/512, h.KeySize*8, h.UUID, h.Digests[0].Iterations)
	want := fmt.Sprintln(f["Cipher name"]+"-"+f["Cipher mode"], f["Hash spec"], f["Payload offset"], f["MK bits"], f["UUID"], f["MK iterations"])
	if got != want {
		t.Fatalf("header:\n got %s\nwant %s", got, want)
	}
	slots := luks1SlotRE.FindAllStringSubmatch(dump, -1)
	if len(slots) != len(h.Keyslots) {
		t.Fatalf("%d keyslots, luksDump shows %d", len(h.Keyslots), len(slots))
	}
	for i, m := range slots {
		k := h.Keyslots[i]
		got := fmt.Sprintln(k.ID, k.KDF.Iterations, k.Area.Offset/512, k.AF.Stripes)
		if want := fmt.Sprintln(m[1], m[2], m[3], m[4]); got != want {
			t.Fatalf("keyslot:\n got %s\nwant %s", got, want)
		}
	}
}
