package tcrypt

// VeraCrypt and TrueCrypt volumes as a format of the format layer.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
	"strconv"
	"strings"

	"github.com/xtsctl/xtsctl/disk"
	"github.com/xtsctl/xtsctl/internal/sysmem"
	"github.com/xtsctl/xtsctl/sector"
)

func init() { disk.Register(Format) }

// FormatName is the --type name; "veracrypt" and "truecrypt" name it too.
const FormatName = "tcrypt"

// The format's options (flag names, without dashes).
const (
	OptHidden = "tcrypt-hidden"
	OptBackup = "tcrypt-backup"
	OptSystem = "tcrypt-system"
	OptPIM    = "veracrypt-pim"
	// OptHash is scoped to the format (not plain --hash), because it
	// names a header KDF to try rather than a hash to compute.
	OptHash = "tcrypt-hash"
)

// Format is VeraCrypt and TrueCrypt volumes with AES.
var Format disk.Format = tcryptFormat{}

type tcryptFormat struct{}

func (tcryptFormat) Info() disk.FormatInfo {
	return disk.FormatInfo{
		Name: FormatName, Aliases: []string{"veracrypt", "truecrypt"}, Title: "a VeraCrypt/TrueCrypt volume",
		Signature: false,
		Options: []disk.Option{
			{Name: OptHidden, Bool: true, Usage: "open the hidden volume (its header at 64 KiB) with its own passphrase"},
			{Name: OptBackup, Bool: true, Usage: "use the backup header at the end of the volume, when the one at its start is damaged"},
			{Name: OptSystem, Bool: true, Usage: "system encryption: the image is the whole drive (header in its first track), or with --header the partition alone"},
			{Name: OptPIM, Value: "N", Usage: "the volume's PIM (VeraCrypt's Personal Iterations Multiplier), if it was made with one"},
			{Name: OptHash, Value: "NAME", Usage: "try only this header KDF: " + hashNames + " (default: every one, in parallel)"},
		},
		KeyFile:           "a keyfile (VeraCrypt's, its first MiB counts); repeat for several",
		MultiKeyFile:      true,
		KeyFileLimit:      KeyFileMax,
		KeyFilePrefix:     true,
		ReportNeedsSecret: true,
		Takes:             []string{"header"},
		SlotNoun:          "header",
	}
}

// Probe is always false: a VeraCrypt or TrueCrypt header is
// indistinguishable from random bytes without its key.
func (tcryptFormat) Probe(io.ReaderAt, int64) bool { return false }

// options are the format's options, parsed.
type options struct {
	hidden, backup, system bool
	pim                    int    // 0: none
	hash                   string // "": every KDF
}

func parseOptions(o disk.Options) (options, error) {
	opt := options{hidden: o.Bool(OptHidden), backup: o.Bool(OptBackup), system: o.Bool(OptSystem)}
	usage := func(format string, args ...any) (options, error) {
		return options{}, disk.WithKind(disk.KindUsage, fmt.Errorf(format, args...))
	}
	switch {
	case opt.system && opt.hidden:
		return usage("--%s and --%s do not go together: xtsctl does not open hidden operating systems", OptSystem, OptHidden)
	case opt.system && opt.backup:
		return usage("--%s and --%s do not go together: a system drive keeps no backup header (VeraCrypt's rescue disk holds it)", OptSystem, OptBackup)
	}
	if o.Has(OptPIM) {
		v := o[OptPIM]
		n, err := strconv.Atoi(v)
		limit := maxPIM
		if opt.system {
			limit = maxBootPIM
		}
		if err != nil || n < 0 || n > limit {
			return usage("--%s %q: a PIM is a whole number from 1 to %d", OptPIM, v, limit)
		}
		opt.pim = n // 0 is VeraCrypt's "no PIM"
	}
	if o.Has(OptHash) {
		h, ok := canonicalHash(o[OptHash])
		if !ok {
			return usage("--%s %q: not a VeraCrypt or TrueCrypt header KDF (%s)", OptHash, o[OptHash], hashNames)
		}
		opt.hash = h
		if opt.pim > 0 && (h == hashSHA1) {
			return usage("--%s applies to VeraCrypt's KDFs, and %s is TrueCrypt's alone", OptPIM, h)
		}
	}
	return opt, nil
}

// candidates lists what an unlock tries at loc: every KDF row that
// applies (VeraCrypt's only with a PIM; the boot counts only for system
// encryption), or those of --tcrypt-hash.
func (o options) candidates(loc *location, passLen int) []candidate {
	var out []candidate
	for _, r := range kdfTable {
		switch {
		case o.hash != "" && r.hash != o.hash,
			r.boot && !o.system,
			o.pim > 0 && r.product != veraCrypt,
			loc.trueCryptOnly && r.product != trueCrypt,
			passLen > maxLegacyPassphrase && r.product != veraCrypt:
			continue
		}
		k := kdf{row: r, iter: r.iter}
		if o.pim > 0 && r.pimIter != nil {
			k.iter = r.pimIter(o.pim)
		}
		if r.hash == hashArgon2id {
			k.t, k.m = argon2Params(o.pim)
		}
		out = append(out, candidate{loc: loc, kdf: k})
	}
	return out
}

// Where the headers are, as VeraCrypt and TrueCrypt put them.
const (
	hiddenHeaderOffset  = 64 << 10
	headerGroupSize     = 128 << 10 // the normal and hidden headers' area at each end
	systemHeaderOffset  = 31744     // sector 62 of the drive's first track
	legacyHiddenFromEnd = 1536
	backupHiddenFromEnd = 64 << 10
	backupNormalFromEnd = headerGroupSize
)

func (tcryptFormat) Open(img *disk.Image, o disk.Options) (disk.Header, error) {
	opt, err := parseOptions(o)
	if err != nil {
		return nil, err
	}
	r, size := img.HeaderReader()
	name := headerName(img)
	if opt.backup && img.HeaderFile != nil {
		return nil, disk.WithKind(disk.KindUsage, fmt.Errorf("--%s reads the backup header at the end of the volume, not from a detached header", OptBackup))
	}
	type want struct {
		kind    locKind
		off     int64
		tcOnly  bool
		minSize int64
	}
	var ws []want
	switch {
	case opt.system:
		ws = []want{{locSystem, systemHeaderOffset, false, systemHeaderOffset + headerSize}}
	case opt.hidden && opt.backup:
		ws = []want{{locBackupHidden, size - backupHiddenFromEnd, false, 2 * headerGroupSize}}
	case opt.hidden:
		ws = []want{{locHidden, hiddenHeaderOffset, false, hiddenHeaderOffset + headerSize}}
		if size >= legacyHiddenFromEnd+headerSize && size-legacyHiddenFromEnd != hiddenHeaderOffset {
			ws = append(ws, want{locHiddenLegacy, size - legacyHiddenFromEnd, true, legacyHiddenFromEnd + headerSize})
		}
	case opt.backup:
		ws = []want{{locBackup, size - backupNormalFromEnd, false, 2 * headerGroupSize}}
	default:
		ws = []want{{locNormal, 0, false, headerSize}}
	}
	h := &tcHeader{img: img, opt: opt}
	for _, w := range ws {
		if size < w.minSize || w.off < 0 {
			what := map[locKind]string{
				locSystem: "a system drive's first track (--" + OptSystem + " takes the whole drive's image, or with --header its first track)",
				locHidden: "a hidden volume", locBackup: "a backup header", locBackupHidden: "a backup header",
				locNormal: "a VeraCrypt or TrueCrypt header",
			}[w.kind]
			if w.kind == locHidden && len(ws) > 1 {
				continue // too small for the header at 64 KiB; the legacy one may still be there
			}
			return nil, disk.WithKind(disk.KindInput, fmt.Errorf("%s is %d bytes, too small to hold %s: %w", name, size, what, disk.ErrNotFormat))
		}
		loc := &location{kind: w.kind, offset: w.off, trueCryptOnly: w.tcOnly}
		if _, err := r.ReadAt(loc.sector[:], w.off); err != nil {
			return nil, disk.WithKind(disk.KindInput, fmt.Errorf("%s: reading the header at byte %d: %w", name, w.off, err))
		}
		h.locs = append(h.locs, loc)
	}
	if len(h.locs) == 0 {
		return nil, disk.WithKind(disk.KindInput, fmt.Errorf("%s is %d bytes, too small to hold a hidden volume: %w", name, size, disk.ErrNotFormat))
	}
	return h, nil
}

func headerName(img *disk.Image) string {
	if img.HeaderFile != nil {
		return img.HeaderPath
	}
	return img.Path
}

// tcHeader is an image's header sector(s), still encrypted, and after an
// unlock what the header said.
type tcHeader struct {
	img    *disk.Image
	opt    options
	locs   []*location
	opened *opened // the last successful Unlock's header (no key)
}

// opened is what `info` shows of an unlocked header.
type opened struct {
	Location string `json:"header"`
	Offset   int64  `json:"header_offset"`
	KDF      string `json:"kdf"`
	Cipher   string `json:"cipher"`
	Mode     string `json:"mode"`
	header
	// What is served: DataLength bytes at DataStart in the image, its
	// first 512 bytes data unit FirstUnit.
	DataStart  int64  `json:"data_start"`
	DataLength int64  `json:"data_length"`
	FirstUnit  uint64 `json:"first_data_unit"`
}

func (h *tcHeader) Format() disk.Format { return Format }

// Check refuses before any prompt what cannot work: option clashes (Open
// has parsed them; a request may carry others), key slots, an Argon2id
// asked for with more memory than the machine can spare.
func (h *tcHeader) Check(req *disk.Request) (*disk.Need, error) {
	opt, err := h.requestOptions(req)
	if err != nil {
		return nil, err
	}
	if req.Slot >= 0 {
		return nil, disk.WithKind(disk.KindUsage, fmt.Errorf("--key-slot %d: a VeraCrypt or TrueCrypt volume has no key slots", req.Slot))
	}
	if opt.hash == hashArgon2id {
		if err := argon2Allowed(opt.pim, req); err != nil {
			return nil, err
		}
	}
	n := 0
	for _, l := range h.locs {
		n += len(opt.candidates(l, 0))
	}
	pass := disk.WantRequired
	if req.KeyFiles > 0 {
		pass = disk.WantOptional // VeraCrypt takes an empty passphrase with keyfiles
	}
	return &disk.Need{
		Passphrase: pass,
		Prompt:     "the passphrase for " + h.img.Path,
		KeyFile:    disk.WantOptional,
		Tries:      fmt.Sprintf("%s at byte %d, %d key derivations", h.where(), h.locs[0].offset, n),
	}, nil
}

func (h *tcHeader) where() string {
	switch h.locs[0].kind {
	case locHidden, locHiddenLegacy:
		return "the hidden volume's header"
	case locBackup:
		return "the backup header"
	case locBackupHidden:
		return "the hidden volume's backup header"
	case locSystem:
		return "the system encryption header"
	}
	return "the header"
}

// requestOptions takes the request's options if it carries any, else
// those Open was given; they must not disagree about where the header is.
func (h *tcHeader) requestOptions(req *disk.Request) (options, error) {
	if len(req.Options) == 0 {
		return h.opt, nil
	}
	opt, err := parseOptions(req.Options)
	if err != nil {
		return options{}, err
	}
	if opt.hidden != h.opt.hidden || opt.backup != h.opt.backup || opt.system != h.opt.system {
		return options{}, disk.WithKind(disk.KindUsage, errors.New("the unlock asks for another header than the one opened"))
	}
	return opt, nil
}

// argon2Allowed refuses VeraCrypt's Argon2id when its memory (416 MiB,
// up to 1 GiB with a PIM) is more than half of what the machine has
// available, unless the request allows expensive KDFs.
func argon2Allowed(pim int, req *disk.Request) error {
	_, m := argon2Params(pim)
	if req.AllowExpensiveKDF {
		return nil
	}
	if avail := sysmem.AvailableKiB(); avail > 0 && uint64(m) > avail/2 {
		return disk.WithKind(disk.KindKey, fmt.Errorf("Argon2id needs %d MiB and only %d MiB of memory is available", m>>10, avail>>10),
			"--allow-expensive-kdf runs it all the same")
	}
	return nil
}

var errUnsupportedVersion = errors.New("unsupported header version")

// Unlock derives the header keys of every candidate (in parallel, the
// cheapest first) until one decrypts a header whose magic and CRCs
// match, and returns the volume's data area.
func (h *tcHeader) Unlock(ctx context.Context, req *disk.Request, sec *disk.Secret) (*disk.Unlocked, error) {
	return h.unlock(ctx, req, sec, 0)
}

func (h *tcHeader) unlock(ctx context.Context, req *disk.Request, sec *disk.Secret, workers int) (*disk.Unlocked, error) {
	if _, err := h.Check(req); err != nil {
		return nil, err
	}
	opt, _ := h.requestOptions(req)
	if sec == nil {
		sec = &disk.Secret{}
	}
	pass, err := kdfPassword(sec.Passphrase, sec.KeyFiles)
	if err != nil {
		return nil, disk.WithKind(disk.KindUsage, err)
	}
	defer clear(pass)
	var cands []candidate
	var skipped string
	for _, l := range h.locs {
		for _, c := range opt.candidates(l, len(sec.Passphrase)) {
			if c.kdf.row.hash == hashArgon2id && opt.hash == "" {
				if err := argon2Allowed(opt.pim, req); err != nil {
					skipped = err.Error()
					continue
				}
			}
			cands = append(cands, c)
		}
	}
	if len(cands) == 0 {
		return nil, disk.WithKind(disk.KindUsage, errors.New("no header KDF applies to this request (a passphrase longer than 64 bytes rules out TrueCrypt's)"))
	}
	if workers <= 0 {
		workers = runtime.NumCPU()
	}
	if req.Progress != nil {
		req.Progress("trying %d key derivations of VeraCrypt and TrueCrypt on %d cores", len(cands), min(workers, len(cands)))
	}
	m, err := search(ctx, cands, pass, workers)
	if err != nil {
		return nil, err
	}
	if m == nil {
		return nil, h.wrongSecret(opt, sec, len(cands), skipped)
	}
	defer m.hdr.wipe()
	return h.serve(m, req)
}

// serve turns a match into what to serve, after the checks the CRCs
// allow: the versions, the cipher, and the data area against the image.
func (h *tcHeader) serve(m *match, req *disk.Request) (*disk.Unlocked, error) {
	name := headerName(h.img)
	hdr := m.hdr
	right := "the passphrase is right, but "
	if err := hdr.checkVersion(); err != nil {
		return nil, disk.WithKind(disk.KindInput, fmt.Errorf("%s: %s%w: %w", name, right, err, disk.ErrUnsupported))
	}
	o := &opened{
		Location: m.cand.loc.kind.String(), Offset: m.cand.loc.offset, KDF: m.cand.kdf.String(),
		Cipher: m.cipher.name, Mode: strings.ToUpper(m.cipher.mode), header: *hdr,
	}
	o.header.keys = [keyAreaSz]byte{}
	h.opened = o
	u := &disk.Unlocked{Format: FormatName, Slot: -1,
		SlotName: fmt.Sprintf("%s header at byte %d (%s)", hdr.product(), m.cand.loc.offset, m.cand.kdf)}
	if !m.cipher.supported() {
		what := fmt.Sprintf("the volume is encrypted with %s in %s mode", m.cipher.name, strings.ToUpper(m.cipher.mode))
		if m.cipher.mode == "xts" {
			what += ", and xtsctl serves AES alone"
		} else {
			what += ", TrueCrypt's legacy mode (before 5.0), and xtsctl serves AES-XTS alone"
		}
		if req.TestOnly {
			u.Unservable = what
			return u, nil
		}
		return nil, disk.WithKind(disk.KindInput, fmt.Errorf("%s: %s%s: %w", name, right, what, disk.ErrUnsupported),
			"VeraCrypt, or cryptsetup --type tcrypt with device-mapper, opens it")
	}
	if h.img.File == nil {
		u.Unservable = "the data device was not opened"
		return u, nil
	}
	l, off, n, iv, err := h.layout(m.cand.loc, hdr)
	if err == nil {
		err = l.Check(h.img.Size)
	}
	if err != nil {
		err = fmt.Errorf("%s: %s%w", name, right, err)
		if req.TestOnly {
			u.Unservable = err.Error()
			return u, nil
		}
		return nil, disk.WithKind(disk.KindInput, err)
	}
	o.DataStart, o.DataLength, o.FirstUnit = off, n, iv
	if hdr.Flags&flagSystemEncryption != 0 && m.cand.loc.kind != locSystem {
		u.Warnings = append(u.Warnings, "the header is marked as system encryption: its data units may count from the drive's start (--"+OptSystem+" with the whole drive's image)")
	}
	if hdr.Flags&flagNonSystemInPlace != 0 && hdr.EncryptedSize < hdr.VolumeSize {
		u.Warnings = append(u.Warnings, fmt.Sprintf("the header says in-place encryption was left unfinished (%d of %d bytes encrypted): the rest reads as garbage", hdr.EncryptedSize, hdr.VolumeSize))
	}
	u.Layout = l
	u.Key = append([]byte(nil), hdr.keys[:64]...)
	return u, nil
}

// layout is the data area the header describes, bounded by the image:
// where it is in the image (off, n bytes) and the XTS data unit number
// of its first 512 bytes (iv). Data units are 512 bytes and count from
// the start of the volume (the drive, for system encryption), so the
// first unit after a normal volume's 128 KiB of headers is 256.
func (h *tcHeader) layout(loc *location, hdr *header) (l disk.Layout, off, n int64, iv uint64, err error) {
	if hdr.SectorSize != 0 && hdr.SectorSize != 512 {
		return l, 0, 0, 0, fmt.Errorf("the volume has %d-byte sectors, and xtsctl serves 512-byte ones: %w", hdr.SectorSize, disk.ErrUnsupported)
	}
	size := uint64(h.img.Size)
	dataOff, length := hdr.DataOffset, hdr.VolumeSize
	switch loc.kind {
	case locHidden, locBackupHidden:
		length = hdr.HiddenSize
	case locHiddenLegacy:
		// TrueCrypt 5 and earlier: the hidden data ends where the
		// legacy hidden header begins.
		length = hdr.HiddenSize
		if size < legacyHiddenFromEnd || length > size-legacyHiddenFromEnd {
			return l, 0, 0, 0, fmt.Errorf("the hidden volume's %d bytes do not fit in the %d-byte image", length, size)
		}
		dataOff = size - legacyHiddenFromEnd - length
	}
	if dataOff == 0 && hdr.Version <= 3 {
		dataOff = headerSize
	}
	if length == 0 && hdr.Version <= 2 && dataOff <= size {
		length = size - dataOff // TrueCrypt 4 and earlier: to the end
	}
	iv = dataOff / 512
	source := dataOff
	if loc.kind == locSystem && h.img.HeaderFile != nil {
		// The image is the encrypted partition alone; the header (drive
		// or its first track) came apart: units still count from the
		// drive's start.
		source = 0
	}
	switch {
	case length == 0:
		return l, 0, 0, 0, errors.New("the header gives the volume no data")
	case dataOff%512 != 0 || length%512 != 0:
		return l, 0, 0, 0, fmt.Errorf("the header's data area (%d bytes at byte %d) is not whole 512-byte sectors", length, dataOff)
	case source > size || length > size-source:
		return l, 0, 0, 0, fmt.Errorf("the header's data area (%d bytes at byte %d) runs past the end of the %d-byte image: is it truncated?", length, source, size)
	}
	if h.img.HeaderFile == nil && loc.offset < int64(source+length) && int64(source) < loc.offset+headerSize {
		return l, 0, 0, 0, fmt.Errorf("the header's data area (%d bytes at byte %d) covers the header itself at byte %d", length, source, loc.offset)
	}
	l = disk.SingleExtent(int64(source), int64(length), sector.Params{Size: 512, IVOffset: iv}, disk.XTSPlain64, 512)
	return l, int64(source), int64(length), iv, nil
}

// wrongSecret is the error when no candidate opens: like LUKS's, with
// what else could be wrong.
func (h *tcHeader) wrongSecret(opt options, sec *disk.Secret, tried int, skipped string) error {
	name := headerName(h.img)
	err := disk.WithKind(disk.KindKey, fmt.Errorf("%s: %w (%s at byte %d, %d key derivations tried)", name, disk.ErrWrongSecret, h.where(), h.locs[0].offset, tried))
	var hints []string
	if opt.pim == 0 {
		hints = append(hints, "a volume made with a PIM opens only with it: --"+OptPIM+" N")
	} else {
		hints = append(hints, "check the PIM: a wrong one fails like a wrong passphrase")
	}
	if len(sec.KeyFiles) == 0 {
		hints = append(hints, "a volume made with keyfiles needs every one of them: --key-file F, repeated")
	} else {
		hints = append(hints, "keyfiles count by their content: the same files, none missing and none extra (their order does not matter)")
	}
	if opt.hash != "" {
		hints = append(hints, "--"+OptHash+" "+opt.hash+" tried that KDF alone; without it every one is tried")
	}
	switch {
	case opt.hidden:
		hints = append(hints, "the image may hold no hidden volume; the outer volume opens without --"+OptHidden)
	case !opt.system:
		hints = append(hints, "a hidden volume opens with --"+OptHidden+" and its own passphrase")
		hints = append(hints, "a drive or partition under VeraCrypt system encryption opens with --"+OptSystem)
	}
	if !opt.backup && !opt.system && h.img.HeaderFile == nil && h.img.Size >= 2*headerGroupSize {
		hints = append(hints, "if the header is damaged, the backup header at the end of the volume may open (VeraCrypt and TrueCrypt 6 and later keep one): --"+OptBackup)
	}
	if skipped != "" {
		hints = append(hints, "VeraCrypt's Argon2id was not tried: "+skipped+"; --allow-expensive-kdf tries it")
	}
	hints = append(hints, "TrueCrypt volumes in the legacy modes of versions before 5.0 with ciphers other than AES (Blowfish, CAST5, Triple DES, Serpent, Twofish) are not recognised and fail the same way")
	return disk.WithHints(err, hints...)
}

// Report shows the header: before an unlock only where it is (its fields
// are encrypted), after one what it says. The key only with ShowKey.
func (h *tcHeader) Report(opt disk.ReportOptions) (*disk.Report, error) {
	r := &disk.Report{}
	r.Add(0, "format", "VeraCrypt/TrueCrypt (tcrypt)")
	o := h.opened
	if o == nil {
		r.Add(0, "header", fmt.Sprintf("%s at byte %d, encrypted: unlock to read it", h.where(), h.locs[0].offset))
		r.Doc = map[string]any{"format": FormatName, "header_offset": h.locs[0].offset, "unlocked": false}
		return r, nil
	}
	r.Add(0, "program", o.product())
	r.Add(0, "header", fmt.Sprintf("%s, at byte %d", o.Location, o.Offset))
	r.Add(0, "header version", strconv.Itoa(int(o.Version)))
	r.Add(0, "minimum program version", programVersion(o.MinProgram))
	r.Add(0, "key derivation", o.KDF)
	r.Add(0, "cipher", fmt.Sprintf("%s-%s", strings.ToLower(o.Cipher), strings.ToLower(o.Mode)))
	r.Add(0, "volume size", strconv.FormatUint(o.VolumeSize, 10))
	if o.HiddenSize != 0 {
		r.Add(0, "hidden volume size", strconv.FormatUint(o.HiddenSize, 10))
	}
	r.Add(0, "data offset", strconv.FormatUint(o.DataOffset, 10))
	r.Add(0, "encrypted area", strconv.FormatUint(o.EncryptedSize, 10))
	r.Add(0, "flags", fmt.Sprintf("0x%x%s", o.Flags, flagNames(o.Flags)))
	r.Add(0, "sector size", strconv.Itoa(int(max(o.SectorSize, 512))))
	if o.DataLength > 0 {
		r.Add(0, "data", fmt.Sprintf("%d bytes at byte %d, data units from %d", o.DataLength, o.DataStart, o.FirstUnit))
	}
	doc := map[string]any{"format": FormatName, "unlocked": true, "header": o}
	if opt.ShowKey && opt.Unlocked != nil && len(opt.Unlocked.Key) > 0 {
		k := fmt.Sprintf("%x", opt.Unlocked.Key)
		r.Add(0, "key", k)
		doc["key"] = k
	}
	r.Doc = doc
	return r, nil
}

func flagNames(f uint32) string {
	var s []string
	if f&flagSystemEncryption != 0 {
		s = append(s, "system encryption")
	}
	if f&flagNonSystemInPlace != 0 {
		s = append(s, "in-place encryption")
	}
	if len(s) == 0 {
		return ""
	}
	return " (" + strings.Join(s, ", ") + ")"
}
