package fvault2

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/xtsctl/xtsctl/disk"
	"github.com/xtsctl/xtsctl/internal/bytesize"
	"github.com/xtsctl/xtsctl/internal/pbkdf2"
)

// MaxIterations bounds the PBKDF2-SHA-256 iterations one Unlock runs,
// summed over the crypto users it tries, unless the request allows
// expensive KDFs. The count comes from the image, which whoever wrote it
// chose: unbounded, it would make a look at a hostile image run for hours.
// macOS calibrates the count on the Mac that encrypts (cryptsetup's
// sample has 204222); 2^24 is 82 times that and about five seconds of
// PBKDF2-SHA-256 on one core of a current x86 server.
const MaxIterations = 1 << 24

// header is an opened FileVault 2 volume.
type header struct {
	path string
	v    *volume
}

func (h *header) Format() disk.Format { return Format{} }

// plan returns the crypto users an unlock tries, in order, and the ones
// it leaves out for their cost, before anyone is asked for a passphrase.
func (h *header) plan(req *disk.Request) (tries []int, skipped []error, err error) {
	v := h.v
	if !req.ReadOnly && !req.TestOnly {
		return nil, nil, &disk.Error{
			Kind:  disk.KindUsage,
			Err:   fmt.Errorf("%s: %s", h.path, readOnlyReason),
			Hints: []string{"open it with --readonly, or decrypt it to a file"},
		}
	}
	if v.unlockable != nil {
		return nil, nil, kindOf(fmt.Errorf("%s: %w", h.path, v.unlockable))
	}
	if !req.TestOnly && v.unservable != nil {
		return nil, nil, kindOf(fmt.Errorf("%s: %w", h.path, v.unservable))
	}
	users := v.ctx.Users
	cost := func(i int, spent uint64) error {
		it := uint64(users[i].Iterations)
		if req.AllowExpensiveKDF || spent+it <= MaxIterations {
			return nil
		}
		return &disk.Error{
			Kind: disk.KindKey,
			Err: fmt.Errorf("crypto user %d: PBKDF2-SHA-256 with %d iterations is more than xtsctl runs for FileVault 2 without --allow-expensive-kdf (%d in all)",
				i, it, MaxIterations),
			Hints: []string{"if you trust this image, --allow-expensive-kdf runs it (it may take very long)"},
		}
	}
	if req.Slot >= 0 {
		switch {
		case req.Slot >= len(users):
			return nil, nil, disk.Errorf(disk.KindUsage, "%s has no crypto user %d (it has %d: 0 to %d)", h.path, req.Slot, len(users), len(users)-1)
		case users[req.Slot].Unusable != nil:
			return nil, nil, kindOf(fmt.Errorf("crypto user %d: %w", req.Slot, users[req.Slot].Unusable))
		}
		if err := cost(req.Slot, 0); err != nil {
			return nil, nil, err
		}
		return []int{req.Slot}, nil, nil
	}
	var spent uint64
	for i, u := range users {
		if u.Unusable != nil {
			continue
		}
		if err := cost(i, spent); err != nil {
			skipped = append(skipped, err)
			continue
		}
		spent += uint64(u.Iterations)
		tries = append(tries, i)
	}
	if len(tries) == 0 {
		return nil, nil, skipped[0] // finish made sure some user is usable
	}
	return tries, skipped, nil
}

func usersList(tries []int) string {
	s := make([]string, len(tries))
	for i, t := range tries {
		s[i] = fmt.Sprint(t)
	}
	if len(s) == 1 {
		return "crypto user " + s[0]
	}
	return "crypto users " + strings.Join(s, ", ")
}

// Check says what Unlock needs: a passphrase (the user's login password,
// or the recovery key: CoreStorage wraps both the same way).
func (h *header) Check(req *disk.Request) (*disk.Need, error) {
	tries, _, err := h.plan(req)
	if err != nil {
		return nil, err
	}
	return &disk.Need{
		Passphrase: disk.WantRequired,
		Prompt:     "passphrase for " + h.path,
		KeyFile:    disk.WantNone,
		Tries:      usersList(tries),
	}, nil
}

// Unlock tries the passphrase on each crypto user planned: PBKDF2, then
// the KEK unwrapped (its integrity check tells a wrong passphrase), then
// the volume key unwrapped with the KEK, then the tweak key derived.
func (h *header) Unlock(ctx context.Context, req *disk.Request, sec *disk.Secret) (*disk.Unlocked, error) {
	tries, skipped, err := h.plan(req)
	if err != nil {
		return nil, err
	}
	var pass []byte
	if sec != nil {
		pass = sec.Passphrase
	}
	users := h.v.ctx.Users
	for _, i := range tries {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		u := users[i]
		if req.Progress != nil {
			req.Progress("crypto user %d: PBKDF2-SHA-256, %d iterations", i, u.Iterations)
		}
		// internal/pbkdf2 wipes its copies of the passphrase, which
		// crypto/pbkdf2 would leave in memory.
		pk := pbkdf2.Key(sha256.New, pass, u.Salt, int(u.Iterations), 16)
		kek, err := unwrapKey(pk, u.WrappedKEK)
		clear(pk)
		if err != nil {
			continue // the wrong passphrase for this user
		}
		vk, err := h.volumeKey(kek, u)
		clear(kek)
		if err != nil {
			return nil, err
		}
		out := h.unlocked(vk, i)
		clear(vk)
		return out, nil
	}
	wrong := fmt.Errorf("%w (tried %s)", disk.ErrWrongSecret, usersList(tries))
	if len(skipped) > 0 {
		wrong = fmt.Errorf("%w; not tried: %w", wrong, errors.Join(skipped...))
	}
	return nil, disk.WithKind(disk.KindKey, wrong)
}

// volumeKey unwraps the volume key with the KEK of user u. The entry of
// the default encryption context comes first, then those wrapped with
// u's KEK, then the rest: the unwrap's integrity check picks the one.
func (h *header) volumeKey(kek []byte, u cryptoUser) ([]byte, error) {
	ctx := h.v.ctx
	rank := func(k *volumeKey) int {
		r := 2
		if ctx.HasDefault && k.HasIndex && k.Index == ctx.Default {
			r = 0
		} else if u.KEKUUID != "" && strings.EqualFold(k.KEKUUID, u.KEKUUID) {
			r = 1
		}
		return r
	}
	var cands []*volumeKey
	for i := range ctx.Keys {
		if ctx.Keys[i].Wrapped != nil {
			cands = append(cands, &ctx.Keys[i])
		}
	}
	slices.SortStableFunc(cands, func(a, b *volumeKey) int { return rank(a) - rank(b) })
	for _, k := range cands {
		vk, err := unwrapKey(kek, k.Wrapped)
		if err != nil {
			continue
		}
		if k.Algorithm != "" && k.Algorithm != "AES-XTS" {
			clear(vk)
			return nil, kindOf(unsupported("volume key %s uses block algorithm %q (xtsctl reads AES-XTS)", k.UUID, k.Algorithm))
		}
		if len(vk) != 16 {
			clear(vk)
			return nil, kindOf(corrupt("volume key %s is %d bytes, not 16", k.UUID, len(vk)))
		}
		return vk, nil
	}
	return nil, disk.WithKind(disk.KindIntegrity, fmt.Errorf("%s: the passphrase opens a crypto user's KEK, but no wrapped volume key opens with it", h.path))
}

// unlocked makes the XTS key (the volume key ‖ the first 16 bytes of
// SHA-256(volume key ‖ family UUID)) and what to serve.
func (h *header) unlocked(vk []byte, user int) *disk.Unlocked {
	v := h.v
	u := v.ctx.Users[user]
	name := fmt.Sprintf("crypto user %d", user)
	if u.UUID != "" {
		name += " (" + strings.ToLower(u.UUID) + ")"
	}
	out := &disk.Unlocked{Format: Name, Slot: user, SlotName: name, Warnings: slices.Clone(v.warnings)}
	if v.unservable != nil {
		out.Unservable = v.unservable.Error()
	}
	if v.lv.FamilyUUID == "" || v.lv.Size == 0 {
		// Test-only: the passphrase is right, but without the family
		// UUID there is no tweak key.
		return out
	}
	hs := sha256.New()
	hs.Write(vk)
	hs.Write(v.lv.family[:])
	sum := hs.Sum(nil)
	out.Key = make([]byte, 32)
	copy(out.Key, vk)
	copy(out.Key[16:], sum[:16])
	clear(sum)
	if v.layout != nil {
		out.Layout = *v.layout
		out.Layout.Extents = slices.Clone(v.layout.Extents)
	}
	return out
}

// Report is what info shows: the physical volume, the volume group, the
// logical volume and its extents, the crypto users and the wrapped
// volume keys; with ShowKey, the XTS key of an unlocked volume.
func (h *header) Report(opt disk.ReportOptions) (*disk.Report, error) {
	v := h.v
	r := &disk.Report{}
	doc := reportDoc{Format: Name}
	where := "byte 0 of the image"
	if v.part != nil {
		where = fmt.Sprintf("partition %d, byte %d of the image", v.part.Number, v.part.Offset)
		doc.Partition = v.part.Number
	}
	doc.PhysicalVolume = pvDoc{UUID: formatUUID(v.pv.PVUUID), Offset: v.pvOff, Size: v.pv.Size, BlockSize: v.pv.BlockSize}
	r.Add(0, "format", "FileVault 2 (CoreStorage)")
	r.Add(0, "physical volume", formatUUID(v.pv.PVUUID))
	r.Add(1, "at", where)
	r.Add(1, "size", sizeText(v.pv.Size))
	r.Add(1, "block size", fmt.Sprint(v.pv.BlockSize))

	doc.VolumeGroup = vgDoc{UUID: formatUUID(v.pv.VGUUID), Name: v.vgName}
	r.Add(0, "volume group", formatUUID(v.pv.VGUUID))
	if v.vgName != "" {
		r.Add(1, "name", v.vgName)
	}

	lv := lvDoc{Name: v.lv.Name, UUID: strings.ToLower(v.lv.UUID), FamilyUUID: strings.ToLower(v.lv.FamilyUUID),
		Size: v.lv.Size, Content: v.lv.ContentHint}
	if v.lv.UUID != "" || v.lv.Size != 0 {
		r.Add(0, "logical volume", lv.UUID)
		if lv.Name != "" {
			r.Add(1, "name", lv.Name)
		}
		r.Add(1, "family", lv.FamilyUUID)
		r.Add(1, "size", sizeText(v.lv.Size))
		if lv.Content != "" {
			r.Add(1, "content", lv.Content)
		}
	}
	if v.layout != nil {
		for _, e := range v.layout.Extents {
			lv.Extents = append(lv.Extents, extentDoc{Offset: e.Offset, Length: e.Length, Source: e.Source})
			r.Add(1, "extent", fmt.Sprintf("%d bytes at byte %d of the volume, from byte %d of the image", e.Length, e.Offset, e.Source))
		}
		r.Add(1, "encryption", fmt.Sprintf("%s, %d-bit key (AES-XTS-128), %d-byte sectors numbered from the volume's start", v.layout.Cipher, v.layout.KeyBits, v.layout.SectorSize))
	}
	doc.LogicalVolume = lv

	if c := v.ctx; c != nil {
		if c.Conversion != "" {
			r.Add(0, "conversion", c.Conversion)
			doc.Conversion = c.Conversion
		}
		for i, u := range c.Users {
			ud := userDoc{Index: i, UUID: strings.ToLower(u.UUID), KEK: strings.ToLower(u.KEKUUID), Hint: u.Hint}
			if u.HasType {
				ud.Type = fmt.Sprintf("%#08x", u.Type)
			}
			r.Add(0, fmt.Sprintf("crypto user %d", i), ud.UUID)
			if ud.Type != "" {
				r.Add(1, "type", ud.Type)
			}
			if u.Unusable != nil {
				ud.Unusable = u.Unusable.Error()
				r.Add(1, "unusable", ud.Unusable)
			} else {
				ud.KDF, ud.Iterations, ud.Salt = "pbkdf2-sha256", u.Iterations, hex.EncodeToString(u.Salt)
				r.Add(1, "key", fmt.Sprintf("passphrase-wrapped KEK %s", ud.KEK))
				r.Add(1, "kdf", fmt.Sprintf("pbkdf2-sha256, %d iterations", u.Iterations))
			}
			if u.Hint != "" {
				r.Add(1, "hint", u.Hint)
			}
			doc.CryptoUsers = append(doc.CryptoUsers, ud)
		}
		for _, k := range c.Keys {
			kd := keyDoc{UUID: strings.ToLower(k.UUID), KEK: strings.ToLower(k.KEKUUID), Algorithm: k.Algorithm, Wrapped: k.Wrapped != nil}
			if k.HasIndex {
				idx := k.Index
				kd.Index = &idx
			}
			what := "no key (the context before encryption)"
			if k.Wrapped != nil {
				what = fmt.Sprintf("%s, wrapped with KEK %s", k.Algorithm, kd.KEK)
			}
			if c.HasDefault && k.HasIndex && k.Index == c.Default {
				what += " (in use)"
				kd.InUse = true
			}
			r.Add(0, "volume key "+kd.UUID, what)
			doc.VolumeKeys = append(doc.VolumeKeys, kd)
		}
	}
	for _, w := range v.warnings {
		r.Add(0, "warning", w)
	}
	doc.Warnings = v.warnings
	if v.unlockable != nil {
		doc.Unusable = v.unlockable.Error()
		r.Add(0, "cannot unlock", doc.Unusable)
	}
	if v.unservable != nil {
		doc.Unservable = v.unservable.Error()
		r.Add(0, "cannot serve", doc.Unservable)
	}
	if opt.ShowKey && opt.Unlocked != nil && len(opt.Unlocked.Key) > 0 {
		doc.Key = hex.EncodeToString(opt.Unlocked.Key)
		r.Add(0, "key", doc.Key)
	}
	r.Doc = doc
	return r, nil
}

func sizeText(n uint64) string {
	if n > 1<<62 {
		return fmt.Sprintf("%d bytes", n)
	}
	return fmt.Sprintf("%d bytes (%s)", n, bytesize.Human(int64(n)))
}

// The --json document of info.
type reportDoc struct {
	Format         string    `json:"format"`
	Partition      int       `json:"partition,omitempty"`
	PhysicalVolume pvDoc     `json:"physical_volume"`
	VolumeGroup    vgDoc     `json:"volume_group"`
	LogicalVolume  lvDoc     `json:"logical_volume"`
	Conversion     string    `json:"conversion,omitempty"`
	CryptoUsers    []userDoc `json:"crypto_users"`
	VolumeKeys     []keyDoc  `json:"volume_keys"`
	Warnings       []string  `json:"warnings,omitempty"`
	Unusable       string    `json:"cannot_unlock,omitempty"`
	Unservable     string    `json:"cannot_serve,omitempty"`
	Key            string    `json:"key,omitempty"`
}

type pvDoc struct {
	UUID      string `json:"uuid"`
	Offset    int64  `json:"offset"`
	Size      uint64 `json:"size"`
	BlockSize uint32 `json:"block_size"`
}

type vgDoc struct {
	UUID string `json:"uuid"`
	Name string `json:"name,omitempty"`
}

type lvDoc struct {
	Name       string      `json:"name,omitempty"`
	UUID       string      `json:"uuid"`
	FamilyUUID string      `json:"family_uuid"`
	Size       uint64      `json:"size"`
	Content    string      `json:"content,omitempty"`
	Extents    []extentDoc `json:"extents,omitempty"`
}

type extentDoc struct {
	Offset int64 `json:"offset"`
	Length int64 `json:"length"`
	Source int64 `json:"source"`
}

type userDoc struct {
	Index      int    `json:"index"`
	UUID       string `json:"uuid"`
	Type       string `json:"type,omitempty"`
	KEK        string `json:"kek_uuid,omitempty"`
	KDF        string `json:"kdf,omitempty"`
	Iterations uint32 `json:"iterations,omitempty"`
	Salt       string `json:"salt,omitempty"`
	Hint       string `json:"hint,omitempty"`
	Unusable   string `json:"unusable,omitempty"`
}

type keyDoc struct {
	UUID      string  `json:"uuid"`
	Index     *uint64 `json:"index,omitempty"`
	KEK       string  `json:"kek_uuid,omitempty"`
	Algorithm string  `json:"algorithm,omitempty"`
	Wrapped   bool    `json:"wrapped"`
	InUse     bool    `json:"in_use,omitempty"`
}
