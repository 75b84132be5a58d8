package disk

import (
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/xtsctl/xtsctl/internal/words"
)

// A HeaderBackuper is a Header that can be saved whole, key slots and all,
// to restore later (HeaderRestorer).
type HeaderBackuper interface {
	// Backup writes the header backup to w and describes it: "the header
	// of disk.vol (UUID ..., generation 3, key slots 0, 1)", and what the
	// user must know of the file ("holds the wrapped master key: ...").
	Backup(w io.Writer) (what, warning string, err error)
}

// A HeaderRestorer is a Format whose header backups can be written back
// onto an image: one whose header may be damaged, so it takes the image,
// not a Header. The image was opened with WriteHeader access.
type HeaderRestorer interface {
	// IsBackup reports whether r (size bytes) is a header backup of this
	// format.
	IsBackup(r io.ReaderAt, size int64) bool
	// Restore writes the backup onto img and says what it restored.
	Restore(img *Image, backup io.ReaderAt, size int64, opt RestoreOptions) (string, error)
}

// RestoreOptions say how a header is restored.
type RestoreOptions struct {
	// BackupName names the backup in messages.
	BackupName string
	// Force restores a backup of another image, or onto an image with no
	// readable header.
	Force bool
	// Confirm asks the user to go on with what the question says
	// (restoring brings back removed passphrases, or drops new ones); an
	// error stops the restore before anything is written.
	Confirm func(question string) error
}

// DescribeRollback says what restoring a backup does to the passphrases:
// the slots it brings back as they were (back) and those it removes
// (gone); "" when nothing changes.
func DescribeRollback(back, gone []int) string {
	var parts []string
	if len(back) > 0 {
		parts = append(parts, fmt.Sprintf("brings back the %s as they were (removed or changed since the backup)", slotsNoun(back)))
	}
	if len(gone) > 0 {
		parts = append(parts, fmt.Sprintf("removes the %s (added since)", slotsNoun(gone)))
	}
	return strings.Join(parts, " and ")
}

func slotsNoun(slots []int) string {
	if len(slots) == 1 {
		return fmt.Sprintf("passphrase of key slot %d", slots[0])
	}
	return "passphrases of key slots " + words.List(slots)
}

// PickRestorer is the format whose header the backup (size bytes of b)
// restores onto image: typeName (a --type) if given, else the format that
// recognises the backup as its own, else the one whose header the image
// carries, else fallback.
func PickRestorer(typeName, image string, b io.ReaderAt, size int64, fallback string) (HeaderRestorer, error) {
	pick := func(f Format) (HeaderRestorer, error) {
		r, ok := f.(HeaderRestorer)
		if !ok {
			return nil, WithKind(KindUsage, fmt.Errorf("%s has no header backups to restore", f.Info().Title))
		}
		return r, nil
	}
	if typeName != "" {
		f, ok := Lookup(typeName)
		if !ok {
			return nil, WithKind(KindUsage, fmt.Errorf("unknown --type %q", typeName))
		}
		return pick(f)
	}
	for _, f := range Formats() {
		if r, ok := f.(HeaderRestorer); ok && r.IsBackup(b, size) {
			return r, nil
		}
	}
	if img, err := os.Open(image); err == nil {
		defer img.Close()
		if n, err := img.Seek(0, io.SeekEnd); err == nil {
			if found := Detect(img, n); len(found) == 1 {
				return pick(found[0])
			}
		}
	}
	f, ok := Lookup(fallback)
	if !ok {
		return nil, NotFormat("%s: no format recognises the header backup", image)
	}
	return pick(f)
}
