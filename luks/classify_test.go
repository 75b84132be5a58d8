package luks

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRestoreRefusesWhatReadRefuses: a header backup that breaks a rule
// cryptsetup enforces is refused by Restore with the error ReadHeader gives
// for it (the same class: damaged), and nothing is written; cryptsetup's
// luksHeaderRestore refuses it too. One that is sound but asks for an
// unknown requirement is refused as unsupported, as its info is.
func TestRestoreRefusesWhatReadRefuses(t *testing.T) {
	img, _ := makeLUKS2(t)
	f, h := openHeader(t, img)
	var buf bytes.Buffer
	if _, err := h.Backup(f, &buf); err != nil {
		t.Fatal(err)
	}
	before, _ := os.ReadFile(img)
	for _, c := range []struct {
		name string
		edit func(m *jvalue)
		want error
	}{
		{"keyslot-in-no-digest", func(m *jvalue) { m.get("digests").get("0").set("keyslots", jarr()) }, ErrCorrupt},
		{"empty-cipher", func(m *jvalue) { m.get("segments").get("0").set("encryption", jstr("")) }, ErrCorrupt},
		{"areas-overlap", func(m *jvalue) {
			k := m.get("keyslots").get("0").clone()
			k.get("area").set("offset", jstr("36864"))
			m.get("keyslots").set("1", k)
		}, ErrCorrupt},
		{"unknown-requirement", func(m *jvalue) {
			m.get("config").set("requirements", jobj(jmember{"mandatory", jarr(jstr("frobnicate"))}))
		}, ErrUnsupported},
	} {
		t.Run(c.name, func(t *testing.T) {
			hostile := editImage(t, buf.Bytes(), c.edit, nil, nil, false)
			path := writeFile(t, t.TempDir(), "backup", hostile)
			_, rerr := ReadHeader(bytes.NewReader(hostile), int64(len(hostile)))
			if c.want == ErrUnsupported {
				b, err := ReadHeader(bytes.NewReader(hostile), int64(len(hostile)))
				if err != nil {
					t.Fatal(err)
				}
				rerr = b.Supported()
			}
			_, err := Restore(f, 17<<20, bytes.NewReader(hostile), int64(len(hostile)), RestoreOptions{})
			if !errors.Is(rerr, c.want) || !errors.Is(err, c.want) || errors.Is(err, ErrCorrupt) && errors.Is(err, ErrUnsupported) ||
				!strings.Contains(err.Error(), rerr.Error()) {
				t.Fatalf("Restore: %v\nReadHeader or Supported of the backup: %v", err, rerr)
			}
			if after, _ := os.ReadFile(img); !bytes.Equal(before, after) {
				t.Fatal("a refused restore wrote to the image")
			}
			if c.want == ErrCorrupt {
				if out, err := csErr("luksHeaderRestore", "--batch-mode", img, "--header-backup-file", path); err == nil {
					t.Fatalf("cryptsetup restores the backup we refuse:\n%s", out)
				}
				if after, _ := os.ReadFile(img); !bytes.Equal(before, after) {
					t.Fatal("cryptsetup wrote to the image")
				}
			}
		})
	}
}

// TestRestoreWholeFields: a backup whose label fills its field (no NUL,
// which cryptsetup reads) restores with that label, and cryptsetup reads
// the result.
func TestRestoreWholeFields(t *testing.T) {
	img, _ := makeLUKS2(t)
	f, h := openHeader(t, img)
	var buf bytes.Buffer
	if _, err := h.Backup(f, &buf); err != nil {
		t.Fatal(err)
	}
	label := strings.Repeat("L", labelLen)
	b := editImage(t, buf.Bytes(), nil, nil, func(bin []byte, _ bool) { copy(bin[offLabel:], label) }, false)
	r, err := Restore(f, 17<<20, bytes.NewReader(b), int64(len(b)), RestoreOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if r.Label != label || r.UUID != h.UUID {
		t.Fatalf("restored label %q, UUID %q", r.Label, r.UUID)
	}
	cs(t, "luksDump", img)
}

// TestDataDevice: a header with no data after it (a header backup given
// as the image) or an image cut short is wrong input, a *DataDeviceError,
// not a damaged header; Decrypt says the same.
func TestDataDevice(t *testing.T) {
	img, _ := makeLUKS2(t)
	f, h := openHeader(t, img)
	var backup bytes.Buffer
	if _, err := h.Backup(f, &backup); err != nil {
		t.Fatal(err)
	}
	b, err := ReadHeader(bytes.NewReader(backup.Bytes()), int64(backup.Len()))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name                  string
		h                     *Header
		size                  int64
		empty, headerOnly, ok bool
	}{
		{"header-backup", b, int64(backup.Len()), true, true, false},
		{"half-a-sector", h, 16<<20 + 2048, true, false, false},
		{"shorter-than-the-header", h, 1 << 20, false, true, false},
		{"one-sector", h, 16<<20 + 4096, false, false, true},
	} {
		_, _, err := c.h.DataRange(c.size)
		var de *DataDeviceError
		if c.ok {
			if err != nil {
				t.Errorf("%s: %v", c.name, err)
			}
			continue
		}
		if !errors.As(err, &de) || !errors.Is(err, ErrDataDevice) || errors.Is(err, ErrCorrupt) || de.Empty != c.empty || de.HeaderOnly != c.headerOnly {
			t.Errorf("%s: %#v", c.name, err)
		}
		if _, err := c.h.Decrypt(context.Background(), make([]byte, 64), bytes.NewReader(nil), c.size, &bytes.Buffer{}, nil); !errors.Is(err, ErrDataDevice) {
			t.Errorf("%s: Decrypt: %v", c.name, err)
		}
	}
	if !strings.Contains(fmtErr(b.DataRange(int64(backup.Len()))), "data segment is empty") {
		t.Error("the message does not say the data segment is empty")
	}

	// A detached header says so: its data starts at 0.
	dir := t.TempDir()
	pf := writeFile(t, dir, "p", []byte("detached"))
	hdr, data := filepath.Join(dir, "hdr"), filepath.Join(dir, "data")
	sparseFile(t, hdr, 16<<20)
	sparseFile(t, data, 1<<20)
	cs(t, append(append([]string{"luksFormat", "--batch-mode", "--type", "luks2", "--key-file", pf, "--header", hdr}, csPBKDF2...), data)...)
	if _, dh := openHeader(t, hdr); !dh.Detached() || h.Detached() {
		t.Errorf("Detached: %v for a detached header, %v for an attached one", dh.Detached(), h.Detached())
	}
}

func fmtErr(_, _ int64, err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// TestInfoFields: what info shows like luksDump is in the header and its
// JSON: LUKS1's hash spec and every keyslot's iterations, stripes and key
// material offset; LUKS2 tokens, each saying that xtsctl cannot run it.
func TestInfoFields(t *testing.T) {
	needCryptsetup(t)
	dir := t.TempDir()
	pf := writeFile(t, dir, "p", []byte("info"))
	img := filepath.Join(dir, "luks1")
	sparseFile(t, img, 4<<20)
	cs(t, "luksFormat", "--batch-mode", "--type", "luks1", "--hash", "sha512", "--pbkdf-force-iterations", "1234", "--key-file", pf, img)
	_, h := openHeader(t, img)
	compareWithLUKS1Dump(t, h, cs(t, "luksDump", img))
	var doc struct {
		Hash     string
		Keyslots []struct {
			ID  int
			KDF struct{ Iterations uint32 }
			AF  struct{ Stripes int }
		}
	}
	b, _ := json.Marshal(h)
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	if doc.Hash != "sha512" || len(doc.Keyslots) != 1 || doc.Keyslots[0].KDF.Iterations != 1234 || doc.Keyslots[0].AF.Stripes != 4000 {
		t.Fatalf("LUKS1 header JSON: %s", b)
	}

	img2, _ := makeLUKS2(t)
	cs(t, "token", "add", "--key-description", "xtsctl:test", "--key-slot", "0", img2)
	_, h2 := openHeader(t, img2)
	if len(h2.Tokens) != 1 || h2.Tokens[0].Type != "luks2-keyring" || h2.Tokens[0].Runnable || TokenRunnable("systemd-tpm2") {
		t.Fatalf("tokens: %+v", h2.Tokens)
	}
	if b, _ := json.Marshal(h2); !bytes.Contains(b, []byte(`"runnable":false`)) {
		t.Fatalf("tokens in JSON: %s", b)
	}
}
