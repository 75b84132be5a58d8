package luksimage

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/xtsctl/xtsctl/disk"
)

// TestNewKeyslotKDFRefusesBeforeCalibrating: a --kdf-memory that no
// keyslot may have (more than LUKS2's 4 GiB) is refused at once, as a
// usage error naming it, before seconds of calibration over it.
func TestNewKeyslotKDFRefusesBeforeCalibrating(t *testing.T) {
	var said []string
	k := disk.NewKDF{Time: 2 * time.Second, MemoryKiB: 5 << 20, Info: func(f string, a ...any) { said = append(said, fmt.Sprintf(f, a...)) }}
	p, err := NewKeyslotKDF(k)
	if err == nil || disk.KindOf(err) != disk.KindUsage || !strings.Contains(err.Error(), "4 GiB") {
		t.Fatalf("NewKeyslotKDF(--kdf-memory 5G) = %+v, %v: want a usage error naming the 4 GiB bound", p, err)
	}
	if len(said) > 0 {
		t.Errorf("it calibrated first: %q", said)
	}
}
