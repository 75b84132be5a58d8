package fvault2

import (
	"bytes"
	"context"
	"crypto/pbkdf2"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/xtsctl/xtsctl/disk"
)

func TestRegistered(t *testing.T) {
	for _, n := range []string{"fvault2", "filevault2"} {
		if f, ok := disk.Lookup(n); !ok || f.Info().Name != Name {
			t.Errorf("--type %s does not find the format", n)
		}
	}
	if !(Format{}).Info().Signature {
		t.Error("the format says it has no signature")
	}
}

// TestSample opens cryptsetup's sample: detection, what info shows, the
// unlock chain step by step, and the decrypted logical volume's SHA-256
// and HFS+ UUID against the values cryptsetup's test gives.
func TestSample(t *testing.T) {
	path := sampleImage(t)
	img := openImage(t, path)
	if got := disk.Detect(img.File, img.Size); !slices.ContainsFunc(got, func(f disk.Format) bool { return f.Info().Name == Name }) {
		t.Fatalf("Detect = %s, want FileVault 2 among them", disk.Describe(got))
	}
	h := openHeader(t, path)
	v := h.v
	if got := formatUUID(v.pv.PVUUID); got != samplePVUUID {
		t.Errorf("PV UUID %s, want %s", got, samplePVUUID)
	}
	if !strings.EqualFold(v.lv.FamilyUUID, sampleFamilyUUID) || v.lv.Size != sampleLVSize {
		t.Errorf("LV family %s size %d, want %s %d", v.lv.FamilyUUID, v.lv.Size, sampleFamilyUUID, sampleLVSize)
	}
	if v.unservable != nil || v.unlockable != nil || len(v.warnings) != 0 {
		t.Fatalf("sample: unservable %v, unlockable %v, warnings %q", v.unservable, v.unlockable, v.warnings)
	}
	l := v.layout
	if len(l.Extents) != 1 || l.Extents[0].Source != sampleLVOffset || l.Extents[0].Length != sampleLVSize ||
		l.Extents[0].Sector.IVOffset != 0 || l.SectorSize != 512 || l.Cipher != disk.XTSPlain64 || l.ReadOnly == "" {
		t.Fatalf("layout %+v", l)
	}
	users := v.ctx.Users
	if len(users) != 1 || users[0].Iterations != sampleIterations || hex.EncodeToString(users[0].Salt) != sampleSalt {
		t.Fatalf("crypto users %+v", users)
	}

	// The unlock chain's first step against the fact sheet's KEK.
	pk, err := pbkdf2.Key(sha256.New, samplePass, users[0].Salt, int(users[0].Iterations), 16)
	if err != nil {
		t.Fatal(err)
	}
	kek, err := unwrapKey(pk, users[0].WrappedKEK)
	if err != nil || hex.EncodeToString(kek) != "821c460be6a9d0aec707a6202db5124e" {
		t.Fatalf("KEK %x, %v", kek, err)
	}

	need, err := h.Check(req())
	if err != nil {
		t.Fatal(err)
	}
	if need.Passphrase != disk.WantRequired || need.KeyFile != disk.WantNone || need.Tries != "crypto user 0" {
		t.Errorf("Need %+v", need)
	}
	var progress []string
	r := req()
	r.Progress = func(f string, a ...any) { progress = append(progress, f) }
	u, err := unlock(t, h, r, samplePass)
	if err != nil {
		t.Fatal(err)
	}
	defer u.Wipe()
	if len(progress) != 1 {
		t.Errorf("progress lines %q", progress)
	}
	// cryptsetup's dump of the sample shows the volume key as
	// 20734d33…ccc77b319 (fact sheet).
	k := hex.EncodeToString(u.Key)
	if len(u.Key) != 32 || !strings.HasPrefix(k, "20734d33") || !strings.HasSuffix(k, "ccc77b319") {
		t.Errorf("key %s…, want 20734d33…ccc77b319", k[:8])
	}
	if u.Format != Name || u.Slot != 0 || !strings.Contains(u.SlotName, "868c54ac-d101-4045-8418-7487a919d97a") || u.Unservable != "" {
		t.Errorf("unlocked %q slot %d %q unservable %q", u.Format, u.Slot, u.SlotName, u.Unservable)
	}

	sum, plain := decryptAll(t, path, u, true)
	if sum != sampleLVSHA256 {
		t.Fatalf("SHA-256 of the logical volume %s, want %s", sum, sampleLVSHA256)
	}
	if got := hfsUUID(t, plain); got != sampleFSUUID {
		t.Errorf("HFS+ UUID %s, want %s", got, sampleFSUUID)
	}
}

// hfsUUID asks blkid for the UUID of the filesystem in plain.
func hfsUUID(t *testing.T, plain []byte) string {
	t.Helper()
	blkid := needTool(t, "blkid")
	f := filepath.Join(t.TempDir(), "lv")
	if err := os.WriteFile(f, plain, 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(blkid, "-p", "-o", "value", "-s", "UUID", f).Output()
	if err != nil {
		t.Fatalf("blkid: %v", err)
	}
	return strings.TrimSpace(string(out))
}

func TestReport(t *testing.T) {
	h := openHeader(t, sampleImage(t))
	rep, err := h.Report(disk.ReportOptions{})
	if err != nil {
		t.Fatal(err)
	}
	text := ""
	for _, l := range rep.Lines {
		text += strings.Repeat("  ", l.Indent) + l.Key + ": " + l.Value + "\n"
	}
	for _, want := range []string{
		"physical volume: " + samplePVUUID,
		"volume group: d1cc2d07-0a69-4e73-9472-dab3dad5e939",
		"logical volume: e82ec3b4-6fa6-4a43-aa98-eca628dd3941",
		"name: Untitled",
		"family: " + sampleFamilyUUID,
		"size: 167772160 bytes",
		"extent: 167772160 bytes at byte 0 of the volume, from byte 67108864 of the image",
		"content: Apple_HFS",
		"conversion: Complete",
		"crypto user 0: 868c54ac-d101-4045-8418-7487a919d97a",
		"kdf: pbkdf2-sha256, 204222 iterations",
		"key: passphrase-wrapped KEK 6614421e-7bcd-49ef-af17-78d28047cacb",
		"volume key 1fe684fe-ea87-4ab8-80c5-db073c293e9c: AES-XTS, wrapped with KEK 6614421e-7bcd-49ef-af17-78d28047cacb (in use)",
		"volume key 7bcad686-366b-449f-976b-39565fc78b64: no key",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("report lacks %q:\n%s", want, text)
		}
	}
	if strings.Contains(text, "\nkey: ") {
		t.Error("the report shows a key without ShowKey")
	}
	js, err := json.Marshal(rep.Doc)
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(js, &doc); err != nil {
		t.Fatal(err)
	}
	lv := doc["logical_volume"].(map[string]any)
	if lv["size"].(float64) != sampleLVSize || doc["crypto_users"].([]any)[0].(map[string]any)["salt"] != sampleSalt {
		t.Errorf("JSON %s", js)
	}

	u, err := unlock(t, h, req(), samplePass)
	if err != nil {
		t.Fatal(err)
	}
	rep, _ = h.Report(disk.ReportOptions{ShowKey: true, Unlocked: u})
	if doc := rep.Doc.(reportDoc); doc.Key != hex.EncodeToString(u.Key) {
		t.Errorf("ShowKey: key %q", doc.Key)
	}
}

func TestWrongPassphrase(t *testing.T) {
	h := openHeader(t, sampleImage(t))
	for _, p := range []string{"heslo124", "", "heslo123 ", "HESLO123"} {
		u, err := unlock(t, h, req(), p)
		if !errors.Is(err, disk.ErrWrongSecret) || disk.KindOf(err) != disk.KindKey || u != nil {
			t.Errorf("passphrase %q: %v (kind %v)", p, err, disk.KindOf(err))
		}
		if err != nil && strings.Contains(err.Error(), p) && p != "" {
			t.Errorf("the error shows the passphrase: %v", err)
		}
	}
}

func TestSlots(t *testing.T) {
	h := openHeader(t, sampleImage(t))
	r := req()
	r.Slot = 0
	if _, err := unlock(t, h, r, samplePass); err != nil {
		t.Errorf("slot 0: %v", err)
	}
	r.Slot = 1
	if _, err := h.Check(r); disk.KindOf(err) != disk.KindUsage || !strings.Contains(err.Error(), "no crypto user 1") {
		t.Errorf("slot 1: %v", err)
	}
}

// TestReadWriteRefused: a read-write request is refused before the
// prompt; the layout says why too, for whoever serves it.
func TestReadWriteRefused(t *testing.T) {
	h := openHeader(t, sampleImage(t))
	r := req()
	r.ReadOnly = false
	_, err := h.Check(r)
	if disk.KindOf(err) != disk.KindUsage || !strings.Contains(err.Error(), "read-only") || len(disk.HintsOf(err)) == 0 {
		t.Fatalf("read-write Check: %v (kind %v)", err, disk.KindOf(err))
	}
	r.TestOnly = true
	if _, err := h.Check(r); err != nil {
		t.Errorf("test-only Check: %v", err)
	}
	u, err := unlock(t, h, req(), samplePass)
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(h.path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	d, err := disk.NewDevice(f, u.Layout, u.Key, disk.AttachOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if err := d.WriteSectors(make([]byte, 512), 0); err == nil || !strings.Contains(err.Error(), "read-only") {
		t.Errorf("a write to the device: %v", err)
	}
}

func TestUnlockCancelled(t *testing.T) {
	h := openHeader(t, sampleImage(t))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := h.Unlock(ctx, req(), &disk.Secret{Passphrase: []byte(samplePass)})
	if disk.KindOf(err) != disk.KindInterrupted {
		t.Errorf("cancelled unlock: %v (kind %v)", err, disk.KindOf(err))
	}
}

func TestDetachedHeaderRefused(t *testing.T) {
	img := openImage(t, sampleImage(t))
	img.HeaderFile, img.HeaderPath = img.File, img.Path
	if _, err := (Format{}).Open(img, nil); disk.KindOf(err) != disk.KindUsage {
		t.Errorf("detached header: %v", err)
	}
}

// TestIterationBound: the PBKDF2 count comes from the image; above
// MaxIterations (summed over the users tried) it is refused before the
// prompt unless the request allows expensive KDFs.
func TestIterationBound(t *testing.T) {
	path := sampleImage(t)
	editPWK(t, path, func(s []byte) { binary.LittleEndian.PutUint32(s[168:], MaxIterations+1) })
	h := openHeader(t, path)
	_, err := h.Check(req())
	if disk.KindOf(err) != disk.KindKey || !strings.Contains(err.Error(), fmt.Sprint(MaxIterations+1)) ||
		!slices.ContainsFunc(disk.HintsOf(err), func(s string) bool { return strings.Contains(s, "--allow-expensive-kdf") }) {
		t.Fatalf("Check: %v (kind %v, hints %q)", err, disk.KindOf(err), disk.HintsOf(err))
	}
	r := req()
	r.AllowExpensiveKDF = true
	if _, err := h.Check(r); err != nil {
		t.Fatalf("Check with AllowExpensiveKDF: %v", err)
	}

	// Summed over the users tried: a second user that would cross the
	// bound is left out, and named when nothing opens.
	h = openHeader(t, sampleImage(t))
	u0 := h.v.ctx.Users[0]
	u0.Iterations = MaxIterations - 10
	u1 := u0
	u1.Iterations = 100
	h.v.ctx.Users = []cryptoUser{u0, u1, u1}
	need, err := h.Check(req())
	if err != nil || need.Tries != "crypto user 0" {
		t.Fatalf("Check: %+v, %v", need, err)
	}
	h.v.ctx.Users = []cryptoUser{u1, u1, u0}
	if need, err := h.Check(req()); err != nil || need.Tries != "crypto users 0, 1" {
		t.Fatalf("Check: %+v, %v", need, err)
	}
	_, skipped, _ := h.plan(req())
	if len(skipped) != 1 || !strings.Contains(skipped[0].Error(), "crypto user 2") {
		t.Errorf("skipped %v", skipped)
	}
}

// TestSecondUser adds a crypto user to the sample with its own
// passphrase, salt and iteration count, its PassphraseWrappedKEKStruct
// made as FileVault makes one (the KEK wrapped under PBKDF2 of the
// passphrase): the right user opens, with the same volume key.
func TestSecondUser(t *testing.T) {
	path := sampleImage(t)
	h := openHeader(t, path)
	kek := mustHex("821c460be6a9d0aec707a6202db5124e") // the fact sheet's
	salt := mustHex("000102030405060708090a0b0c0d0e0f")
	const pass2, iter2 = "correct horse battery staple", 1000
	pk, err := pbkdf2.Key(sha256.New, pass2, salt, iter2, 16)
	if err != nil {
		t.Fatal(err)
	}
	editBlock(t, path, 1, func(b []byte) {
		off, size := le32(b[112:]), le32(b[116:])
		x := string(b[off : off+size])
		start := strings.Index(x, `<dict ID="3">`)
		end := strings.Index(x, "</dict></array>")
		user := x[start : end+len("</dict>")]
		pwkText := user[strings.Index(user, `<data ID="4">`)+len(`<data ID="4">`):]
		pwkText = pwkText[:strings.Index(pwkText, "</data>")]
		pwk, err := base64.StdEncoding.DecodeString(pwkText)
		if err != nil {
			t.Fatal(err)
		}
		copy(pwk[8:24], salt)
		copy(pwk[32:56], wrapKey(pk, kek))
		binary.LittleEndian.PutUint32(pwk[168:], iter2)
		u2 := strings.Replace(user, pwkText, base64.StdEncoding.EncodeToString(pwk), 1)
		u2 = strings.Replace(u2, "868C54AC-D101-4045-8418-7487A919D97A", "11111111-2222-3333-4444-555555555555", 1)
		u2 = strings.ReplaceAll(u2, ` ID="`, ` OLDID="`) // IDs are unique
		x = x[:end+len("</dict>")] + u2 + x[end+len("</dict>"):]
		clear(b[off:])
		copy(b[off:], x)
		for _, at := range []int{104, 108, 116} {
			binary.LittleEndian.PutUint32(b[at:], uint32(len(x)))
		}
	})
	first, err := unlock(t, h, req(), samplePass)
	if err != nil {
		t.Fatal(err)
	}
	h = openHeader(t, path)
	if n := len(h.v.ctx.Users); n != 2 {
		t.Fatalf("%d crypto users", n)
	}
	u, err := unlock(t, h, req(), pass2)
	if err != nil {
		t.Fatal(err)
	}
	if u.Slot != 1 || !strings.Contains(u.SlotName, "11111111-2222-3333-4444-555555555555") || !bytes.Equal(u.Key, first.Key) {
		t.Errorf("opened slot %d %q, same key: %v", u.Slot, u.SlotName, bytes.Equal(u.Key, first.Key))
	}
	r := req()
	r.Slot = 0
	if _, err := unlock(t, h, r, pass2); !errors.Is(err, disk.ErrWrongSecret) || !strings.Contains(err.Error(), "crypto user 0") {
		t.Errorf("user 0 with user 1's passphrase: %v", err)
	}
	if u, err := unlock(t, h, req(), samplePass); err != nil || u.Slot != 0 {
		t.Errorf("user 0: %v", err)
	}
}
