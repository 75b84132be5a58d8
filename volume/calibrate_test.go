package volume

import (
	"fmt"
	"testing"
	"time"

	"github.com/xtsctl/xtsctl/disk"
)

// TestNewSlotKDFRefusesBeforeCalibrating: a --kdf-memory that no slot may
// have (more than 4 GiB) is refused at once, as a usage error, before
// seconds of calibration over it.
func TestNewSlotKDFRefusesBeforeCalibrating(t *testing.T) {
	var said []string
	k := disk.NewKDF{Time: 2 * time.Second, MemoryKiB: 5 << 20, Info: func(f string, a ...any) { said = append(said, fmt.Sprintf(f, a...)) }}
	p, err := NewSlotKDF(k)
	if err == nil || disk.KindOf(err) != disk.KindUsage {
		t.Fatalf("NewSlotKDF(--kdf-memory 5G) = %+v, %v: want a usage error", p, err)
	}
	if len(said) > 0 {
		t.Errorf("it calibrated first: %q", said)
	}
	t.Log(err)
}
