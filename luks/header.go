package luks

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/xtsctl/xtsctl/internal/bytesize"
	"github.com/xtsctl/xtsctl/internal/dmtable"
)

// Header is a LUKS1 or LUKS2 header as read from an image (or a detached
// header file). Everything in it has passed the checksum (LUKS2) and the
// structural bounds checks; whether this package can unlock and decrypt
// the volume is a separate question that Supported answers.
type Header struct {
	Version   int       `json:"version"`             // 1 or 2
	UUID      string    `json:"uuid"`                // as written, normally 36 characters
	Label     string    `json:"label,omitempty"`     // LUKS2 only
	Subsystem string    `json:"subsystem,omitempty"` // LUKS2 only
	Cipher    string    `json:"cipher"`              // the data segment's cipher as dm-crypt names it, e.g. "aes-xts-plain64"
	KeySize   int       `json:"key_size"`            // volume key bytes: 32 for AES-128-XTS, 64 for AES-256-XTS; 0 if no keyslot says (LUKS2 with none left)
	Hash      string    `json:"hash,omitempty"`      // LUKS1: the hash of PBKDF2, the AF splitter and the digest
	Segment   Segment   `json:"segment"`             // the data segment: segment 0, or the reencryption target while one is in progress
	Segments  int       `json:"segments"`            // how many segments the header has (LUKS2 has more only while reencrypting, or from a newer cryptsetup)
	Keyslots  []Keyslot `json:"keyslots"`
	Digests   []Digest  `json:"digests"`
	Tokens    []Token   `json:"tokens,omitempty"`
	Copies    []Copy    `json:"copies,omitempty"` // LUKS2: both header copies, as found
	SeqID     uint64    `json:"seqid,omitempty"`  // LUKS2: the sequence number of the copy in use ("Epoch" in luksDump)

	MetadataSize uint64   `json:"metadata_size,omitempty"` // LUKS2: bytes per header copy, binary header and JSON area
	KeyslotsSize uint64   `json:"keyslots_size,omitempty"` // LUKS2: bytes of the keyslots area after both copies
	Flags        []string `json:"flags,omitempty"`         // LUKS2 config.flags: persistent dm-crypt options ("allow-discards", ...)
	Requirements []string `json:"requirements,omitempty"`  // LUKS2 config.requirements.mandatory
	// OtherSegments are the LUKS2 segments besides Segment, by ID.
	OtherSegments []Segment `json:"other_segments,omitempty"`

	// HeaderSize is how many bytes of the header device the header uses:
	// both LUKS2 copies and the keyslots area, or the LUKS1 header up to
	// the end of its last key material. A header backup is this long.
	HeaderSize uint64 `json:"header_size"`

	meta        *jvalue        // LUKS2 metadata, kept whole for rewriting
	digestIdx   map[string]int // digest names to places in Digests
	salts       [2][saltLen2]byte
	checksumAlg string
}

// Segment is the encrypted data area.
type Segment struct {
	ID         int      `json:"id"`
	Type       string   `json:"type"`           // "crypt"
	Offset     uint64   `json:"offset"`         // bytes from the start of the data device
	Size       uint64   `json:"size,omitempty"` // bytes, when not Dynamic
	Dynamic    bool     `json:"dynamic"`        // the segment runs to the end of the data device
	IVTweak    uint64   `json:"iv_tweak"`       // LUKS2 iv_tweak; not applied, as cryptsetup does not (see SectorParams)
	Cipher     string   `json:"cipher"`
	SectorSize int      `json:"sector_size"`         // encryption unit: 512..4096
	Integrity  string   `json:"integrity,omitempty"` // LUKS2 integrity type, "" for none
	Flags      []string `json:"flags,omitempty"`     // LUKS2 segment flags
}

// Priority is a LUKS2 keyslot priority.
type Priority int

const (
	PriorityIgnore Priority = 0 // tried only when picked explicitly
	PriorityNormal Priority = 1
	PriorityPrefer Priority = 2 // tried before the others
)

// MarshalText gives the priority's name, as luksDump shows it.
func (p Priority) MarshalText() ([]byte, error) { return []byte(p.String()), nil }

func (p Priority) String() string {
	switch p {
	case PriorityIgnore:
		return "ignored"
	case PriorityNormal:
		return "normal"
	case PriorityPrefer:
		return "preferred"
	}
	return fmt.Sprintf("Priority(%d)", int(p))
}

// Keyslot is one active keyslot.
type Keyslot struct {
	ID       int      `json:"id"`
	Type     string   `json:"type"`     // "luks2"; "luks1" for LUKS1 slots
	KeySize  int      `json:"key_size"` // bytes of the key it stores
	Priority Priority `json:"priority"`
	KDF      KDF      `json:"kdf"`
	AF       AF       `json:"af"`
	Area     Area     `json:"area"`
	Digest   int      `json:"digest"` // the digest that checks the key it stores; -1 if none
	// Unbound: the digest that checks its key names no segment, so the key
	// opens no data (cryptsetup's "unbound" keyslot, luksAddKey --unbound).
	// Its passphrase can still be tested (TestPassphrase with the keyslot
	// picked).
	Unbound bool `json:"unbound,omitempty"`
	// Err says why this keyslot cannot be used to open the data segment
	// (*UnsupportedError or *CorruptError), nil if it can be tried. JSON
	// shows it as "error".
	Err error `json:"-"`

	name   string // its name in the JSON area ("" for LUKS1)
	pos    int    // its place in the JSON area: cryptsetup tries keyslots in this order
	useErr error  // a field read only to open it (a KDF salt) is unusable
}

// MarshalJSON adds Err as a string.
func (k Keyslot) MarshalJSON() ([]byte, error) {
	type plain Keyslot
	return json.Marshal(struct {
		plain
		Error string `json:"error,omitempty"`
	}{plain(k), errString(k.Err)})
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// KDF is a keyslot's key derivation and its costs, as read from the image.
type KDF struct {
	Type       string `json:"type"`                 // "pbkdf2", "argon2i" or "argon2id"
	Hash       string `json:"hash,omitempty"`       // pbkdf2
	Iterations uint32 `json:"iterations,omitempty"` // pbkdf2
	Time       uint32 `json:"time,omitempty"`       // argon2: passes
	MemoryKiB  uint32 `json:"memory_kib,omitempty"` // argon2
	Threads    uint32 `json:"threads,omitempty"`    // argon2: lanes ("cpus")
	Salt       []byte `json:"salt"`
}

// String describes the KDF and its costs for people: "argon2id, 4
// passes, 1.0 GiB, 4 threads" or "pbkdf2-sha256, 1000 iterations".
func (k KDF) String() string {
	switch k.Type {
	case "pbkdf2":
		return fmt.Sprintf("pbkdf2-%s, %d iterations", k.Hash, k.Iterations)
	case "argon2i", "argon2id":
		return fmt.Sprintf("%s, %d passes, %s, %d threads", k.Type, k.Time, bytesize.Human(int64(k.MemoryKiB)<<10), k.Threads)
	}
	return k.Type
}

// AF is a keyslot's anti-forensic splitter.
type AF struct {
	Type    string `json:"type"` // "luks1"
	Stripes int    `json:"stripes"`
	Hash    string `json:"hash"`
}

// Area is where a keyslot's split key lies on the header device, and how
// it is encrypted.
type Area struct {
	Type    string `json:"type"`     // "raw"
	Offset  uint64 `json:"offset"`   // bytes
	Size    uint64 `json:"size"`     // bytes
	Cipher  string `json:"cipher"`   // "aes-xts-plain64"
	KeySize int    `json:"key_size"` // bytes of the key derived from the passphrase
}

// Digest checks a volume key: PBKDF2(hash, key, salt, iterations) must
// equal Value.
type Digest struct {
	ID         int    `json:"id"`
	Type       string `json:"type"` // "pbkdf2"
	Keyslots   []int  `json:"keyslots"`
	Segments   []int  `json:"segments"`
	Hash       string `json:"hash"`
	Iterations uint32 `json:"iterations"`
	Salt       []byte `json:"salt"`
	Value      []byte `json:"digest"`
	// Err says why the digest cannot check a key (*UnsupportedError or
	// *CorruptError): the keyslots it checks cannot be used. JSON shows it
	// as "error".
	Err error `json:"-"`

	name string // its name in the JSON area
}

// MarshalJSON adds Err as a string.
func (d Digest) MarshalJSON() ([]byte, error) {
	type plain Digest
	return json.Marshal(struct {
		plain
		Error string `json:"error,omitempty"`
	}{plain(d), errString(d.Err)})
}

// Token is a LUKS2 token (a way to obtain a keyslot's passphrase other
// than typing it: systemd-tpm2, systemd-fido2, luks2-keyring, ...). This
// package does not run tokens; it lists them.
type Token struct {
	ID       int    `json:"id"`
	Type     string `json:"type"`
	Keyslots []int  `json:"keyslots"`
	// Runnable says whether xtsctl can run this type of token to unlock
	// (TokenRunnable): false for every type today, so a keyslot bound to a
	// token opens only with its passphrase, typed.
	Runnable bool `json:"runnable"`
}

// TokenRunnable reports whether xtsctl can run tokens of type typ to
// obtain a keyslot's passphrase. It runs none: systemd-tpm2 needs a TPM,
// systemd-fido2 a FIDO2 device, luks2-keyring the kernel keyring, and the
// rest are plugins of cryptsetup.
func TokenRunnable(typ string) bool { return false }

// CopyState is the state of a LUKS2 header copy.
type CopyState string

const (
	CopyOK      CopyState = "ok"
	CopyStale   CopyState = "stale"   // valid, but older than the other copy
	CopyDamaged CopyState = "damaged" // present but fails its checks
	CopyMissing CopyState = "missing" // not found at any offset the format allows
)

// Copy is one of the two LUKS2 header copies.
type Copy struct {
	Name   string    `json:"name"` // "primary" or "secondary"
	Offset uint64    `json:"offset"`
	SeqID  uint64    `json:"seqid,omitempty"` // valid when State is CopyOK or CopyStale
	State  CopyState `json:"state"`
	Err    error     `json:"-"`    // why it is damaged; "error" in JSON
	Used   bool      `json:"used"` // the header was read from this copy
}

// MarshalJSON adds Err as a string.
func (c Copy) MarshalJSON() ([]byte, error) {
	type plain Copy
	return json.Marshal(struct {
		plain
		Error string `json:"error,omitempty"`
	}{plain(c), errString(c.Err)})
}

// binary magics
var (
	magic1 = []byte("LUKS\xba\xbe")
	magic2 = []byte("SKUL\xba\xbe")
)

// ReadHeader reads the LUKS header of an image, or of a detached header
// file, from r, which holds size bytes. It checks LUKS2 checksums before
// interpreting anything else, falls back to the LUKS2 secondary copy when
// the primary is damaged, and bounds every size, offset and count against
// the format and size.
func ReadHeader(r io.ReaderAt, size int64) (*Header, error) {
	if size < 0 {
		return nil, fmt.Errorf("negative device size %d", size)
	}
	first := make([]byte, min(size, binHeaderSize))
	if err := readFull(r, first, 0); err != nil {
		return nil, err
	}
	if len(first) >= 8 && bytes.Equal(first[:6], magic1) && binary.BigEndian.Uint16(first[6:8]) == 1 {
		if len(first) < luks1HeaderSize {
			return nil, corrupt("LUKS1 header", "the %d-byte device is shorter than the %d-byte header", size, luks1HeaderSize)
		}
		return parseLUKS1(first[:luks1HeaderSize], uint64(size))
	}
	return readLUKS2(r, uint64(size))
}

// Detect reports whether r (size bytes) holds a LUKS header, even one this
// package cannot use: the LUKS1 or LUKS2 magic at its start, or a LUKS2
// secondary header where the primary is gone. It is what tells a LUKS image
// from others without the user naming its type.
func Detect(r io.ReaderAt, size int64) bool {
	var m [6]byte
	if n, _ := r.ReadAt(m[:], 0); n == len(m) && (bytes.Equal(m[:], magic1) || bytes.Equal(m[:], magic2)) {
		return true
	}
	if size <= 0 {
		return false
	}
	_, err := ReadHeader(r, size)
	return err == nil || errors.Is(err, ErrCorrupt) || errors.Is(err, ErrUnsupported)
}

// readFull reads len(b) bytes at off; a short read is an error naming the offset.
func readFull(r io.ReaderAt, b []byte, off int64) error {
	n, err := r.ReadAt(b, off)
	if n == len(b) {
		return nil
	}
	if err == nil || err == io.EOF {
		err = io.ErrUnexpectedEOF
	}
	return fmt.Errorf("reading %d bytes at offset %d: %w", len(b), off, err)
}

// cstring returns b up to its first NUL.
func cstring(b []byte) string {
	if i := bytes.IndexByte(b, 0); i >= 0 {
		b = b[:i]
	}
	return string(b)
}

// Supported reports whether this package can unlock the volume and
// decrypt its data: nil, or an *UnsupportedError naming the first thing it
// cannot do (its CryptsetupOpens says whether cryptsetup, with
// device-mapper, would). Keyslots this package cannot use are not an error
// here as long as one can be tried (see Keyslot.Err).
func (h *Header) Supported() error {
	for _, r := range h.Requirements {
		switch {
		case strings.Contains(r, "reencrypt"):
			ue := unsupported(FeatureReencryption, fmt.Sprintf("(requirement %q)", r), "finish it with cryptsetup reencrypt first")
			// cryptsetup opens a volume while an online reencryption of it
			// runs, not while the old offline tool's does, nor a version
			// it does not know.
			ue.CryptsetupOpens = r == "online-reencrypt-v2" || r == "online-reencrypt-v3"
			return ue
		case strings.Contains(r, "opal"):
			return unsupported(FeatureOPAL, fmt.Sprintf("(requirement %q)", r), "")
		default:
			return unsupported(FeatureRequirement, fmt.Sprintf("%q", r), "a newer cryptsetup feature this package does not know")
		}
	}
	for _, k := range h.Keyslots {
		if k.Type == "reencrypt" {
			return unsupported(FeatureReencryption, fmt.Sprintf("(keyslot %d is a reencryption keyslot)", k.ID), "finish it with cryptsetup reencrypt first")
		}
	}
	if h.Segments != 1 {
		return unsupported(FeatureSegments, fmt.Sprintf("(%d segments)", h.Segments), "only volumes with one data segment")
	}
	s := h.Segment
	switch {
	case strings.HasPrefix(s.Type, "hw-opal"):
		return unsupported(FeatureOPAL, fmt.Sprintf("(segment type %q)", s.Type), "")
	case s.Type != "crypt":
		return unsupported(FeatureSegmentType, fmt.Sprintf("%q", s.Type), "want crypt")
	case s.Integrity != "":
		ue := unsupported(FeatureIntegrity, s.Integrity, "dm-integrity is not implemented")
		ue.CryptsetupOpens = true
		return ue
	case len(s.Flags) > 0:
		ue := unsupported(FeatureSegmentFlag, fmt.Sprintf("%q", s.Flags[0]), "")
		ue.CryptsetupOpens = true // cryptsetup activates a segment whatever flags it has
		return ue
	}
	if err := checkDataCipher(s.Cipher); err != nil {
		return err
	}
	switch s.SectorSize {
	case 512, 1024, 2048, 4096:
	default:
		return unsupported(FeatureSectorSize, fmt.Sprintf("%d bytes", s.SectorSize), "want 512, 1024, 2048 or 4096, as dm-crypt")
	}
	if h.KeySize != 0 && h.KeySize != 32 && h.KeySize != 64 {
		return unsupported(FeatureKeySize, fmt.Sprintf("%d bits", h.KeySize*8), "want 256 (AES-128-XTS) or 512 (AES-256-XTS)")
	}
	return nil
}

func checkDataCipher(c string) error {
	switch c {
	case dmtable.DefaultCipher, "aes-xts-plain":
		return nil
	}
	ue := unsupported(FeatureCipher, c, "only aes-xts-plain64 and aes-xts-plain")
	ue.CryptsetupOpens = cryptsetupCipher(c)
	return ue
}

// cryptsetupCipher reports whether cryptsetup takes c as a dm-crypt
// cipher: "cipher-mode" or "cipher-chain-iv" with a name of lower-case
// letters and digits, or a kernel crypto API spec ("capi:..."). Whether
// the kernel has it is not known here.
func cryptsetupCipher(c string) bool {
	if strings.HasPrefix(c, "capi:") {
		return len(c) > len("capi:")
	}
	parts := strings.Split(c, "-")
	if len(parts) < 2 || len(parts) > 3 {
		return false
	}
	for i, p := range parts {
		ok := p != ""
		for _, r := range p {
			ok = ok && (r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '_' || i > 0 && (r == ':' || r == '(' || r == ')'))
		}
		if !ok {
			return false
		}
	}
	return true
}

// cryptsetupHash reports whether cryptsetup's crypto backend (OpenSSL 3 in
// Debian's cryptsetup 2.6) has a hash this package lacks.
func cryptsetupHash(name string) bool {
	switch strings.ToLower(name) {
	case "whirlpool", "sm3", "stribog256", "stribog512":
		return true
	}
	return false
}

// Detached reports whether the data segment starts at offset 0 of the
// data device: the layout of a detached header (cryptsetup --header), whose
// data is on another device. Read from the image itself, without a data
// device given apart, such a header would be read (and written) as data.
func (h *Header) Detached() bool { return h.Segment.Offset == 0 }

// Keyslot returns the keyslot with the given ID, or nil: the one
// cryptsetup finds by that number (a keyslot whose name is not the
// number's canonical spelling, such as "01", is listed but never found).
func (h *Header) Keyslot(id int) *Keyslot {
	for i := range h.Keyslots {
		if k := &h.Keyslots[i]; k.ID == id && k.canonical() {
			return k
		}
	}
	return nil
}

// canonical reports whether the keyslot is found by its number.
func (k *Keyslot) canonical() bool { return k.name == nameOf(k.ID) }

// KeyslotIDs returns the IDs of the keyslots in use, in order.
func (h *Header) KeyslotIDs() []int {
	ids := make([]int, 0, len(h.Keyslots))
	for _, k := range h.Keyslots {
		ids = append(ids, k.ID)
	}
	slices.Sort(ids)
	return ids
}

// Summary describes the volume's encryption in one line: "LUKS2,
// aes-xts-plain64, 512-bit key, 4096-byte sectors".
func (h *Header) Summary() string {
	return fmt.Sprintf("LUKS%d, %s, %d-bit key, %d-byte sectors", h.Version, h.Cipher, 8*h.KeySize, h.Segment.SectorSize)
}

// checkKeyLen checks a volume key's length against the header's key size,
// or against the sizes supported when no keyslot tells it.
func (h *Header) checkKeyLen(key []byte) error {
	if len(key) == h.KeySize || h.KeySize == 0 && (len(key) == 32 || len(key) == 64) {
		return nil
	}
	want := h.KeySize
	if want == 0 {
		want = 64
	}
	return fmt.Errorf("volume key is %d bytes, the header wants %d", len(key), want)
}

// digest returns the digest cryptsetup finds by number id: the one named
// by the number's canonical spelling, or nil.
func (h *Header) digest(id int) *Digest {
	if h.digestIdx == nil {
		h.indexDigests()
	}
	if i, ok := h.digestIdx[nameOf(id)]; ok {
		return &h.Digests[i]
	}
	return nil
}

// indexDigests maps the digests' names to their place in h.Digests.
func (h *Header) indexDigests() {
	h.digestIdx = make(map[string]int, len(h.Digests))
	for i, d := range h.Digests {
		if _, ok := h.digestIdx[d.name]; !ok {
			h.digestIdx[d.name] = i
		}
	}
}

// segmentDigest returns the ID of the digest of segment seg, as
// cryptsetup's LUKS2_digest_by_segment finds it (the first that names the
// segment, in the order of the JSON area), or -1.
func (h *Header) segmentDigest(seg int) int {
	if h.meta == nil { // LUKS1: one digest, for the one segment
		return 0
	}
	for _, m := range h.meta.get("digests").obj {
		if containsName(m.val.get("segments"), nameOf(seg)) {
			return atoi(m.key)
		}
	}
	return -1
}
