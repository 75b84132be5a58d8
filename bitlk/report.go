package bitlk

import (
	"encoding/hex"
	"fmt"
	"time"

	"github.com/xtsctl/xtsctl/disk"
)

// ReportDoc is the --json document of `info` for a BitLocker volume.
type ReportDoc struct {
	Format      string       `json:"format"` // "bitlk"
	ToGo        bool         `json:"to_go"`
	Version     int          `json:"version"` // 1: Windows Vista; 2: Windows 7 and later
	Method      string       `json:"method,omitempty"`
	MethodID    uint16       `json:"method_id,omitempty"`
	Cipher      string       `json:"cipher,omitempty"` // dm-crypt's name
	VolumeGUID  string       `json:"volume_guid,omitempty"`
	Description string       `json:"description,omitempty"`
	Created     *time.Time   `json:"created,omitempty"`
	SectorSize  int          `json:"sector_size"`
	VolumeSize  uint64       `json:"volume_size,omitempty"` // as the metadata says
	ImageSize   int64        `json:"image_size"`
	State       string       `json:"state,omitempty"`
	Encryption  string       `json:"encryption,omitempty"` // "normal", "encrypt-on-write" or the unknown GUID
	BootSectors *ReportArea  `json:"boot_sectors,omitempty"`
	Protectors  []ReportProt `json:"protectors"`
	Copies      []ReportCopy `json:"metadata_copies"`
	CopiesAgree bool         `json:"metadata_copies_agree"`
	Unsupported string       `json:"unsupported,omitempty"` // why the data cannot be served
	Key         string       `json:"key,omitempty"`         // the dm-crypt key, hex (--show-key)
}

// ReportArea is a run of the image.
type ReportArea struct {
	Offset uint64 `json:"offset"`
	Size   uint64 `json:"size"`
}

// ReportProt is one key protector.
type ReportProt struct {
	Index    int        `json:"index"`
	GUID     string     `json:"guid"`
	Type     string     `json:"type"` // as --protector takes it
	Title    string     `json:"title"`
	Name     string     `json:"name,omitempty"`
	Modified *time.Time `json:"modified,omitempty"`
	Usable   bool       `json:"usable"`
	Why      string     `json:"why_not,omitempty"`
}

// ReportCopy is one FVE metadata copy.
type ReportCopy struct {
	Index  int    `json:"index"`
	Offset uint64 `json:"offset"`
	Valid  bool   `json:"valid"`
	Used   bool   `json:"used"`
	Error  string `json:"error,omitempty"`
}

// Report is what `info` shows: method, volume GUID, description,
// creation time, protectors, the metadata copies and whether they agree.
func (h *Header) Report(opt disk.ReportOptions) (*disk.Report, error) {
	d := &ReportDoc{Format: Name, ToGo: h.boot.toGo, Version: h.boot.version, SectorSize: h.boot.sectorSize, ImageSize: h.size, Protectors: []ReportProt{}}
	r := &disk.Report{Doc: d}
	title := "BitLocker"
	if h.boot.toGo {
		title = "BitLocker To Go"
	}
	r.Add(0, "format", title)
	if h.boot.version == 1 {
		r.Add(0, "version", "1 (Windows Vista): not supported")
		d.Unsupported = "BitLocker version 1 (Windows Vista) is not supported"
		return r, nil
	}
	m := h.meta
	r.Add(0, "version", "2 (Windows 7 and later)")
	if meth, ok := lookupMethod(m.method); ok {
		d.Method, d.Cipher = meth.title, meth.cipher
		r.Add(0, "encryption method", fmt.Sprintf("%s (%#04x; dm-crypt %s, %d-bit key)", meth.title, m.method, meth.cipher, 8*meth.key))
	} else {
		r.Add(0, "encryption method", fmt.Sprintf("unknown (%#04x)", m.method))
	}
	d.MethodID = m.method
	d.VolumeGUID = m.volumeGUID.String()
	d.Description = m.description
	created := filetime(m.created)
	d.Created = &created
	r.Add(0, "volume GUID", d.VolumeGUID)
	r.Add(0, "description", d.Description)
	r.Add(0, "created", created.Format(time.RFC3339))
	r.Add(0, "sector size", fmt.Sprint(h.boot.sectorSize))
	d.VolumeSize = m.volumeSize
	r.Add(0, "volume size", fmt.Sprintf("%d bytes (image: %d)", m.volumeSize, h.size))
	d.State = stateText(m.curState, m.nextState)
	switch h.boot.infoGUID {
	case infoGUIDNormal:
		d.Encryption = "normal"
	case infoGUIDEOW:
		d.Encryption = "encrypt-on-write"
		d.State += ", encrypt-on-write (used space only)"
	default:
		d.Encryption = "{" + h.boot.infoGUID.String() + "}"
	}
	r.Add(0, "state", d.State)
	if m.volHeader != nil {
		d.BootSectors = &ReportArea{Offset: m.volHeader[0], Size: m.volHeader[1]}
		r.Add(0, "moved boot sectors", fmt.Sprintf("%d bytes at byte %d", m.volHeader[1], m.volHeader[0]))
	}
	r.Add(0, "protectors", fmt.Sprint(len(m.protectors)))
	for _, p := range m.protectors {
		rp := ReportProt{Index: p.index, GUID: p.guid.String(), Type: p.kind(), Title: p.title(), Name: p.name, Usable: true}
		if p.modified != 0 {
			t := filetime(p.modified)
			rp.Modified = &t
		}
		v := fmt.Sprintf("{%s} %s", rp.GUID, rp.Title)
		if err := p.usable(); err != nil {
			rp.Usable, rp.Why = false, err.Error()
			v += ": unusable, " + rp.Why
		}
		if p.name != "" {
			v += fmt.Sprintf(" (%s)", p.name)
		}
		d.Protectors = append(d.Protectors, rp)
		r.Add(1, fmt.Sprintf("protector %d", p.index), v)
	}
	r.Add(0, "metadata copies", "")
	for _, c := range h.copies {
		rc := ReportCopy{Index: c.index, Offset: uint64(c.offset), Valid: c.err == nil, Used: c.index == h.used}
		v := fmt.Sprintf("at byte %d: ", rc.Offset)
		switch {
		case c.err != nil:
			rc.Error = c.err.Error()
			v += "invalid, " + rc.Error
		case rc.Used:
			v += "valid, in use"
		default:
			v += "valid"
		}
		d.Copies = append(d.Copies, rc)
		r.Add(1, fmt.Sprintf("copy %d", c.index), v)
	}
	agree, why := h.copiesAgree()
	d.CopiesAgree = agree
	if agree {
		r.Add(1, "agree", "yes, all three are valid and identical")
	} else {
		r.Add(1, "agree", "no: "+why)
	}
	if err := h.unservable(); err != nil {
		d.Unsupported = err.Error()
		r.Add(0, "not supported", d.Unsupported)
	}
	if opt.ShowKey && opt.Unlocked != nil && len(opt.Unlocked.Key) > 0 {
		d.Key = hex.EncodeToString(opt.Unlocked.Key)
		r.Add(0, "key", d.Key)
	}
	return r, nil
}
