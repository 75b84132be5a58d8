package fvault2

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/xtsctl/xtsctl/disk"
)

// gptPart is a partition of a GPT the tests write.
type gptPart struct {
	typeGUID    string
	first, last uint64 // LBAs, 512-byte sectors
}

// writeGPT writes a protective MBR and a primary and backup GPT (128
// entries) into the file at path, of size bytes. partx reads the result
// (TestWholeDiskImage checks it does).
func writeGPT(t testing.TB, path string, size int64, parts []gptPart) {
	t.Helper()
	const ss = 512
	lastLBA := uint64(size/ss) - 1
	mbr := make([]byte, ss)
	mbr[446+4] = 0xEE
	binary.LittleEndian.PutUint32(mbr[446+8:], 1)
	binary.LittleEndian.PutUint32(mbr[446+12:], uint32(min(lastLBA, 0xFFFFFFFF)))
	mbr[510], mbr[511] = 0x55, 0xAA
	writeFile(t, path, 0, mbr)

	entries := make([]byte, 128*128)
	for i, p := range parts {
		e := entries[i*128:]
		g := gptGUID(p.typeGUID)
		copy(e, g[:])
		uniq := gptGUID(fmt.Sprintf("%08X-1111-2222-3333-444455556666", i+1))
		copy(e[16:], uniq[:])
		binary.LittleEndian.PutUint64(e[32:], p.first)
		binary.LittleEndian.PutUint64(e[40:], p.last)
	}
	ecrc := crc32.ChecksumIEEE(entries)
	header := func(my, alt, entriesLBA uint64) []byte {
		h := make([]byte, ss)
		copy(h, "EFI PART")
		binary.LittleEndian.PutUint32(h[8:], 0x00010000)
		binary.LittleEndian.PutUint32(h[12:], 92)
		binary.LittleEndian.PutUint64(h[24:], my)
		binary.LittleEndian.PutUint64(h[32:], alt)
		binary.LittleEndian.PutUint64(h[40:], 34)
		binary.LittleEndian.PutUint64(h[48:], lastLBA-33)
		g := gptGUID("01234567-89AB-CDEF-0123-456789ABCDEF")
		copy(h[56:], g[:])
		binary.LittleEndian.PutUint64(h[72:], entriesLBA)
		binary.LittleEndian.PutUint32(h[80:], 128)
		binary.LittleEndian.PutUint32(h[84:], 128)
		binary.LittleEndian.PutUint32(h[88:], ecrc)
		binary.LittleEndian.PutUint32(h[16:], crc32.ChecksumIEEE(h[:92]))
		return h
	}
	writeFile(t, path, ss, header(1, lastLBA, 2))
	writeFile(t, path, 2*ss, entries)
	writeFile(t, path, int64(lastLBA-32)*ss, entries)
	writeFile(t, path, int64(lastLBA)*ss, header(lastLBA, 1, lastLBA-32))
}

// copySparse copies the non-zero 64 KiB chunks of src to dst at off.
func copySparse(t testing.TB, src, dst string, off int64) {
	t.Helper()
	in, err := os.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	buf := make([]byte, 64<<10)
	zero := make([]byte, len(buf))
	for pos := int64(0); ; pos += int64(len(buf)) {
		n, err := in.ReadAt(buf, pos)
		if n > 0 && !bytes.Equal(buf[:n], zero[:n]) {
			if _, err := out.WriteAt(buf[:n], off+pos); err != nil {
				t.Fatal(err)
			}
		}
		if err == io.EOF {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

func newSparse(t testing.TB, size int64) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "disk.img")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(size); err != nil {
		t.Fatal(err)
	}
	f.Close()
	return p
}

// TestWholeDiskImage puts the sample into the CoreStorage partition of a
// GPT disk image (as a Mac's disk is laid out): detected, opened at the
// partition, and decrypted to the same logical volume. partx, which reads
// GPTs independently, must see the partition where the test put it.
func TestWholeDiskImage(t *testing.T) {
	sample := sampleImage(t)
	const first = 2048
	size := int64(first*512) + sampleSize + 34*512
	path := newSparse(t, size)
	last := uint64(first + sampleSize/512 - 1)
	writeGPT(t, path, size, []gptPart{{guidCoreStorage, first, last}})
	copySparse(t, sample, path, first*512)

	if partx, err := exec.LookPath("partx"); err == nil {
		out, err := exec.Command(partx, "--show", "-g", "-o", "NR,START,END,TYPE", path).CombinedOutput()
		want := fmt.Sprintf("1 %d %d %s", first, last, strings.ToLower(guidCoreStorage))
		if err != nil || strings.Join(strings.Fields(string(out)), " ") != want {
			t.Fatalf("partx sees %q (%v), want %q", out, err, want)
		}
	} else {
		t.Log("partx not installed: the GPT is not checked independently")
	}

	img := openImage(t, path)
	if !(Format{}).Probe(img.File, img.Size) {
		t.Fatal("Probe does not see the CoreStorage partition")
	}
	h := openHeader(t, path)
	if h.v.part == nil || h.v.part.Number != 1 || h.v.pvOff != first*512 {
		t.Fatalf("opened at %+v, byte %d", h.v.part, h.v.pvOff)
	}
	u, err := unlock(t, h, req(), samplePass)
	if err != nil {
		t.Fatal(err)
	}
	if src := u.Layout.Extents[0].Source; src != first*512+sampleLVOffset {
		t.Errorf("logical volume at byte %d of the disk", src)
	}
	if sum, _ := decryptAll(t, path, u, false); sum != sampleLVSHA256 {
		t.Errorf("SHA-256 %s, want %s", sum, sampleLVSHA256)
	}
}

func wantAPFS(t *testing.T, err error) {
	t.Helper()
	if err == nil || !errors.Is(err, ErrAPFS) || !errors.Is(err, disk.ErrUnsupported) || disk.KindOf(err) != disk.KindInput ||
		!strings.Contains(err.Error(), "APFS-encrypted volumes are a different format") {
		t.Fatalf("APFS refused with %v (kind %v)", err, disk.KindOf(err))
	}
}

func TestAPFSRefused(t *testing.T) {
	t.Run("container", func(t *testing.T) {
		path := newSparse(t, 1<<20)
		writeFile(t, path, 32, []byte("NXSB"))
		img := openImage(t, path)
		if (Format{}).Probe(img.File, img.Size) {
			t.Error("Probe claims an APFS container")
		}
		wantAPFS(t, (Format{}).Explain(img.File, img.Size))
		_, err := (Format{}).Open(img, nil)
		wantAPFS(t, err)
		if !strings.Contains(err.Error(), "APFS container") {
			t.Errorf("error %q does not say what the image is", err)
		}
	})
	t.Run("partition", func(t *testing.T) {
		size := int64(8 << 20)
		path := newSparse(t, size)
		writeGPT(t, path, size, []gptPart{
			{"C12A7328-F81F-11D2-BA4B-00A0C93EC93B", 40, 2047}, // EFI system partition
			{guidAPFS, 2048, uint64(size/512) - 40},
		})
		writeFile(t, path, 2048*512+32, []byte("NXSB"))
		img := openImage(t, path)
		wantAPFS(t, (Format{}).Explain(img.File, img.Size))
		_, err := (Format{}).Open(img, nil)
		wantAPFS(t, err)
		if !strings.Contains(err.Error(), "partition 2") {
			t.Errorf("error %q does not name the partition", err)
		}
	})
}

func TestNotCoreStorage(t *testing.T) {
	for name, fill := range map[string]func(string){
		"zeros":     func(string) {},
		"short":     nil,
		"ext4-like": func(p string) { writeFile(t, p, 1080, []byte{0x53, 0xEF}) },
		"GPT, no CoreStorage": func(p string) {
			writeGPT(t, p, 4<<20, []gptPart{{"0FC63DAF-8483-4772-8E79-3D69D8477DE4", 2048, 4096}})
		},
	} {
		t.Run(name, func(t *testing.T) {
			size := int64(4 << 20)
			if fill == nil {
				size = 100
			}
			path := newSparse(t, size)
			if fill != nil {
				fill(path)
			}
			img := openImage(t, path)
			if (Format{}).Probe(img.File, img.Size) {
				t.Error("Probe claims it")
			}
			if err := (Format{}).Explain(img.File, img.Size); err != nil {
				t.Errorf("Explain: %v", err)
			}
			_, err := (Format{}).Open(img, nil)
			if !errors.Is(err, disk.ErrNotFormat) || disk.KindOf(err) != disk.KindInput {
				t.Errorf("Open: %v (kind %v)", err, disk.KindOf(err))
			}
		})
	}
}

// TestDamagedMetadata: a structure whose checksum fails, or whose offsets
// point outside the volume, is refused as damaged (KindIntegrity), never
// read past.
func TestDamagedMetadata(t *testing.T) {
	for name, damage := range map[string]func(t *testing.T, path string){
		"PV header byte": func(t *testing.T, p string) { writeFile(t, p, 200, []byte{1}) },
		"disk label byte": func(t *testing.T, p string) {
			writeFile(t, p, 4096+300, []byte{1})
		},
		"encrypted block byte": func(t *testing.T, p string) {
			writeFile(t, p, sampleEncFirst*4096+8192+1000, []byte{1})
		},
		"disk label past the volume": func(t *testing.T, p string) {
			editPV(t, p, func(b []byte) { binary.LittleEndian.PutUint64(b[104:], 1<<40) })
		},
		"block size 3000": func(t *testing.T, p string) {
			editPV(t, p, func(b []byte) { binary.LittleEndian.PutUint32(b[96:], 3000) })
		},
		"encrypted metadata past the volume": func(t *testing.T, p string) {
			writeFile(t, p, 4096+8192+32, le64bytes(131000))
		},
		"encrypted metadata of 2^63 blocks": func(t *testing.T, p string) {
			writeFile(t, p, 4096+8192+8, le64bytes(1<<63))
		},
		"descriptor past the metadata": func(t *testing.T, p string) {
			editLabel(t, p, func(b []byte) { binary.LittleEndian.PutUint32(b[220:], 4194300) })
		},
	} {
		t.Run(name, func(t *testing.T) {
			path := sampleImage(t)
			damage(t, path)
			_, err := (Format{}).Open(openImage(t, path), nil)
			t.Logf("Open: %v", err)
			if disk.KindOf(err) != disk.KindIntegrity {
				t.Fatalf("Open: %v (kind %v), want an integrity error", err, disk.KindOf(err))
			}
		})
	}
}

func le64bytes(n uint64) []byte { return binary.LittleEndian.AppendUint64(nil, n) }

// editPV changes the PV header and fixes its checksum: only the bounds
// stand between the change and the reads.
func editPV(t testing.TB, path string, edit func([]byte)) {
	t.Helper()
	b := readAt(t, path, 0, 512)
	edit(b)
	setChecksum(b)
	writeFile(t, path, 0, b)
}

func editLabel(t testing.TB, path string, edit func([]byte)) {
	t.Helper()
	b := readAt(t, path, 4096, mdBlockSize)
	edit(b)
	setChecksum(b)
	writeFile(t, path, 4096, b)
}

func readAt(t testing.TB, path string, off int64, n int) []byte {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := make([]byte, n)
	if _, err := f.ReadAt(b, off); err != nil {
		t.Fatal(err)
	}
	return b
}

// TestRefusedBeforePrompt: what cannot be unlocked or served is refused
// by Check, before anyone is asked for a passphrase, with its reason.
func TestRefusedBeforePrompt(t *testing.T) {
	type tc struct {
		edit     func(t *testing.T, path string)
		testOnly bool // the passphrase can still be checked
		kind     disk.Kind
		want     string // in the error
	}
	for name, c := range map[string]tc{
		"conversion in progress": {
			edit:     func(t *testing.T, p string) { editXML(t, p, 1, ">Complete<", ">Converting<") },
			testOnly: true, kind: disk.KindInput, want: `conversion status "Converting"`,
		},
		"compressed encryption context": {
			edit: func(t *testing.T, p string) {
				editBlock(t, p, 1, func(b []byte) { binary.LittleEndian.PutUint32(b[104:], 1000) })
			},
			kind: disk.KindInput, want: "compressed",
		},
		"no passphrase-wrapped key": {
			edit: func(t *testing.T, p string) {
				editXML(t, p, 1, "PassphraseWrappedKEKStruct", "AsymmetricWrappedKEKStruct")
			},
			kind: disk.KindInput, want: "no crypto user",
		},
		"PBKDF2 salt of 20 bytes": {
			edit: func(t *testing.T, p string) {
				editPWK(t, p, func(s []byte) { binary.LittleEndian.PutUint32(s[4:], 20) })
			},
			kind: disk.KindInput, want: "no crypto user",
		},
		"no extent map": {
			edit: func(t *testing.T, p string) {
				editBlock(t, p, 0, func(b []byte) { binary.LittleEndian.PutUint16(b[10:], 0x0999) })
			},
			testOnly: true, kind: disk.KindIntegrity, want: "no extent map",
		},
		"newer extent map": {
			edit: func(t *testing.T, p string) {
				editBlock(t, p, 0, func(b []byte) { binary.LittleEndian.PutUint16(b[10:], typeSegments505) })
			},
			testOnly: true, kind: disk.KindInput, want: "0x0505",
		},
		"extent map short of the volume": {
			edit: func(t *testing.T, p string) {
				editBlock(t, p, 0, func(b []byte) { binary.LittleEndian.PutUint32(b[72+16:], 40959) })
			},
			testOnly: true, kind: disk.KindIntegrity, want: "covers 40959 of its 40960 blocks",
		},
		"extent past the volume": {
			edit: func(t *testing.T, p string) {
				editBlock(t, p, 0, func(b []byte) { binary.LittleEndian.PutUint32(b[72+32:], 100000) })
			},
			testOnly: true, kind: disk.KindIntegrity, want: "outside the 131062-block physical volume",
		},
		"extent map with 4000 entries": {
			edit: func(t *testing.T, p string) {
				editBlock(t, p, 0, func(b []byte) { binary.LittleEndian.PutUint32(b[64:], 4000) })
			},
			testOnly: true, kind: disk.KindIntegrity, want: "4000 entries",
		},
		"logical volume larger than the physical": {
			edit:     func(t *testing.T, p string) { editXML(t, p, 3, ">0xa000000<", ">0x40000000<") },
			testOnly: true, kind: disk.KindIntegrity, want: "no usable size",
		},
		"truncated image": {
			edit: func(t *testing.T, p string) {
				if err := os.Truncate(p, sampleLVOffset+4096); err != nil {
					t.Fatal(err)
				}
			},
			testOnly: true, kind: disk.KindInput, want: "truncated",
		},
		"two logical volumes": {
			edit: func(t *testing.T, p string) {
				editXML(t, p, 2, "E82EC3B4-6FA6-4A43-AA98-ECA628DD3941", "E82EC3B4-6FA6-4A43-AA98-ECA628DD3942")
			},
			testOnly: true, kind: disk.KindInput, want: "several logical volumes",
		},
	} {
		t.Run(name, func(t *testing.T) {
			path := sampleImage(t)
			c.edit(t, path)
			h := openHeader(t, path)
			_, err := h.Check(req())
			t.Logf("Check: %v", err)
			if err == nil || disk.KindOf(err) != c.kind || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Check: %v (kind %v), want kind %v with %q", err, disk.KindOf(err), c.kind, c.want)
			}
			if c.kind == disk.KindInput && !errors.Is(err, disk.ErrUnsupported) && !strings.Contains(c.want, "truncated") {
				t.Errorf("%v does not wrap ErrUnsupported", err)
			}
			rep, _ := h.Report(disk.ReportOptions{})
			if d := rep.Doc.(reportDoc); d.Unservable == "" && d.Unusable == "" {
				t.Error("info does not say why")
			}
			r := req()
			r.TestOnly = true
			u, err := unlock(t, h, r, samplePass)
			if c.testOnly {
				if err != nil || u.Unservable == "" {
					t.Errorf("test-only unlock: %v, unservable %q", err, u.Unservable)
				}
				if _, err := unlock(t, h, r, "wrong"); !errors.Is(err, disk.ErrWrongSecret) {
					t.Errorf("test-only unlock, wrong passphrase: %v", err)
				}
			} else if err == nil {
				t.Error("test-only unlock succeeded without a usable key")
			}
		})
	}
}

// editPWK changes the sample's decoded PassphraseWrappedKEKStruct.
func editPWK(t testing.TB, path string, edit func(s []byte)) {
	t.Helper()
	editData(t, path, 1, "PassphraseWrappedKEKStruct", edit)
}

// editData changes the decoded <data> value of key in the plist of
// encrypted metadata block i.
func editData(t testing.TB, path string, i int, key string, edit func(s []byte)) {
	t.Helper()
	editBlock(t, path, i, func(b []byte) {
		off, size := le32(b[112:]), le32(b[116:])
		x := string(b[off : off+size])
		_, rest, ok := strings.Cut(x, "<key>"+key+"</key><data")
		if !ok {
			t.Fatalf("no <data> for %s", key)
		}
		_, rest, _ = strings.Cut(rest, ">")
		val, _, _ := strings.Cut(rest, "</data>")
		d, err := base64.StdEncoding.DecodeString(val)
		if err != nil {
			t.Fatal(err)
		}
		edit(d)
		x = strings.Replace(x, val, base64.StdEncoding.EncodeToString(d), 1)
		if len(x) != int(size) {
			t.Fatal("editData changed the plist's length")
		}
		copy(b[off:], x)
	})
}
