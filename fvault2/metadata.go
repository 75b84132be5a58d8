package fvault2

import (
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/xtsctl/xtsctl/disk"
	"github.com/xtsctl/xtsctl/sector"
	"github.com/xtsctl/xtsctl/xts"
)

// volume is a CoreStorage physical volume as Open reads it: everything
// info shows and unlocking needs, with no secret.
type volume struct {
	pvOff int64      // where the physical volume starts in the image
	avail int64      // bytes of the image from pvOff on
	part  *partition // the GPT partition it is in; nil at the image's start
	pv    *pvHeader

	vgName   string
	mdBlocks int // encrypted metadata blocks read

	lv       lvInfo
	segs     []segment
	ctx      *encContext
	warnings []string

	// layout is the logical volume's plaintext in the image, when it
	// could be made.
	layout *disk.Layout
	// unservable says why the data cannot be served (nil if it can);
	// unlockable why no passphrase can be tried (nil if some can).
	unservable error
	unlockable error
}

// lvInfo is the logical volume's description (block type 0x001a).
type lvInfo struct {
	Name, UUID, GroupUUID, ContentHint string
	FamilyUUID                         string // as written
	family                             [uuidSize]byte
	Size                               uint64
}

// cryptoUser is one entry of the encryption context's CryptoUsers.
type cryptoUser struct {
	Type       uint64
	HasType    bool
	UUID       string // UserIdent
	KEKUUID    string // KeyEncryptingKeyIdent
	Hint       string // PassphraseHint, as macOS shows it at login
	Salt       []byte
	Iterations uint32
	WrappedKEK []byte
	// Unusable says why no passphrase can open this user (nil if one may).
	Unusable error
}

// volumeKey is one entry of WrappedVolumeKeys.
type volumeKey struct {
	Index     uint64
	HasIndex  bool
	UUID      string // VolumeKeyIdent
	KEKUUID   string
	Algorithm string // BlockAlgorithm
	Wrapped   []byte // the wrapped key; nil for an entry without one
}

// encContext is the encryption context (block type 0x0019).
type encContext struct {
	Users      []cryptoUser
	Keys       []volumeKey
	Default    uint64 // DefaultEncryptionContext: the VolumeKeyIndex in use
	HasDefault bool
	Conversion string // ConversionInfo's ConversionStatus; "" if none
	FamilyUUID string // com.apple.corestorage.lvf.uuid
	GroupUUID  string
}

// The passphrase-wrapped KEK structure, as cryptsetup and libfvde read
// it: u32 salt type (3), u32 salt size (16), salt, u32 KEK type (0x10),
// u32 KEK size (24), the wrapped KEK, ..., u32 PBKDF2 iterations at 168.
const (
	pwkSize        = 284
	pwkSaltType    = 3
	pwkKEKType     = 0x10
	wrappedKeySize = 24 // RFC 3394 of a 16-byte key
	kwvkMinSize    = 8 + wrappedKeySize
	conversionDone = "Complete"
	readOnlyReason = "FileVault 2 images are served read-only (xtsctl does not write CoreStorage)"
	xtsKeyBits     = 256 // AES-XTS-128: two 128-bit keys
	lvSectorSize   = 512
)

// readVolume reads the physical volume at pvOff of r (avail bytes from
// there to the image's end), its metadata, and decrypts the encrypted
// metadata. It fails for what is not CoreStorage (errNoPV), a structure
// that fails a check (*corruptError) or a read error; what only stops the
// volume from being unlocked or served is recorded in the volume.
func readVolume(r io.ReaderAt, pvOff, avail int64) (*volume, error) {
	hb := make([]byte, pvHeaderSize)
	if avail < pvHeaderSize || readFull(r, hb, pvOff) != nil {
		return nil, errNoPV
	}
	pv, err := parsePVHeader(hb)
	if err != nil {
		return nil, err
	}
	v := &volume{pvOff: pvOff, avail: avail, pv: pv}
	if pv.Size > uint64(avail) {
		v.unservable = fmt.Errorf("the image is truncated: the physical volume is %d bytes, the image holds %d of them", pv.Size, avail)
	}
	read := func(n int, off int64, what string) ([]byte, error) {
		b := make([]byte, n)
		if off > avail-int64(n) {
			return nil, corrupt("%s (%d bytes at byte %d of the physical volume) lies past the end of the image", what, n, off)
		}
		if err := readFull(r, b, pvOff+off); err != nil {
			return nil, fmt.Errorf("%s: %w", what, err)
		}
		return b, nil
	}

	labelOff, ok := pv.blockOffset(pv.LabelBlock, uint64(pv.MetadataSize))
	if !ok {
		return nil, corrupt("the CoreStorage disk label (block %d) lies outside the %d-byte physical volume", pv.LabelBlock, pv.Size)
	}
	lb, err := read(mdBlockSize, labelOff, "the CoreStorage disk label")
	if err != nil {
		return nil, err
	}
	label, err := parseDiskLabel(lb, pv)
	if err != nil {
		return nil, err
	}
	vb, err := read(vgdSize, labelOff+int64(label.VGDOffset), "the CoreStorage volume groups descriptor")
	if err != nil {
		return nil, err
	}
	vgd := parseVGDescriptor(vb)
	v.readLabelXML(r, labelOff, label)

	if err := v.readEncrypted(read, vgd); err != nil {
		return nil, err
	}
	v.finish()
	return v, nil
}

// readLabelXML reads the volume group's name from the disk label's plist,
// which lies outside the label's checksum and which cryptsetup's sample
// has blanked: it is shown when it can be read, never needed.
func (v *volume) readLabelXML(r io.ReaderAt, labelOff int64, l *diskLabel) {
	if l.XMLSize == 0 || l.XMLSize > maxLabelXML || l.XMLOffset < mdHeaderSize ||
		uint64(l.XMLOffset)+uint64(l.XMLSize) > uint64(v.pv.MetadataSize) {
		return
	}
	off := labelOff + int64(l.XMLOffset)
	if off > v.avail-int64(l.XMLSize) {
		return
	}
	b := make([]byte, l.XMLSize)
	if readFull(r, b, v.pvOff+off) != nil {
		return
	}
	if i := bytes.IndexByte(b, 0); i >= 0 {
		b = b[:i]
	}
	if len(bytes.TrimSpace(b)) == 0 {
		return
	}
	p, err := parsePlist(b)
	if err != nil {
		v.warnings = append(v.warnings, fmt.Sprintf("the disk label's plist is unreadable (%v): the volume group's name is not shown", err))
		return
	}
	v.vgName, _ = p.getString(p.root, "com.apple.corestorage.lvg.name")
}

// best is the latest block of one type: the highest transaction, the
// later of equal ones.
type best struct {
	found bool
	tx    uint64
	index int
	block []byte
}

func (b *best) offer(h mdHeader, index int, block []byte) {
	if b.found && h.Transaction < b.tx {
		return
	}
	b.found, b.tx, b.index = true, h.Transaction, index
	b.block = append(b.block[:0], block...)
}

// readEncrypted scans the encrypted metadata: each 8 KiB block is one
// AES-XTS-128 unit (tweak = its index) under key data ‖ PV UUID; the scan
// stops at the first all-zero block, as cryptsetup and libfvde do.
func (v *volume) readEncrypted(read func(int, int64, string) ([]byte, error), vgd vgDescriptor) error {
	bs := uint64(v.pv.BlockSize)
	if vgd.EncBlocks == 0 || vgd.EncBlocks > maxEncMetadata/bs {
		return corrupt("the CoreStorage volume groups descriptor gives %d blocks of encrypted metadata (at most %d)", vgd.EncBlocks, maxEncMetadata/bs)
	}
	encOff, ok := v.pv.blockOffset(vgd.EncFirst, vgd.EncBlocks*bs)
	if !ok {
		return corrupt("the encrypted metadata (%d blocks at block %d) lies outside the %d-byte physical volume", vgd.EncBlocks, vgd.EncFirst, v.pv.Size)
	}
	key := make([]byte, 32)
	copy(key, v.pv.KeyData[:])
	copy(key[16:], v.pv.PVUUID[:])
	c, err := xts.NewCipher(key)
	clear(key)
	if err != nil {
		return corrupt("the CoreStorage metadata key: %v", err)
	}
	defer c.Wipe()

	var segs, ctx, lv best
	var lvUUIDs []string
	var newerExtentMap uint16
	plain := make([]byte, mdBlockSize)
	n := int(vgd.EncBlocks * bs / mdBlockSize)
	for i := range n {
		what := fmt.Sprintf("encrypted metadata block %d", i)
		ct, err := read(mdBlockSize, encOff+int64(i)*mdBlockSize, what)
		if err != nil {
			return err
		}
		if allZero(ct) {
			break
		}
		c.Decrypt(plain, ct, uint64(i))
		if string(plain[:8]) == "LVFwiped" {
			continue // a block CoreStorage blanked; libfvde skips it too
		}
		h, err := checkMDBlock(plain, what)
		if err != nil {
			return err
		}
		v.mdBlocks++
		switch h.Type {
		case typeSegments:
			segs.offer(h, i, plain)
		case typeEncContext:
			ctx.offer(h, i, plain)
		case typeLVInfo:
			lv.offer(h, i, plain)
			// Logical volumes are told apart by their UUIDs; a family of
			// several is not something this package serves.
			if x, err := lvInfoXML(plain); err == nil {
				if p, err := parsePlist(x); err == nil {
					if u, ok := p.getString(p.root, "com.apple.corestorage.lv.uuid"); ok && !slices.Contains(lvUUIDs, u) && len(lvUUIDs) < 2 {
						lvUUIDs = append(lvUUIDs, u)
					}
				}
			}
		case typeSegments405, typeSegments505:
			newerExtentMap = h.Type
		}
	}

	switch {
	case !ctx.found:
		v.unlockable = unsupported("this CoreStorage volume has no encryption context: it is not encrypted with FileVault 2 (a plain CoreStorage or Fusion Drive volume)")
	default:
		if err := v.parseContext(ctx.block, ctx.index); err != nil {
			v.unlockable = err
		}
	}
	switch {
	case len(lvUUIDs) > 1:
		v.addUnservable(unsupported("the CoreStorage family holds several logical volumes (%s, ...): xtsctl serves one", lvUUIDs[0]))
	case !lv.found:
		v.addUnservable(corrupt("no logical volume description (block type %#04x) in the encrypted metadata", typeLVInfo))
	default:
		if err := v.parseLV(lv.block, lv.index); err != nil {
			v.addUnservable(err)
		}
	}
	switch {
	case segs.found:
		s, err := parseSegments(segs.block)
		if err != nil {
			v.addUnservable(fmt.Errorf("encrypted metadata block %d: %w", segs.index, err))
		}
		v.segs = s
	case newerExtentMap != 0:
		v.addUnservable(unsupported("the logical volume's extents are in a CoreStorage block of type %#04x, which xtsctl does not read (it reads %#04x)", newerExtentMap, typeSegments))
	default:
		v.addUnservable(corrupt("no extent map (block type %#04x) in the encrypted metadata", typeSegments))
	}
	return nil
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

func (v *volume) addUnservable(err error) {
	if v.unservable == nil {
		v.unservable = err
	}
}

// parseLV reads the logical volume's plist: its size and family UUID
// are needed, the rest is shown.
func (v *volume) parseLV(block []byte, index int) error {
	x, err := lvInfoXML(block)
	if err != nil {
		return fmt.Errorf("encrypted metadata block %d: %w", index, err)
	}
	p, err := parsePlist(x)
	if err != nil {
		return corrupt("the logical volume description (encrypted metadata block %d): %v", index, err)
	}
	d := p.root
	v.lv.Name, _ = p.getString(d, "com.apple.corestorage.lv.name")
	v.lv.UUID, _ = p.getString(d, "com.apple.corestorage.lv.uuid")
	v.lv.GroupUUID, _ = p.getString(d, "com.apple.corestorage.lv.groupUUID")
	v.lv.ContentHint, _ = p.getString(d, "com.apple.corestorage.lv.contenthint")
	v.lv.FamilyUUID, _ = p.getString(d, "com.apple.corestorage.lv.familyUUID")
	size, ok := p.getInt(d, "com.apple.corestorage.lv.size")
	if !ok || size == 0 || size%lvSectorSize != 0 || size > v.pv.Size {
		return corrupt("the logical volume description gives no usable size (%d bytes, in a %d-byte physical volume)", size, v.pv.Size)
	}
	v.lv.Size = size
	fam, err := parseUUID(v.lv.FamilyUUID)
	if err != nil {
		return corrupt("the logical volume description's family UUID: %v", err)
	}
	v.lv.family = fam
	return nil
}

// parseContext reads the encryption context plist.
func (v *volume) parseContext(block []byte, index int) error {
	x, err := encContextXML(block)
	if err != nil {
		return err
	}
	p, err := parsePlist(x)
	if err != nil {
		return corrupt("the encryption context (encrypted metadata block %d): %v", index, err)
	}
	root := p.root
	ec := p.get(root, "com.apple.corestorage.lvf.encryption.context")
	if ec == nil || ec.kind != plDict {
		return corrupt("the encryption context (encrypted metadata block %d) has no com.apple.corestorage.lvf.encryption.context", index)
	}
	ctx := &encContext{}
	ctx.FamilyUUID, _ = p.getString(root, "com.apple.corestorage.lvf.uuid")
	ctx.GroupUUID, _ = p.getString(root, "com.apple.corestorage.lvf.groupUUID")
	ctx.Default, ctx.HasDefault = p.getInt(root, "DefaultEncryptionContext")
	if ci := p.get(ec, "ConversionInfo"); ci != nil {
		ctx.Conversion, _ = p.getString(ci, "ConversionStatus")
	}
	for _, u := range p.getArray(ec, "CryptoUsers") {
		ctx.Users = append(ctx.Users, parseUser(p, u))
	}
	for _, k := range p.getArray(ec, "WrappedVolumeKeys") {
		vk := volumeKey{}
		vk.Index, vk.HasIndex = p.getInt(k, "VolumeKeyIndex")
		vk.UUID, _ = p.getString(k, "VolumeKeyIdent")
		vk.KEKUUID, _ = p.getString(k, "KeyEncryptingKeyIdent")
		vk.Algorithm, _ = p.getString(k, "BlockAlgorithm")
		// KEKWrappedVolumeKeyStruct: u32 type, u32 size (24), the wrapped
		// key. An empty one is the context before encryption.
		if s, ok := p.getData(k, "KEKWrappedVolumeKeyStruct"); ok && len(s) >= kwvkMinSize && le32(s[4:]) == wrappedKeySize {
			vk.Wrapped = bytes.Clone(s[8 : 8+wrappedKeySize])
		}
		ctx.Keys = append(ctx.Keys, vk)
	}
	v.ctx = ctx
	return nil
}

func parseUser(p *plist, u *plistValue) cryptoUser {
	cu := cryptoUser{}
	cu.Type, cu.HasType = p.getInt(u, "UserType")
	cu.UUID, _ = p.getString(u, "UserIdent")
	cu.KEKUUID, _ = p.getString(u, "KeyEncryptingKeyIdent")
	cu.Hint, _ = p.getString(u, "PassphraseHint")
	s, ok := p.getData(u, "PassphraseWrappedKEKStruct")
	switch {
	case !ok || len(s) == 0:
		cu.Unusable = unsupported("no passphrase-wrapped key (an institutional or hardware key)")
	case len(s) != pwkSize:
		cu.Unusable = unsupported("a passphrase-wrapped key structure of %d bytes (xtsctl reads %d)", len(s), pwkSize)
	case le32(s) != pwkSaltType || le32(s[4:]) != 16:
		cu.Unusable = unsupported("a PBKDF2 salt of type %d and %d bytes (xtsctl reads type %d, 16 bytes)", le32(s), le32(s[4:]), pwkSaltType)
	case le32(s[24:]) != pwkKEKType || le32(s[28:]) != wrappedKeySize:
		cu.Unusable = unsupported("a wrapped KEK of type %#x and %d bytes (xtsctl reads type %#x, %d bytes: AES-128)", le32(s[24:]), le32(s[28:]), pwkKEKType, wrappedKeySize)
	default:
		cu.Salt = bytes.Clone(s[8:24])
		cu.WrappedKEK = bytes.Clone(s[32 : 32+wrappedKeySize])
		cu.Iterations = le32(s[168:])
		if cu.Iterations == 0 {
			cu.Unusable = corrupt("a PBKDF2 count of 0 iterations")
		}
	}
	return cu
}

// finish checks what was read against itself and makes the layout.
func (v *volume) finish() {
	if v.ctx != nil {
		if !slices.ContainsFunc(v.ctx.Users, func(u cryptoUser) bool { return u.Unusable == nil }) && v.unlockable == nil {
			why := []string{}
			for i, u := range v.ctx.Users {
				why = append(why, fmt.Sprintf("crypto user %d has %v", i, u.Unusable))
			}
			if len(why) == 0 {
				why = append(why, "the encryption context lists no crypto user")
			}
			v.unlockable = unsupported("no crypto user of this volume has a passphrase-wrapped key xtsctl can use (%s)", strings.Join(why, "; "))
		}
		if !slices.ContainsFunc(v.ctx.Keys, func(k volumeKey) bool { return k.Wrapped != nil }) && v.unlockable == nil {
			v.unlockable = unsupported("the encryption context holds no wrapped volume key")
		}
		if c := v.ctx.Conversion; c != "" && c != conversionDone {
			v.addUnservable(unsupported("FileVault is still converting this volume (conversion status %q): part of it is not encrypted yet; let macOS finish (or revert) the conversion first", c))
		}
		if f := v.ctx.FamilyUUID; f != "" && v.lv.FamilyUUID != "" && !strings.EqualFold(f, v.lv.FamilyUUID) {
			v.warnings = append(v.warnings, fmt.Sprintf("the encryption context belongs to family %s, the logical volume to family %s", f, v.lv.FamilyUUID))
		}
	}
	if g := v.lv.GroupUUID; g != "" && !strings.EqualFold(g, formatUUID(v.pv.VGUUID)) {
		v.warnings = append(v.warnings, fmt.Sprintf("the logical volume belongs to volume group %s, the physical volume to %s", g, formatUUID(v.pv.VGUUID)))
	}
	if v.unservable != nil && v.lv.Size == 0 {
		return
	}
	l, warn, err := v.makeLayout()
	v.warnings = append(v.warnings, warn...)
	if err != nil {
		v.addUnservable(err)
		return
	}
	v.layout = &l
}

// makeLayout maps the logical volume onto the image: its extents sorted
// by their place in the logical volume, which they must cover from its
// first block, each inside the physical volume. Tweaks count 512-byte
// sectors from the logical volume's start, so an extent at logical byte
// x starts at sector x/512.
func (v *volume) makeLayout() (disk.Layout, []string, error) {
	if v.lv.Size == 0 || len(v.segs) == 0 {
		return disk.Layout{}, nil, errors.New("no logical volume to map")
	}
	bs := uint64(v.pv.BlockSize)
	pvBlocks := v.pv.Size / bs
	lvBlocks := (v.lv.Size + bs - 1) / bs
	segs := slices.Clone(v.segs)
	slices.SortStableFunc(segs, func(a, b segment) int {
		switch {
		case a.Logical < b.Logical:
			return -1
		case a.Logical > b.Logical:
			return 1
		}
		return 0
	})
	l := disk.Layout{Size: int64(v.lv.Size), SectorSize: lvSectorSize, Cipher: disk.XTSPlain64, KeyBits: xtsKeyBits, ReadOnly: readOnlyReason}
	var warn []string
	var at uint64 // blocks of the logical volume mapped so far
	for i, s := range segs {
		if at >= lvBlocks {
			warn = append(warn, fmt.Sprintf("the extent map has %d extents past the logical volume's %d blocks; they are not served", len(segs)-i, lvBlocks))
			break
		}
		switch {
		case s.Logical != at:
			return disk.Layout{}, nil, corrupt("the logical volume's extent map does not cover block %d (an extent starts at block %d)", at, s.Logical)
		case s.Blocks == 0:
			return disk.Layout{}, nil, corrupt("the logical volume's extent map has an empty extent at block %d", at)
		case s.Physical > pvBlocks || s.Blocks > pvBlocks-s.Physical:
			return disk.Layout{}, nil, corrupt("an extent of the logical volume (%d blocks at block %d) lies outside the %d-block physical volume", s.Blocks, s.Physical, pvBlocks)
		}
		off := s.Logical * bs
		n := min(s.Blocks*bs, v.lv.Size-off)
		src := v.pvOff + int64(s.Physical*bs)
		if k := len(l.Extents) - 1; k >= 0 && l.Extents[k].Source+l.Extents[k].Length == src {
			l.Extents[k].Length += int64(n) // physically contiguous: one extent
		} else {
			l.Extents = append(l.Extents, disk.Extent{
				Offset: int64(off), Length: int64(n), Kind: disk.Crypt, Source: src,
				Sector: sector.Params{Size: lvSectorSize, IVMode: sector.Plain64, IVOffset: off / lvSectorSize},
			})
		}
		at += s.Blocks
	}
	if at < lvBlocks {
		return disk.Layout{}, nil, corrupt("the logical volume's extent map covers %d of its %d blocks", at, lvBlocks)
	}
	if err := l.Check(v.pvOff + v.avail); err != nil {
		return disk.Layout{}, nil, fmt.Errorf("the logical volume does not fit the image (is it truncated?): %w", err)
	}
	return l, warn, nil
}

// parseUUID reads a UUID written with or without dashes into its 16
// bytes in RFC 4122 order (the order FileVault hashes).
func parseUUID(s string) ([uuidSize]byte, error) {
	var u [uuidSize]byte
	h := s
	if len(s) == 36 {
		if s[8] != '-' || s[13] != '-' || s[18] != '-' || s[23] != '-' {
			return u, errors.New("not a UUID")
		}
		h = s[:8] + s[9:13] + s[14:18] + s[19:23] + s[24:]
	}
	if len(h) != 2*uuidSize {
		return u, errors.New("not a UUID")
	}
	if _, err := hex.Decode(u[:], []byte(h)); err != nil {
		return u, errors.New("not a UUID")
	}
	return u, nil
}

// formatUUID writes 16 bytes as a lower-case UUID.
func formatUUID(u [uuidSize]byte) string {
	h := hex.EncodeToString(u[:])
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}
