package bitlk

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/xtsctl/xtsctl/disk"
)

// maxStretches bounds how many protectors one unlock stretches a
// passphrase for (each costs BitLocker's 2^20 SHA-256 rounds) unless the
// request allows expensive KDFs: an image can hold hundreds.
const maxStretches = 8

// Header is an opened BitLocker volume: its boot sector and metadata.
type Header struct {
	path   string
	size   int64
	boot   *bootInfo
	copies []*metaCopy
	used   int       // the copy in use, -1 for a version-1 volume
	meta   *metadata // of copies[used]
}

var _ disk.Header = (*Header)(nil)

func (h *Header) Format() disk.Format { return Format{} }

// unservable says why the volume's data cannot be served, before any
// key: a Vista volume, one whose encryption or decryption is in
// progress, an unknown method or sector size. nil when it can.
func (h *Header) unservable() error {
	if h.boot.version == 1 {
		return errors.New("BitLocker version 1 (Windows Vista) is not supported")
	}
	m := h.meta
	switch {
	case h.boot.infoGUID == infoGUIDEOW:
		return errors.New("the volume is encrypted on write (encrypt-on-write, used space only: Windows encrypts what is written, and the rest may still be clear); a partially encrypted volume is not supported")
	case h.boot.infoGUID != infoGUIDNormal:
		return fmt.Errorf("unknown BitLocker information GUID {%s}", h.boot.infoGUID)
	case m.curState != stateEncrypted || m.nextState != stateEncrypted:
		return fmt.Errorf("the volume is %s: only fully encrypted volumes are supported (let Windows finish, or pause and resume it there)", stateText(m.curState, m.nextState))
	case h.boot.sectorSize != 512 && h.boot.sectorSize != 4096:
		return fmt.Errorf("a sector size of %d bytes (BitLocker uses 512 or 4096)", h.boot.sectorSize)
	}
	if _, ok := lookupMethod(m.method); !ok {
		return fmt.Errorf("encryption method %#04x is not supported", m.method)
	}
	if m.fvek == nil {
		return errors.New("the metadata holds no FVEK (the volume's data key)")
	}
	// The layout needs no key: a geometry that cannot be served (a
	// truncated image, overlapping areas) is refused before any prompt.
	// Unlock lays it out again from the metadata once authenticated.
	if _, err := h.layout(h.size); err != nil {
		return err
	}
	return nil
}

// stateText describes a volume's current and next state.
func stateText(cur, next uint16) string {
	name := func(s uint16) string {
		switch s {
		case 1:
			return "decrypted"
		case 2:
			return "switching"
		case 3:
			return "encrypt-on-write"
		case 4:
			return "encrypted"
		case 5:
			return "paused"
		}
		return fmt.Sprintf("state %d", s)
	}
	switch {
	case cur == stateEncrypted && next == stateEncrypted:
		return "fully encrypted"
	case cur == 2 && next == stateEncrypted, cur == 5 && next == stateEncrypted:
		return fmt.Sprintf("being encrypted (%s, then %s)", name(cur), name(next))
	case next == 1:
		return fmt.Sprintf("being decrypted (%s, then %s)", name(cur), name(next))
	}
	return fmt.Sprintf("in transition (%s, then %s)", name(cur), name(next))
}

// A plan is what an unlock request will try, as Check finds it.
type plan struct {
	clear    []*protector // a suspended volume's clear key: no secret needed
	startup  []*protector
	recovery []*protector
	password []*protector
	// recoveryOnly: --recovery, the passphrase is a recovery password.
	recoveryOnly bool
	unservable   error // with TestOnly: why the data cannot be served
}

func (p *plan) all() []*protector {
	return append(append(append(append([]*protector(nil), p.clear...), p.startup...), p.recovery...), p.password...)
}

// plan checks req against the header.
func (h *Header) plan(req *disk.Request) (*plan, error) {
	if h.boot.version == 1 {
		return nil, disk.WithKind(disk.KindInput, fmt.Errorf("%s: BitLocker version 1 (Windows Vista): %w", h.path, disk.ErrUnsupported),
			"Windows 7 and later can upgrade the volume (manage-bde -upgrade)")
	}
	pl := &plan{}
	if err := h.unservable(); err != nil {
		if !req.TestOnly {
			return nil, disk.WithKind(disk.KindInput, fmt.Errorf("%s: %v: %w", h.path, err, disk.ErrUnsupported))
		}
		pl.unservable = err
	}
	sel, explicit, err := h.selectProtectors(req)
	if err != nil {
		return nil, err
	}
	var unusable []string
	for _, p := range sel {
		if err := p.usable(); err != nil {
			if explicit {
				return nil, disk.WithKind(disk.KindInput, fmt.Errorf("%s: %s cannot be used: %v: %w", h.path, p, err, disk.ErrUnsupported))
			}
			unusable = append(unusable, fmt.Sprintf("%s: %v", p, err))
			continue
		}
		switch p.protection {
		case protClearKey:
			pl.clear = append(pl.clear, p)
		case protStartupKey:
			pl.startup = append(pl.startup, p)
		case protRecovery:
			pl.recovery = append(pl.recovery, p)
		case protPassword:
			pl.password = append(pl.password, p)
		}
	}
	if pl.recoveryOnly = req.Options.Bool(OptRecovery); pl.recoveryOnly {
		pl.clear, pl.startup, pl.password = nil, nil, nil
		if len(pl.recovery) == 0 {
			return nil, disk.Errorf(disk.KindUsage, "%s has no usable recovery password protector%s", h.path, h.listProtectors(sel))
		}
	}
	if len(pl.clear) > 0 && !explicit {
		// A suspended volume opens with its clear key alone, as Windows
		// opens it.
		pl.startup, pl.recovery, pl.password = nil, nil, nil
	}
	if len(pl.all()) == 0 {
		hints := []string{"a volume protected only by a TPM or smart card opens only on its computer (or with its recovery password, if it has one): in Windows, manage-bde -protectors -add -RecoveryPassword adds one"}
		return nil, disk.WithKind(disk.KindInput,
			fmt.Errorf("%s: no protector of this BitLocker volume can be used (%s): %w", h.path, strings.Join(unusable, "; "), disk.ErrUnsupported), hints...)
	}
	if n := len(pl.recovery) + len(pl.password); n > maxStretches && !req.AllowExpensiveKDF {
		return nil, disk.WithKind(disk.KindInput,
			fmt.Errorf("%s: %d password protectors would each cost BitLocker's 2^20 SHA-256 rounds (at most %d are tried)", h.path, n, maxStretches),
			"name the one to try with --protector GUID, or allow it with the option for expensive key derivations")
	}
	return pl, nil
}

// selectProtectors applies req.Slot and --protector; explicit says the
// user named the protectors.
func (h *Header) selectProtectors(req *disk.Request) ([]*protector, bool, error) {
	ps := h.meta.protectors
	explicit := false
	if req.Slot >= 0 {
		if req.Slot >= len(ps) {
			return nil, false, disk.Errorf(disk.KindUsage, "%s has no protector %d%s", h.path, req.Slot, h.listProtectors(ps))
		}
		ps = ps[req.Slot : req.Slot+1]
		explicit = true
	}
	if want, ok := req.Options[OptProtector]; ok {
		var out []*protector
		g, isGUID := parseGUID(want)
		kind := normalizeKind(want)
		for _, p := range ps {
			if (isGUID && p.guid == g) || (!isGUID && p.kind() == kind) {
				out = append(out, p)
			}
		}
		if len(out) == 0 {
			return nil, false, disk.Errorf(disk.KindUsage, "no protector of %s matches --%s %q%s", h.path, OptProtector, want, h.listProtectors(ps))
		}
		ps = out
		explicit = true
	}
	return ps, explicit, nil
}

// normalizeKind maps the names people use for a protector type to
// protector.kind's.
func normalizeKind(s string) string {
	s = strings.ToLower(strings.TrimSpace(s))
	s = strings.ReplaceAll(s, "_", "-")
	switch s {
	case "recovery-password", "recovery-key", "numerical-password":
		return "recovery"
	case "startup", "startupkey", "external-key", "bek":
		return "startup-key"
	case "clear", "clearkey", "suspended":
		return "clear-key"
	case "passphrase", "user-password":
		return "password"
	}
	return s
}

func (h *Header) listProtectors(ps []*protector) string {
	if len(ps) == 0 {
		return " (it has none)"
	}
	var s []string
	for _, p := range ps {
		s = append(s, p.String())
	}
	return " (" + strings.Join(s, ", ") + ")"
}

// Check says, before any prompt, what an unlock will try and need.
func (h *Header) Check(req *disk.Request) (*disk.Need, error) {
	pl, err := h.plan(req)
	if err != nil {
		return nil, err
	}
	need := &disk.Need{}
	var tries []string
	ps := pl.all()
	slices.SortFunc(ps, func(a, b *protector) int { return a.index - b.index })
	for _, p := range ps {
		tries = append(tries, fmt.Sprintf("%d (%s)", p.index, p.title()))
	}
	need.Tries = "protector"
	if len(tries) > 1 {
		need.Tries += "s"
	}
	need.Tries += " " + strings.Join(tries, ", ")
	if len(pl.clear) > 0 {
		return need, nil
	}
	secret := len(pl.recovery)+len(pl.password) > 0
	startup := len(pl.startup) > 0
	switch {
	case secret && startup:
		// The disk layer cannot tell Check whether a key file was given:
		// the passphrase may be left empty when one is.
		need.Passphrase, need.KeyFile = disk.WantOptional, disk.WantOptional
	case secret:
		need.Passphrase = disk.WantRequired
	case startup:
		need.KeyFile = disk.WantRequired
	}
	if secret {
		switch {
		case len(pl.password) == 0:
			need.Prompt = "recovery password for " + h.path
		case len(pl.recovery) == 0:
			need.Prompt = "password for " + h.path
		default:
			need.Prompt = "password or recovery password for " + h.path
		}
		if startup {
			need.Prompt += " (empty with a startup key file)"
		}
	}
	return need, nil
}

// An attempt is one protector with the key its secret gives, made only
// when it is tried (stretching costs).
type attempt struct {
	p   *protector
	key func(context.Context) ([]byte, error)
}

// Unlock opens the volume with sec: a suspended volume's clear key, the
// startup key file, the recovery password, the password, in that order
// of what the request allows.
func (h *Header) Unlock(ctx context.Context, req *disk.Request, sec *disk.Secret) (*disk.Unlocked, error) {
	pl, err := h.plan(req)
	if err != nil {
		return nil, err
	}
	if sec == nil {
		sec = &disk.Secret{}
	}
	var tries []attempt
	for _, p := range pl.clear {
		tries = append(tries, attempt{p, func(context.Context) ([]byte, error) { return bytes.Clone(p.clearKey), nil }})
	}
	var what []string // the secrets given, for the error
	if len(sec.KeyFiles) > 1 {
		return nil, disk.Errorf(disk.KindUsage, "BitLocker takes one startup key file, not %d", len(sec.KeyFiles))
	}
	if len(sec.KeyFiles) == 1 && len(pl.clear) == 0 {
		if len(pl.startup) == 0 {
			return nil, disk.Errorf(disk.KindUsage, "a startup key file was given, but %s has no startup key protector to use it with%s", h.path, h.listProtectors(h.meta.protectors))
		}
		sk, err := parseBEK(sec.KeyFiles[0])
		if err != nil {
			return nil, disk.WithKind(disk.KindKey, err)
		}
		if sk.volumeGUID != nil && *sk.volumeGUID != h.meta.volumeGUID {
			return nil, disk.WithKind(disk.KindKey, fmt.Errorf("the startup key is for BitLocker volume {%s}, not {%s}: %w", *sk.volumeGUID, h.meta.volumeGUID, disk.ErrWrongSecret))
		}
		matched := false
		for _, p := range pl.startup {
			if p.guid == sk.guid {
				matched = true
				tries = append(tries, attempt{p, func(context.Context) ([]byte, error) { return bytes.Clone(sk.key), nil }})
			}
		}
		if !matched {
			return nil, disk.WithKind(disk.KindKey, fmt.Errorf("startup key {%s} opens no protector of %s%s: %w", sk.guid, h.path, h.listProtectors(pl.startup), disk.ErrWrongSecret))
		}
		what = append(what, "startup key")
	}
	if pass := sec.Passphrase; len(pass) > 0 && len(pl.clear) == 0 {
		rk, shaped, rerr := recoveryKey(pass)
		if rk != nil {
			defer clear(rk[:])
		}
		if pl.recoveryOnly && !shaped {
			return nil, disk.WithKind(disk.KindKey, fmt.Errorf("that is not a recovery password (48 digits, in 8 groups of 6 joined by '-'): %w", disk.ErrWrongSecret))
		}
		useRecovery := shaped && rerr == nil && len(pl.recovery) > 0
		usePassword := !pl.recoveryOnly && len(pl.password) > 0
		switch {
		case useRecovery || usePassword:
		case len(pl.recovery)+len(pl.password) == 0:
			return nil, disk.Errorf(disk.KindUsage, "a passphrase was given, but %s has no password or recovery password protector to use it with%s", h.path, h.listProtectors(h.meta.protectors))
		case rerr != nil:
			return nil, disk.WithKind(disk.KindKey, fmt.Errorf("%v: %w", rerr, disk.ErrWrongSecret))
		default:
			return nil, disk.WithKind(disk.KindKey, fmt.Errorf("that is not a recovery password (48 digits, in 8 groups of 6 joined by '-'), and no password protector of %s is to be tried: %w", h.path, disk.ErrWrongSecret))
		}
		if useRecovery {
			initial := recoveryHash(rk)
			defer clear(initial[:])
			for _, p := range pl.recovery {
				tries = append(tries, attempt{p, func(ctx context.Context) ([]byte, error) { return stretchKey(ctx, initial, p) }})
			}
			what = append(what, "recovery password")
		}
		if usePassword {
			initial, err := passwordHash(pass)
			if err != nil {
				return nil, disk.WithKind(disk.KindKey, err)
			}
			defer clear(initial[:])
			for _, p := range pl.password {
				tries = append(tries, attempt{p, func(ctx context.Context) ([]byte, error) { return stretchKey(ctx, initial, p) }})
			}
			what = append(what, "password")
		}
	}
	if len(tries) == 0 {
		return nil, disk.Errorf(disk.KindUsage, "no secret given for %s: it needs a password, a recovery password or a startup key file%s", h.path, h.listProtectors(pl.all()))
	}

	var failures []string
	for _, t := range tries {
		if req.Progress != nil && t.p.protection != protClearKey && t.p.protection != protStartupKey {
			req.Progress("trying %s", t.p)
		}
		key, err := t.key(ctx)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", t.p, err)
		}
		vmk, err := openVMK(key, t.p)
		clear(key)
		if errors.Is(err, errCCMOpen) {
			failures = append(failures, t.p.String())
			continue
		}
		if err != nil {
			failures = append(failures, fmt.Sprintf("%s: %v", t.p, err))
			continue
		}
		u, err := h.finish(req, pl, t.p, vmk)
		clear(vmk)
		return u, err
	}
	return nil, disk.WithKind(disk.KindKey, fmt.Errorf("no protector of %s opens with the %s given (tried %s): %w",
		h.path, strings.Join(what, " or "), strings.Join(failures, ", "), disk.ErrWrongSecret))
}

// stretchKey stretches a password's or recovery password's initial hash
// with p's salt into the key that opens p.
func stretchKey(ctx context.Context, initial *[32]byte, p *protector) ([]byte, error) {
	k, err := stretch(ctx, initial, &p.salt)
	if err != nil {
		return nil, err
	}
	return k[:], nil
}

// finish takes the VMK that protector p opened: it authenticates the
// metadata copy in use with it, decrypts the FVEK, and lays out the data.
func (h *Header) finish(req *disk.Request, pl *plan, p *protector, vmk []byte) (*disk.Unlocked, error) {
	if err := h.authenticate(vmk); err != nil {
		return nil, disk.WithKind(disk.KindIntegrity, fmt.Errorf("%s: %s opened, but %w", h.path, p, err))
	}
	u := &disk.Unlocked{Format: Name, Slot: p.index, SlotName: p.String()}
	if p.protection == protClearKey {
		u.Warnings = append(u.Warnings, "the volume's protection is suspended: its key is stored in the clear on the image")
	}
	if pl.unservable != nil {
		u.Unservable = pl.unservable.Error()
		return u, nil
	}
	meth, _ := lookupMethod(h.meta.method)
	fmethod, fkey, err := openKeyDatum(vmk, h.meta.fvek)
	if err != nil {
		return nil, disk.WithKind(disk.KindIntegrity, fmt.Errorf("%s: %s opened, but the FVEK (the data key) does not open with its VMK: %v", h.path, p, err))
	}
	defer clear(fkey)
	if len(fkey) < meth.fvek {
		return nil, disk.WithKind(disk.KindIntegrity, fmt.Errorf("%s: the FVEK has %d bytes; %s needs %d", h.path, len(fkey), meth.title, meth.fvek))
	}
	if fmethod != uint32(meth.id) {
		u.Warnings = append(u.Warnings, fmt.Sprintf("the FVEK is marked for method %#04x, the volume for %#04x (%s): the volume's is used", fmethod, meth.id, meth.title))
	}
	l, err := h.layout(h.size)
	if err != nil {
		if req.TestOnly {
			u.Unservable = err.Error()
			return u, nil
		}
		return nil, disk.WithKind(disk.KindInput, fmt.Errorf("%s: %w", h.path, err))
	}
	u.Layout = l
	u.Key = meth.dmKey(fkey)
	u.Warnings = append(u.Warnings, h.warnings()...)
	return u, nil
}

// authenticate checks the metadata copy in use against its validation
// datum: the SHA-256 of the copy, AES-CCM encrypted with the VMK. Until
// it passes, nothing the metadata says (offsets, method) is trusted for
// serving.
func (h *Header) authenticate(vmk []byte) error {
	pt, err := openCCM(vmk, h.meta.validation)
	if err != nil {
		return fmt.Errorf("metadata copy %d does not authenticate with the VMK (it was changed after Windows wrote it)", h.used)
	}
	defer clear(pt)
	le := binary.LittleEndian
	if len(pt) < keyDatumHeaderSize+sha256.Size || le.Uint16(pt[4:]) != valueKey || le.Uint16(pt[8:]) != 0x2005 {
		return fmt.Errorf("metadata copy %d has a validation datum that is not a SHA-256", h.used)
	}
	sum := sha256.Sum256(h.copies[h.used].block)
	if subtle.ConstantTimeCompare(sum[:], pt[keyDatumHeaderSize:keyDatumHeaderSize+sha256.Size]) != 1 {
		return fmt.Errorf("metadata copy %d does not match its authenticated SHA-256 (it was changed after Windows wrote it)", h.used)
	}
	return nil
}

// warnings are what the user should know about a servable volume.
func (h *Header) warnings() []string {
	var w []string
	ss := int64(h.boot.sectorSize)
	if h.size%ss != 0 {
		w = append(w, fmt.Sprintf("the image's last %d bytes are not a whole %d-byte sector and are not served", h.size%ss, ss))
	}
	if h.meta.volumeSize != uint64(h.size) && h.meta.volumeSize != 0 {
		w = append(w, fmt.Sprintf("the image has %d bytes, the BitLocker volume %d: the image is served whole, as cryptsetup maps it", h.size, h.meta.volumeSize))
	}
	if agree, why := h.copiesAgree(); !agree {
		w = append(w, fmt.Sprintf("the metadata copies do not agree (%s): copy %d is used", why, h.used))
	}
	if h.meta.fvekCount > 1 {
		w = append(w, fmt.Sprintf("the metadata holds %d FVEK entries: the first is used", h.meta.fvekCount))
	}
	return w
}

// copiesAgree says whether the three metadata copies are valid and hold
// the same bytes, and if not which differ.
func (h *Header) copiesAgree() (bool, string) {
	var why []string
	for _, c := range h.copies {
		switch {
		case c.err != nil:
			why = append(why, fmt.Sprintf("copy %d is invalid", c.index))
		case c.index != h.used && !bytes.Equal(c.block, h.copies[h.used].block):
			why = append(why, fmt.Sprintf("copy %d differs from copy %d", c.index, h.used))
		}
	}
	return len(why) == 0, strings.Join(why, ", ")
}
