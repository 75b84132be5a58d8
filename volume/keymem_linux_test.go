package volume

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"io"
	"math/bits"
	"os"
	"os/exec"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unsafe"

	"golang.org/x/crypto/argon2"
	xblake2b "golang.org/x/crypto/blake2b"
	"golang.org/x/crypto/chacha20"
	"golang.org/x/crypto/chacha20poly1305"
	"golang.org/x/sys/unix"
)

// The memory test's helper process computes the fingerprints: it gets the
// master key on stdin and derives the other keys with x/crypto, not with
// this package's code, so the test process never holds a key it does not
// wipe itself (and the open volume's tag key, which the scan must find,
// checks the derivation on the way).
const (
	fpHelperEnv = "XTSCTL_KEYMEM_HELPER" // set in the helper: "K1 K2 digest-nonce salt:nonce,salt:nonce,..."
	fpWindow    = 16                     // bytes of key a fingerprint covers
)

// fpHash hashes a 16-byte window (lo, hi little-endian) with the per-run
// random odd multipliers k1, k2.
func fpHash(lo, hi, k1, k2 uint64) uint64 {
	x := lo*k1 ^ bits.RotateLeft64(hi*k2, 29)
	x ^= x >> 31
	return x * k1
}

// TestKeyFingerprintHelper is the helper process (it does nothing in a normal run).
func TestKeyFingerprintHelper(t *testing.T) {
	args := os.Getenv(fpHelperEnv)
	if args == "" {
		t.Skip("run by TestNoKeysInMemoryAfterClose")
	}
	f := strings.Fields(args)
	k1, _ := strconv.ParseUint(f[0], 16, 64)
	k2, _ := strconv.ParseUint(f[1], 16, 64)
	master, err := io.ReadAll(os.Stdin)
	if err != nil {
		t.Fatal(err)
	}
	derive := func(size int, purpose string) []byte {
		h, err := xblake2b.New(size, master)
		if err != nil {
			t.Fatal(err)
		}
		h.Write([]byte(purpose))
		return h.Sum(nil)
	}
	// XChaCha20-Poly1305 seals with HChaCha20(key, nonce[:16]): that
	// per-message subkey opens the sealed value as well as the key does.
	subkey := func(key []byte, nonceHex string) []byte {
		nonce, err := hex.DecodeString(nonceHex)
		if err != nil {
			t.Fatal(err)
		}
		k, err := chacha20.HChaCha20(key, nonce[:16])
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	type secret struct {
		name string
		key  []byte
	}
	digestKey := derive(chacha20poly1305.KeySize, purposeDigest)
	secrets := []secret{
		{"master key", master},
		{"tag key", derive(xblake2b.Size, purposeTags)},
		{"header MAC key", derive(64, purposeMAC)},
		{"state record key", derive(xblake2b.Size, purposeStateRecords)},
		{"bitmap key", derive(xblake2b.Size, purposeBitmap)},
		{"digest key", digestKey},
		{"digest subkey", subkey(digestKey, f[2])},
	}
	for i, s := range strings.Split(f[3], ",") {
		saltHex, nonceHex, _ := strings.Cut(s, ":")
		salt, err := hex.DecodeString(saltHex)
		if err != nil {
			t.Fatal(err)
		}
		wk := argon2.IDKey(testPass, salt, testKDF.Time, testKDF.MemoryKiB, testKDF.Threads, chacha20poly1305.KeySize)
		secrets = append(secrets,
			secret{fmt.Sprintf("wrapping key of slot %d", i), wk},
			secret{fmt.Sprintf("subkey of slot %d", i), subkey(wk, nonceHex)})
	}
	for _, s := range secrets {
		for off := 0; off+fpWindow <= len(s.key); off += 8 {
			lo := binary.LittleEndian.Uint64(s.key[off:])
			hi := binary.LittleEndian.Uint64(s.key[off+8:])
			fmt.Printf("fp\t%s\t%d\t%x\n", s.name, off, fpHash(lo, hi, k1, k2))
		}
	}
}

type fingerprint struct {
	secret string
	offset int
}

// keyFingerprints runs the helper with the master key on a pipe (not
// through a Go buffer) and returns what it computed.
func keyFingerprints(t *testing.T, master []byte, digestNonce string, slots []string, k1, k2 uint64) map[uint64]fingerprint {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestKeyFingerprintHelper$", "-test.count=1")
	cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%x %x %s %s", fpHelperEnv, k1, k2, digestNonce, strings.Join(slots, ",")))
	cmd.Stdin = r
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	r.Close()
	_, werr := w.Write(master)
	w.Close()
	if err := cmd.Wait(); err != nil || werr != nil {
		t.Fatalf("fingerprint helper: %v, %v\n%s", err, werr, out.String())
	}
	fps := map[uint64]fingerprint{}
	sc := bufio.NewScanner(&out)
	for sc.Scan() {
		f := strings.Split(sc.Text(), "\t")
		if len(f) != 4 || f[0] != "fp" {
			continue
		}
		off, _ := strconv.Atoi(f[2])
		h, _ := strconv.ParseUint(f[3], 16, 64)
		fps[h] = fingerprint{f[1], off}
	}
	if len(fps) == 0 {
		t.Fatalf("fingerprint helper printed nothing:\n%s", out.String())
	}
	return fps
}

// keyPiece is a place in memory where 16 bytes of a key were found.
type keyPiece struct {
	fingerprint
	addr   uintptr
	region string
	// signalFrame: inside the CPU registers the kernel saved on a
	// thread's signal stack when a signal interrupted it (see
	// inSignalFrame).
	signalFrame bool
}

// Linux x86-64 signal frames: the FPU/vector state (xsave layout) carries
// FP_XSTATE_MAGIC1 in its software bytes at offset 464, followed 16 bytes
// later by xstate_size, and FP_XSTATE_MAGIC2 right after the xsave area
// (arch/x86/include/uapi/asm/sigcontext.h).
const (
	fpXstateMagic1 = 0x46505853
	fpXstateMagic2 = 0x46505845
	fpSwBytes      = 464
)

// inSignalFrame reports whether addr lies in the saved vector registers of
// a signal frame; around holds the memory from addr-len(around)/2.
func inSignalFrame(around []byte, addr uintptr) bool {
	base := addr - uintptr(len(around)/2)
	for fp := addr &^ 63; fp > base && fp+fpSwBytes+20 <= base+uintptr(len(around)); fp -= 64 {
		i := int(fp - base)
		if binary.LittleEndian.Uint32(around[i+fpSwBytes:]) != fpXstateMagic1 {
			continue
		}
		size := uintptr(binary.LittleEndian.Uint32(around[i+fpSwBytes+16:]))
		end := int(fp + size - base)
		if addr < fp+size && end+4 <= len(around) && binary.LittleEndian.Uint32(around[end:]) == fpXstateMagic2 {
			return true
		}
	}
	return false
}

// scanMemory searches this process's readable anonymous memory (Go's heap
// and goroutine stacks, the thread stacks, cgo/libc heap) for the
// fingerprinted windows at every byte offset. It reads through
// /proc/self/mem into a buffer mapped outside Go's heap, which it skips.
func scanMemory(t *testing.T, fps map[uint64]fingerprint, k1, k2 uint64) (found []keyPiece, scanned int64) {
	t.Helper()
	const chunk, probeSize = 1 << 20, 16 << 10
	buf, err := unix.Mmap(-1, 0, chunk+fpWindow+probeSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(buf)
	probe := buf[chunk+fpWindow:]
	own := unsafePointer(buf)
	var filter [1 << 16 / 64]uint64
	for h := range fps {
		filter[h>>48/64] |= 1 << (h >> 48 % 64)
	}
	mem, err := os.Open("/proc/self/mem")
	if err != nil {
		t.Fatal(err)
	}
	defer mem.Close()
	maps, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(maps)), "\n") {
		f := strings.Fields(line)
		var path string
		if len(f) >= 6 {
			path = f[5]
		}
		if f[1][0] != 'r' || path != "" && path != "[heap]" && path != "[stack]" && !strings.HasPrefix(path, "[anon") {
			continue
		}
		lohi := strings.SplitN(f[0], "-", 2)
		start, _ := strconv.ParseUint(lohi[0], 16, 64)
		end, _ := strconv.ParseUint(lohi[1], 16, 64)
		if uintptr(start) <= own && own < uintptr(end) {
			continue // the scan buffer
		}
		if end-start > 1<<32 {
			continue // a sanitizer's shadow reservation, not data
		}
		for off := start; off < end; off += chunk {
			n := min(uint64(chunk+fpWindow-1), end-off)
			got, err := mem.ReadAt(buf[:n], int64(off))
			if err != nil && got == 0 {
				break // unreadable after all (a guard page)
			}
			scanned += int64(min(uint64(got), chunk))
			b := buf[:got]
			for i := 0; i+fpWindow <= len(b) && i < chunk; i++ {
				lo := binary.LittleEndian.Uint64(b[i:])
				hi := binary.LittleEndian.Uint64(b[i+8:])
				h := fpHash(lo, hi, k1, k2)
				if filter[h>>48/64]&(1<<(h>>48%64)) == 0 {
					continue
				}
				if fp, ok := fps[h]; ok {
					p := keyPiece{fingerprint: fp, addr: uintptr(off) + uintptr(i), region: path}
					// The memory around p, within the region (zeros beyond).
					clear(probe)
					from := max(uint64(p.addr)-probeSize/2, start)
					to := min(uint64(p.addr)+probeSize/2, end)
					mem.ReadAt(probe[from-(uint64(p.addr)-probeSize/2):][:to-from], int64(from))
					p.signalFrame = inSignalFrame(probe, p.addr)
					clear(probe)
					found = append(found, p)
				}
			}
		}
	}
	return found, scanned
}

// TestNoKeysInMemoryAfterClose goes through a volume's whole life in this
// process (create, unlock, tagged writes and reads, digest check, a second
// passphrase, close), then searches the process's memory for any 16 bytes of
// the master key, the keys derived from it and the slots' wrapping keys.
// After Close there must be none (SECURITY.md, "Keys in memory", says what
// Go does not let a program guarantee; the test runs with those limits).
func TestNoKeysInMemoryAfterClose(t *testing.T) {
	if os.Getenv(fpHelperEnv) != "" {
		t.Skip("in the helper")
	}
	if testing.Short() || raceEnabled {
		t.Skip("scans the process's memory (too slow under -short and -race)")
	}
	plain := randomData(77, 64<<10)
	dev, _ := newTestVolume(t, plain, 4096, 32, 64)
	v := mustOpen(t, dev, false)
	if err := v.WriteSectors(randomData(78, 3*4096), 2); err != nil {
		t.Fatal(err)
	}
	if err := v.ReadSectors(make([]byte, 4*4096), 1); err != nil {
		t.Fatal(err)
	}
	if _, err := v.Verify(context.Background(), nil, nil); err != nil {
		t.Fatal(err)
	}
	master := v.MasterKey()
	// A collection shrinks the test goroutine's shallow stack, so that
	// the key handling below starts on a small one, as on a busy machine
	// (a stack that then grows while holding a key leaves a copy behind).
	runtime.GC()
	runtime.GC()
	if _, err := AddSlot(dev, v.Headers(), master, testPass, testKDF, -1); err != nil {
		t.Fatal(err)
	}
	hs, err := ReadHeaders(dev, dev.size())
	if err != nil {
		t.Fatal(err)
	}
	var slots []string
	for _, i := range hs.Header.ActiveSlots() {
		s := &hs.Header.Slots[i]
		slots = append(slots, hex.EncodeToString(s.Salt[:])+":"+hex.EncodeToString(s.Nonce[:]))
	}
	if len(slots) != 2 || hs.Header.Flags&FlagDigest == 0 {
		t.Fatalf("%d active slots, flags %#x: want 2 slots and a digest", len(slots), hs.Header.Flags)
	}
	digestNonce := hex.EncodeToString(hs.Header.SealedDigest[:chacha20poly1305.NonceSizeX])
	// The second slot must unlock: it has been through newSlot.
	runtime.GC() // a small stack again
	runtime.GC()
	if key, _, err := hs.Unlock(testPass); err != nil {
		t.Fatal(err)
	} else {
		clear(key)
	}

	var k [16]byte
	rand.Read(k[:])
	k1 := binary.LittleEndian.Uint64(k[:]) | 1
	k2 := binary.LittleEndian.Uint64(k[8:]) | 1
	fps := keyFingerprints(t, master, digestNonce, slots, k1, k2)
	clear(master)

	// While the volume is open its keys are in memory: the scan must see them.
	found, scanned := scanMemory(t, fps, k1, k2)
	t.Logf("scanned %d MiB for %d fingerprints", scanned>>20, len(fps))
	if !slices.ContainsFunc(found, func(p keyPiece) bool { return p.secret == "master key" }) ||
		!slices.ContainsFunc(found, func(p keyPiece) bool { return p.secret == "tag key" }) {
		t.Fatalf("the scan found %d key pieces in the open volume's memory, none of the master key or tag key: it does not see the heap", len(found))
	}

	if err := v.Close(); err != nil {
		t.Fatal(err)
	}
	// Freed memory is not cleared by Go until reused: look before the
	// runtime returns free pages to the system, and after.
	runtime.GC()
	found, _ = scanMemory(t, fps, k1, k2)
	report(t, "after Close and a GC", found)
	debug.FreeOSMemory()
	found, _ = scanMemory(t, fps, k1, k2)
	report(t, "after debug.FreeOSMemory", found)
}

// report fails the test for every key piece found, except those in the
// registers a signal frame saved: while a kernel runs, its keys are in
// vector registers, and when a signal interrupts the thread (Go preempts
// goroutines with signals) the kernel writes them to the thread's signal
// stack, where they stay until the next signal there. No program clears
// that memory (SECURITY.md); those are logged.
func report(t *testing.T, when string, found []keyPiece) {
	t.Helper()
	for _, p := range found {
		if p.signalFrame {
			t.Logf("%s: bytes %d..%d of the %s at %#x in the registers a signal frame saved (outside the program's reach)", when, p.offset, p.offset+fpWindow, p.secret, p.addr)
			continue
		}
		t.Errorf("%s: bytes %d..%d of the %s at %#x (%s)", when, p.offset, p.offset+fpWindow, p.secret, p.addr, p.region)
	}
}

func unsafePointer(b []byte) uintptr { return uintptr(unsafe.Pointer(unsafe.SliceData(b))) }
