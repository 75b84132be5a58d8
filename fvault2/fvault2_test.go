package fvault2

import (
	"context"
	"crypto/pbkdf2"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
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
