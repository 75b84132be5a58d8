package main

import (
	"cmp"
	"fmt"
	"maps"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/xtsctl/xtsctl/volume"
)

// TestNewSlotHonoursChosenMemory: a memory the user gives is what the new
// slot gets, LUKS2 keyslot or volume slot, made by format or by passphrase
// add; only the passes are calibrated. When even the fewest passes over it
// take longer than --kdf-time, stderr says that the memory was honoured
// and the time was not. (CI once saw `--kdf-time 1s --kdf-memory 32M` give
// a 12.1 MiB keyslot on a loaded machine.) Nothing here is timed: the
// memories are fixed, and the times asked for are far below what the
// fewest passes take on any machine, so a busy one only widens the margin.
func TestNewSlotHonoursChosenMemory(t *testing.T) {
	saved := maps.Clone(testOnlyKDF)
	clear(testOnlyKDF)
	defer maps.Copy(testOnlyKDF, saved)
	dir := t.TempDir()
	pass := secretFile(t, dir, "pass", []byte("chosen memory"))
	pass2 := secretFile(t, dir, "pass2", []byte("second"))

	// LUKS2: 4 passes over 256 MiB take far longer than 50 ms.
	img := filepath.Join(dir, "luks")
	_, stderr := xt(t, "format", "--type", "luks2", "--key-file", pass, "--kdf-memory", "256M", "--kdf-time", "50ms", "--size", "1M", img)
	if k := luksHeaderOf(t, img).Keyslots[0].KDF; k.Type != "argon2id" || k.MemoryKiB != 256<<10 || k.Time != 4 {
		t.Errorf("--kdf-memory 256M --kdf-time 50ms: keyslot 0 has %v, want argon2id, 4 passes over 256 MiB", k)
	}
	for _, want := range []string{"passphrase hashing: Argon2id, 4 passes, 256.0 MiB", "--kdf-memory 256.0 MiB takes longer than --kdf-time 50ms", "the memory was honoured, not the time"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("format --type luks2 said nothing with %q:\n%s", want, stderr)
		}
	}
	// passphrase add calibrates the same way, and keeps its memory.
	_, stderr = xt(t, "passphrase", "add", "--key-file", pass, "--new-key-file", pass2, "--kdf-memory", "48M", "--kdf-time", "100ms", img)
	if k := luksHeaderOf(t, img).Keyslots[1].KDF; k.Type != "argon2id" || k.MemoryKiB != 48<<10 || k.Time < 4 {
		t.Errorf("passphrase add --kdf-memory 48M: keyslot 1 has %v, want argon2id, at least 4 passes over 48 MiB", k)
	}
	if !strings.Contains(stderr, "calibrating the passphrase hashing (Argon2id over --kdf-memory 48.0 MiB) to take 100ms") || !strings.Contains(stderr, "passphrase hashing: Argon2id, ") {
		t.Errorf("passphrase add did not say what it calibrated and chose:\n%s", stderr)
	}

	// A volume: one pass over 256 MiB takes far longer than 1 ms.
	vol := filepath.Join(dir, "vol")
	_, stderr = xt(t, "format", "--passphrase-file", pass, "--kdf-memory", "256M", "--kdf-time", "1ms", "--size", "1M", vol)
	if k := volumeSlotKDF(t, vol, 0); k.MemoryKiB != 256<<10 || k.Time != volume.MinKDFPasses {
		t.Errorf("--kdf-memory 256M --kdf-time 1ms: volume slot 0 has %+v, want %d pass over 256 MiB", k, volume.MinKDFPasses)
	}
	if !strings.Contains(stderr, "passphrase hashing: Argon2id, 1 pass, 256.0 MiB") || !strings.Contains(stderr, "the memory was honoured, not the time") {
		t.Errorf("format (volume) did not say which was honoured:\n%s", stderr)
	}
	xt(t, "passphrase", "add", "--passphrase-file", pass, "--new-passphrase-file", pass2, "--kdf-memory", "40M", "--kdf-time", "100ms", vol)
	if k := volumeSlotKDF(t, vol, 1); k.MemoryKiB != 40<<10 || k.Time < 1 {
		t.Errorf("passphrase add --kdf-memory 40M: volume slot 1 has %+v, want 40 MiB", k)
	}
}

func volumeSlotKDF(t *testing.T, path string, slot int) volume.KDFParams {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fi, _ := f.Stat()
	hs, err := volume.ReadHeaders(f, fi.Size())
	if err != nil {
		t.Fatal(err)
	}
	return hs.Header.Slots[slot].KDF
}

// realKDFEnv makes an xtsctl process the tests start calibrate for real.
const realKDFEnv = "XTSCTL_TEST_REAL_KDF"

// TestLUKSKeyslotLikeCryptsetup: a new LUKS2 keyslot at the defaults
// (format --type luks2) is about as strong as the one `cryptsetup
// luksFormat --type luks2` makes on the same machine in the same run: its
// memory, and its unlock time, within 0.67-1.5x of cryptsetup's. Both
// are made in turn, three times, the order alternating, each by its own
// process. Other work on the machine only ever makes a run take longer
// by the wall clock, which cryptsetup's calibration reads as a slower
// machine: so cryptsetup's choice is the largest of its three (the one
// least bent by load), ours the median. Those two keyslots' unlock times
// are taken the same way (`cryptsetup open --test-passphrase`, timed),
// alternating, three times each, and the shortest of each compared.
//
// It runs only when asked (XTSCTL_CALIBRATION_TEST=1, on a quiet
// machine): under sustained load all three of cryptsetup's choices are
// bent (ours, timed by CPU time over its lanes, are not: internal/kdfcal),
// and no design of this test makes the two agree then. On a shared 2-core
// machine under load 12, cryptsetup picked 83-155 MiB, xtsctl 567-664
// MiB; nice -20 did not help (the kernel shares the CPUs between sessions
// first: autogroups). Under load 5-7, cryptsetup 136, 554 and 352 MiB,
// xtsctl 620-753 MiB. It takes a few minutes and up to 1 GiB of memory at
// a time.
func TestLUKSKeyslotLikeCryptsetup(t *testing.T) {
	if os.Getenv("XTSCTL_CALIBRATION_TEST") != "1" {
		t.Skip("timed, against cryptsetup's wall-clock calibration: set XTSCTL_CALIBRATION_TEST=1 on a quiet machine")
	}
	needCryptsetup(t)
	dir := t.TempDir()
	pass := secretFile(t, dir, "pass", []byte("as strong as cryptsetup's"))
	must := func(args ...string) string {
		c := exec.Command(args[0], args[1:]...)
		c.Env = append(os.Environ(), realKDFEnv+"=1")
		out, err := c.CombinedOutput()
		if err != nil {
			t.Fatalf("%s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	type slot struct {
		img    string
		memKiB uint32
	}
	var css, ours []slot
	for round := range 3 {
		csImg, ourImg := filepath.Join(dir, fmt.Sprint("cs", round)), filepath.Join(dir, fmt.Sprint("ours", round))
		makeCS := func() {
			sparse(t, csImg, 17<<20)
			must("cryptsetup", "luksFormat", "--batch-mode", "--type", "luks2", "--key-file", pass, csImg)
		}
		makeOurs := func() {
			must("xtsctl", "format", "--type", "luks2", "--key-file", pass, "--size", "1M", ourImg)
		}
		if round%2 == 0 {
			makeCS()
			makeOurs()
		} else {
			makeOurs()
			makeCS()
		}
		ck, ok := luksHeaderOf(t, csImg).Keyslots[0].KDF, luksHeaderOf(t, ourImg).Keyslots[0].KDF
		if ck.Type != "argon2id" || ok.Type != "argon2id" {
			t.Fatalf("keyslots %v (cryptsetup) and %v (xtsctl): want argon2id", ck, ok)
		}
		t.Logf("round %d: cryptsetup %v; xtsctl %v", round, ck, ok)
		css, ours = append(css, slot{csImg, ck.MemoryKiB}), append(ours, slot{ourImg, ok.MemoryKiB})
	}
	byMem := func(a, b slot) int { return cmp.Compare(a.memKiB, b.memKiB) }
	cs, our := slices.MaxFunc(css, byMem), slices.SortedFunc(slices.Values(ours), byMem)[len(ours)/2]
	unlock := func(img string) time.Duration {
		start := time.Now()
		must("cryptsetup", "open", "--test-passphrase", "--key-file", pass, img)
		return time.Since(start)
	}
	csUnlock, ourUnlock := time.Duration(math.MaxInt64), time.Duration(math.MaxInt64)
	for i := range 3 {
		if i%2 == 0 {
			csUnlock = min(csUnlock, unlock(cs.img))
			ourUnlock = min(ourUnlock, unlock(our.img))
		} else {
			ourUnlock = min(ourUnlock, unlock(our.img))
			csUnlock = min(csUnlock, unlock(cs.img))
		}
	}
	mem := float64(our.memKiB) / float64(cs.memKiB)
	unl := float64(ourUnlock) / float64(csUnlock)
	t.Logf("memory %d KiB (xtsctl, median) / %d KiB (cryptsetup, largest) = %.2f; unlock %v / %v = %.2f",
		our.memKiB, cs.memKiB, mem, ourUnlock, csUnlock, unl)
	if mem < 0.67 || mem > 1.5 {
		t.Errorf("xtsctl's keyslot memory is %.2fx cryptsetup's", mem)
	}
	if unl < 0.67 || unl > 1.5 {
		t.Errorf("xtsctl's keyslot unlocks in %.2fx the time of cryptsetup's", unl)
	}
}
