package bitlk

import (
	"crypto/aes"
	"crypto/sha256"
	"encoding/binary"
	"hash/crc32"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"unicode/utf16"

	xxts "golang.org/x/crypto/xts"

	"github.com/xtsctl/xtsctl/disk"
	"github.com/xtsctl/xtsctl/sector"
)

// A test image builder: BitLocker volumes that no sample has (other
// methods, 4096-byte sectors, To Go, non-ASCII passwords, a clear key,
// TPM-only, states, version 1), written as the fact sheet describes
// Windows writing them. XTS data is encrypted with golang.org/x/crypto's
// XTS, not ours; the images are checked against dislocker and libbde
// (peers_test.go), so that the builder is not only our own reading of the
// format.

type protSpec struct {
	protection uint16
	secret     string // password or recovery password
	guid       guid
	// utf16 replaces the password's UTF-16LE bytes (to build what another
	// implementation's hashing opens).
	utf16 []byte
}

type buildSpec struct {
	method      uint16
	sectorSize  int
	toGo        bool
	version1    bool
	eow         bool
	state       [2]uint16 // current, next; zero means 4, 4
	size        int64     // of the image; 0 means 8 MiB
	protectors  []protSpec
	description string
	serial      uint64 // of the NTFS boot sector in the plaintext
	seed        uint64
}

type built struct {
	path   string
	plain  []byte   // the device as Windows sees it
	bek    []byte   // the startup key file, if a protector has one
	vmk    []byte   // the volume master key
	fvek   []byte   // the FVEK datum's key bytes
	guid   guid     // the volume's
	prots  []guid   // the protectors' GUIDs, in order
	meta   [3]int64 // metadata offsets
	hdrOff int64
	hdrLen int64
}

type builder struct {
	r   *rand.Rand
	vmk []byte
}

func (b *builder) bytes(n int) []byte {
	out := make([]byte, n)
	for i := range out {
		out[i] = byte(b.r.Uint32())
	}
	return out
}

func (b *builder) guid() guid { return guid(b.bytes(16)) }

// entry serialises one datum.
func mkEntry(typ, value, version uint16, data ...[]byte) []byte {
	n := entryHeaderSize
	for _, d := range data {
		n += len(d)
	}
	out := make([]byte, entryHeaderSize, n)
	binary.LittleEndian.PutUint16(out, uint16(n))
	binary.LittleEndian.PutUint16(out[2:], typ)
	binary.LittleEndian.PutUint16(out[4:], value)
	binary.LittleEndian.PutUint16(out[6:], version)
	for _, d := range data {
		out = append(out, d...)
	}
	return out
}

func u16(v uint16) []byte { return binary.LittleEndian.AppendUint16(nil, v) }
func u32(v uint32) []byte { return binary.LittleEndian.AppendUint32(nil, v) }
func u64(v uint64) []byte { return binary.LittleEndian.AppendUint64(nil, v) }

func utf16le(s string) []byte {
	var out []byte
	for _, u := range utf16.Encode([]rune(s)) {
		out = binary.LittleEndian.AppendUint16(out, u)
	}
	return out
}

// sealDatum AES-CCM encrypts plaintext with key into a value-5 datum
// body: nonce, tag, ciphertext.
func (b *builder) sealDatum(t testing.TB, key, plaintext []byte) []byte {
	blk, err := aes.NewCipher(key)
	if err != nil {
		t.Fatal(err)
	}
	c, _ := newCCM(blk, ccmNonceSize, ccmTagSize)
	nonce := b.bytes(ccmNonceSize)
	sealed := c.Seal(nil, nonce, plaintext, nil)
	ct, tag := sealed[:len(plaintext)], sealed[len(plaintext):]
	return append(append(nonce, tag...), ct...)
}

// keyDatum is a decrypted key datum: size, type 0, value 1, version 1,
// method, key.
func keyDatum(method uint32, key []byte) []byte {
	return append(append(u16(uint16(keyDatumHeaderSize+len(key))), append(append(u16(0), u16(valueKey)...), append(u16(1), u32(method)...)...)...), key...)
}

// stretchedKey derives a protector's key as Windows does (the package's
// own stretch; the samples check it against Windows).
func stretchedKey(t testing.TB, secret string, recovery bool, salt, utf16 []byte) []byte {
	var initial *[32]byte
	switch {
	case utf16 != nil:
		h := sha256.Sum256(utf16)
		initial = new([32]byte)
		*initial = sha256.Sum256(h[:])
	case recovery:
		k, ok, err := recoveryKey([]byte(secret))
		if !ok || err != nil {
			t.Fatalf("builder: bad recovery password %q", secret)
		}
		initial = recoveryHash(k)
	default:
		var err error
		if initial, err = passwordHash([]byte(secret)); err != nil {
			t.Fatal(err)
		}
	}
	k, err := stretch(t.Context(), initial, (*[16]byte)(salt))
	if err != nil {
		t.Fatal(err)
	}
	return k[:]
}

// buildImage writes spec's image into dir.
func buildImage(t testing.TB, dir string, spec buildSpec) *built {
	t.Helper()
	b := &builder{r: rand.New(rand.NewPCG(spec.seed, 77))}
	ss := int64(spec.sectorSize)
	if ss == 0 {
		ss = 512
	}
	size := spec.size
	if size == 0 {
		size = 8 << 20
	}
	out := &built{guid: b.guid(), meta: [3]int64{1 << 20, 3 << 20, 5 << 20}}
	out.hdrOff = out.meta[0] + metadataArea
	out.hdrLen = 8192
	if spec.toGo {
		out.hdrLen = 64 << 10
	}
	b.vmk = b.bytes(vmkSize)
	out.vmk = b.vmk
	meth, ok := lookupMethod(spec.method)
	if !ok {
		meth = method{id: spec.method, fvek: 32, key: 32}
	}
	out.fvek = b.bytes(meth.fvek)
	if spec.method == 0x8000 {
		clear(out.fvek[16:32])
		clear(out.fvek[48:64])
	}

	// The plaintext device: random, an NTFS boot sector first, zeros in
	// the metadata areas and where the boot sectors were moved to.
	plain := b.bytes(int(size))
	boot := plain[:512]
	clear(boot)
	copy(boot, "\xeb\x52\x90NTFS    ")
	binary.LittleEndian.PutUint16(boot[11:], uint16(ss))
	boot[13] = 8
	binary.LittleEndian.PutUint64(boot[0x48:], spec.serial)
	boot[510], boot[511] = 0x55, 0xaa
	for _, o := range out.meta {
		clear(plain[o : o+metadataArea])
	}
	clear(plain[out.hdrOff : out.hdrOff+out.hdrLen])
	out.plain = plain

	// The metadata entries.
	var entries []byte
	if spec.description != "" {
		entries = append(entries, mkEntry(entryDescription, valueString, 1, utf16le(spec.description))...)
	}
	for _, p := range spec.protectors {
		g := p.guid
		if g == (guid{}) {
			g = b.guid()
		}
		out.prots = append(out.prots, g)
		var nested []byte
		switch p.protection {
		case protPassword, protRecovery:
			salt := b.bytes(16)
			m := uint32(stretchPassword)
			if p.protection == protRecovery {
				m = stretchRecovery
			}
			inner := mkEntry(0, valueAESCCM, 1, b.bytes(ccmNonceSize+ccmTagSize+44))
			nested = append(nested, mkEntry(0, valueStretchKey, 1, u32(m), salt, inner)...)
			key := stretchedKey(t, p.secret, p.protection == protRecovery, salt, p.utf16)
			nested = append(nested, mkEntry(0, valueAESCCM, 1, b.sealDatum(t, key, keyDatum(methodVMK, b.vmk)))...)
		case protStartupKey:
			bekKey := b.bytes(32)
			nested = append(nested, mkEntry(0, valueString, 1, utf16le("ExternalKey\x00"))...)
			nested = append(nested, mkEntry(0, 4, 1, u32(0x2002), b.bytes(40))...) // use key
			nested = append(nested, mkEntry(0, valueAESCCM, 1, b.sealDatum(t, bekKey, keyDatum(methodVMK, b.vmk)))...)
			ext := append(append(append([]byte{}, g[:]...), u64(0x01d5363236000000)...),
				append(mkEntry(0, valueString, 1, utf16le("ExternalKey\x00")), mkEntry(0, valueKey, 1, u32(0x2002), bekKey)...)...)
			body := mkEntry(entryStartupKey, valueExternalKey, 1, ext)
			hdr := append(append(append(u32(uint32(metaHeaderSize+len(body))), u32(1)...), append(u32(metaHeaderSize), u32(uint32(metaHeaderSize+len(body)))...)...), g[:]...)
			hdr = append(append(append(hdr, u32(1)...), append(u16(0x8000), u16(0)...)...), u64(0x01d5363236000000)...)
			out.bek = append(hdr, body...)
		case protClearKey:
			clearKey := b.bytes(32)
			nested = append(nested, mkEntry(0, valueKey, 1, u32(methodVMK), clearKey)...)
			nested = append(nested, mkEntry(0, valueAESCCM, 1, b.sealDatum(t, clearKey, keyDatum(methodVMK, b.vmk)))...)
		default: // TPM and the rest: a TPM blob the volume cannot use here
			nested = append(nested, mkEntry(0, 6, 1, b.bytes(200))...)
			nested = append(nested, mkEntry(0, valueAESCCM, 1, b.bytes(ccmNonceSize+ccmTagSize+44))...)
		}
		version := uint16(1)
		if p.protection == protClearKey {
			version = 3
		}
		vmkHdr := append(append(append([]byte{}, g[:]...), u64(0x01d5363236000000)...), append(u16(0), u16(p.protection)...)...)
		entries = append(entries, mkEntry(entryVMK, valueVMK, version, vmkHdr, nested)...)
	}
	entries = append(entries, mkEntry(entryFVEK, valueAESCCM, 1, b.sealDatum(t, b.vmk, keyDatum(uint32(spec.method), out.fvek)))...)
	entries = append(entries, mkEntry(entryVolumeHeader, valueOffsetSize, 1, u64(uint64(out.hdrOff)), u64(uint64(out.hdrLen)))...)

	msize := metaHeaderSize + len(entries)
	s := (blockHeaderSize + msize + 15) &^ 15
	block := make([]byte, s)
	copy(block, sigFVE)
	binary.LittleEndian.PutUint16(block[8:], uint16(s/16))
	binary.LittleEndian.PutUint16(block[10:], 2)
	state := spec.state
	if state == [2]uint16{} {
		state = [2]uint16{stateEncrypted, stateEncrypted}
	}
	binary.LittleEndian.PutUint16(block[12:], state[0])
	binary.LittleEndian.PutUint16(block[14:], state[1])
	binary.LittleEndian.PutUint64(block[16:], uint64(size))
	binary.LittleEndian.PutUint32(block[28:], uint32(out.hdrLen/ss))
	for i, o := range out.meta {
		binary.LittleEndian.PutUint64(block[32+8*i:], uint64(o))
	}
	binary.LittleEndian.PutUint64(block[56:], uint64(out.hdrOff))
	binary.LittleEndian.PutUint32(block[64:], uint32(msize))
	binary.LittleEndian.PutUint32(block[68:], 1)
	binary.LittleEndian.PutUint32(block[72:], metaHeaderSize)
	binary.LittleEndian.PutUint32(block[76:], uint32(msize))
	copy(block[80:], out.guid[:])
	binary.LittleEndian.PutUint32(block[96:], 10)
	binary.LittleEndian.PutUint16(block[100:], spec.method)
	binary.LittleEndian.PutUint64(block[104:], 0x01d5363236000000)
	copy(block[entriesOffset:], entries)
	sum := sha256.Sum256(block)
	valPlain := append(append(u16(44), u16(0)...), append(append(u16(valueKey), u16(1)...), append(append(u16(0x2005), u16(0)...), sum[:]...)...)...)
	validation := append(append(u16(uint16(metadataArea-s)), u16(2)...), u32(crc32.ChecksumIEEE(block))...)
	validation = append(validation, mkEntry(0, valueAESCCM, 1, b.sealDatum(t, b.vmk, valPlain))...)

	// The image: the encrypted device, then the clear parts.
	img := make([]byte, size)
	encrypt := func(at, from, n int64) { // plaintext [from, from+n) to image at, with at's tweaks
		encryptRun(t, spec.method, meth.dmKey(out.fvek), int(ss), img[at:at+n], plain[from:from+n], at)
	}
	if meth.cipher != "" {
		encrypt(out.hdrOff, 0, out.hdrLen)
		zero := [][2]int64{{out.meta[0], metadataArea}, {out.hdrOff, out.hdrLen}, {out.meta[1], metadataArea}, {out.meta[2], metadataArea}}
		at := out.hdrLen
		for _, z := range zero {
			if z[0] > at {
				encrypt(at, at, z[0]-at)
			}
			at = z[0] + z[1]
		}
		encrypt(at, at, size-at)
	}
	for _, o := range out.meta {
		copy(img[o:], block)
		copy(img[o+int64(s):], validation)
	}
	vboot := img[:512]
	clear(img[:out.hdrLen])
	switch {
	case spec.toGo:
		copy(vboot, "\xeb\x58\x90MSWIN4.1")
		copy(vboot[424:], infoGUIDNormal[:])
		if spec.eow {
			copy(vboot[424:], infoGUIDEOW[:])
		}
		for i, o := range out.meta {
			binary.LittleEndian.PutUint64(vboot[440+8*i:], uint64(o))
		}
	default:
		copy(vboot, "\xeb\x58\x90-FVE-FS-")
		if spec.version1 {
			copy(vboot, "\xeb\x52\x90-FVE-FS-")
		}
		copy(vboot[160:], infoGUIDNormal[:])
		if spec.eow {
			copy(vboot[160:], infoGUIDEOW[:])
		}
		for i, o := range out.meta {
			binary.LittleEndian.PutUint64(vboot[176+8*i:], uint64(o))
		}
	}
	binary.LittleEndian.PutUint16(vboot[11:], uint16(ss))
	vboot[13] = 8
	binary.LittleEndian.PutUint16(vboot[14:], 0)
	vboot[21] = 0xf8
	binary.LittleEndian.PutUint64(vboot[32:], uint64(size/ss))
	vboot[510], vboot[511] = 0x55, 0xaa

	out.path = filepath.Join(dir, "built.img")
	if err := os.WriteFile(out.path, img, 0o600); err != nil {
		t.Fatal(err)
	}
	return out
}

// encryptRun encrypts plaintext sectors for the physical byte offset at.
// XTS is golang.org/x/crypto's; the CBC methods are ours (the samples and
// the peers check them).
func encryptRun(t testing.TB, m uint16, key []byte, ss int, dst, src []byte, at int64) {
	t.Helper()
	meth, _ := lookupMethod(m)
	if meth.cipher == disk.XTSPlain64 {
		c, err := xxts.NewCipher(aes.NewCipher, key)
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < len(src); i += ss {
			c.Encrypt(dst[i:i+ss], src[i:i+ss], uint64(at+int64(i))/uint64(ss))
		}
		return
	}
	p := sector.Params{Size: ss, IVOffset: uint64(at) / 512}
	if ss != 512 {
		p.IVMode = sector.Plain64LargeSectors
	}
	c, err := disk.NewCodec(meth.cipher, key, p)
	if err != nil {
		t.Fatal(err)
	}
	c.Encrypt(dst, src, 0)
}
