package keymem

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"encoding/binary"
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

	"golang.org/x/sys/unix"
)

// Env, set in the helper process, holds the multipliers and the test's
// arguments for it.
const Env = "XTSCTL_KEYMEM_HELPER"

// Window is the most bytes of a secret one fingerprint covers. A secret
// shorter than Window (but at least MinWindow bytes) is covered whole.
const (
	Window    = 16
	MinWindow = 8
)

// A Secret is a key, or another secret, to look for.
type Secret struct {
	Name string
	Key  []byte
	// Step is the distance between the windows fingerprinted (0: 1, so
	// that any 16 bytes of the key are found, wherever they start).
	Step int
	// OutOfReach, when not "", says where another package keeps the
	// secret, out of the program's reach (SECURITY.md): what is found of
	// it is logged, not failed for.
	OutOfReach string
}

// HMACPads returns key as HMAC holds it, XORed with its inner and its
// outer pad: PBKDF2 keys HMAC with a passphrase (or a key), and a copy of
// either pad gives the key away as surely as the key itself.
func HMACPads(name string, key []byte) []Secret {
	pads := []Secret{{Name: name + " as HMAC's inner pad"}, {Name: name + " as HMAC's outer pad"}}
	for i, x := range []byte{0x36, 0x5c} {
		for _, c := range key {
			pads[i].Key = append(pads[i].Key, c^x)
		}
	}
	return pads
}

// hash hashes a window (lo, hi little-endian; hi masked to the window's
// length) with the per-run random odd multipliers k1, k2.
func hash(lo, hi, k1, k2 uint64) uint64 {
	x := lo*k1 ^ bits.RotateLeft64(hi*k2, 29)
	x ^= x >> 31
	return x * k1
}

// mask keeps the bytes of hi that a window of n bytes covers.
func mask(n int) uint64 {
	if n >= Window {
		return ^uint64(0)
	}
	return 1<<(8*(n-8)) - 1
}

// Skip skips a memory test under -short and -race (the race detector
// slows the scan a hundredfold): call it first.
func Skip(t *testing.T) {
	t.Helper()
	if testing.Short() || raceEnabled {
		t.Skip("scans the process's memory (too slow under -short and -race)")
	}
}

// isolatedEnv, set in a test's process of its own, names the test.
const isolatedEnv = "XTSCTL_KEYMEM_ISOLATED"

// Isolated reports whether the test runs in a process of its own. If it
// does not, Isolated runs it in one (the test binary again, this test
// alone), fails the test if it fails there, and returns false: the caller
// returns. The tests of a format open the same sample images, and so
// unlock the same keys, without wiping them (they need not): in a process
// of its own, a memory test finds only what its own unlock left.
func Isolated(t *testing.T) bool {
	t.Helper()
	if os.Getenv(isolatedEnv) == t.Name() {
		return true
	}
	cmd := exec.Command(os.Args[0], "-test.run=^"+t.Name()+"$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), isolatedEnv+"="+t.Name())
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Errorf("in a process of its own: %v\n%s", err, out)
	} else {
		t.Logf("in a process of its own:\n%s", out)
	}
	return false
}

// A HelperRun is the helper process's side.
type HelperRun struct {
	t      *testing.T
	k1, k2 uint64
	// Args are the arguments the test gave Fingerprints.
	Args []string
}

// Helper returns the helper's side in the helper process, and skips the
// test otherwise: call it first in the test that Fingerprints names.
func Helper(t *testing.T) *HelperRun {
	v := os.Getenv(Env)
	if v == "" {
		t.Skip("the helper process of a memory test")
	}
	f := strings.Split(v, "\n")
	h := &HelperRun{t: t, Args: f[2:]}
	h.k1, _ = strconv.ParseUint(f[0], 16, 64)
	h.k2, _ = strconv.ParseUint(f[1], 16, 64)
	return h
}

// Print prints the fingerprints of the secrets for the test to read.
func (h *HelperRun) Print(secrets ...Secret) {
	for _, s := range secrets {
		n := min(len(s.Key), Window)
		if n < MinWindow {
			h.t.Fatalf("%s: %d bytes, fewer than the %d a fingerprint takes", s.Name, len(s.Key), MinWindow)
		}
		step := max(s.Step, 1)
		for off := 0; off+n <= len(s.Key); off += step {
			var w [Window]byte
			copy(w[:], s.Key[off:off+n])
			lo := binary.LittleEndian.Uint64(w[:])
			hi := binary.LittleEndian.Uint64(w[8:]) & mask(n)
			fmt.Printf("fp\t%s\t%d\t%d\t%x\t%s\n", s.Name, off, n, hash(lo, hi, h.k1, h.k2), s.OutOfReach)
		}
	}
}

// A Piece is a window of a secret, and where it was found.
type Piece struct {
	Secret string
	Offset int // of the window in the secret
	Len    int // of the window
	Addr   uintptr
	Region string // the mapping's name in /proc/self/maps, "" if anonymous
	// OutOfReach says why the piece is where no program can clear it,
	// "" if it is not: in a copy of the CPU's registers that only the
	// next save there overwrites (saved by the kernel in a signal frame
	// on a thread's signal stack, see inSignalFrame, or by Go's
	// asynchronous preemption, see inPreemptSave), in a hash state of
	// x/crypto's Argon2 (see inArgon2Hash), or the secret's OutOfReach.
	OutOfReach string
}

// A Set holds the fingerprints of one run's secrets.
type Set struct {
	k1, k2 uint64
	byHash map[uint64]Piece
	lens   []int // the window lengths, longest first
	filter [1 << 16 / 64]uint64
}

// Fingerprints runs the test binary again as the helper process (the test
// named helper, which calls Helper), with args and with stdin on a pipe
// (not through a Go buffer), and returns the fingerprints it printed.
func Fingerprints(t *testing.T, helper string, stdin []byte, args ...string) *Set {
	t.Helper()
	var k [16]byte
	rand.Read(k[:])
	f := &Set{
		k1:     binary.LittleEndian.Uint64(k[:]) | 1,
		k2:     binary.LittleEndian.Uint64(k[8:]) | 1,
		byHash: map[uint64]Piece{},
	}
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^"+helper+"$", "-test.count=1")
	env := append([]string{strconv.FormatUint(f.k1, 16), strconv.FormatUint(f.k2, 16)}, args...)
	cmd.Env = append(os.Environ(), Env+"="+strings.Join(env, "\n"))
	cmd.Stdin = r
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	r.Close()
	_, werr := w.Write(stdin)
	w.Close()
	if err := cmd.Wait(); err != nil || werr != nil {
		t.Fatalf("fingerprint helper: %v, %v\n%s", err, werr, out.String())
	}
	sc := bufio.NewScanner(&out)
	for sc.Scan() {
		l := strings.Split(sc.Text(), "\t")
		if len(l) != 6 || l[0] != "fp" {
			continue
		}
		off, _ := strconv.Atoi(l[2])
		n, _ := strconv.Atoi(l[3])
		h, _ := strconv.ParseUint(l[4], 16, 64)
		f.byHash[h] = Piece{Secret: l[1], Offset: off, Len: n, OutOfReach: l[5]}
		f.filter[h>>48/64] |= 1 << (h >> 48 % 64)
		if !slices.Contains(f.lens, n) {
			f.lens = append(f.lens, n)
		}
	}
	if len(f.byHash) == 0 {
		t.Fatalf("fingerprint helper printed nothing:\n%s", out.String())
	}
	slices.Sort(f.lens)
	slices.Reverse(f.lens)
	return f
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

// Go 1.26 on amd64 (without GOEXPERIMENT=simd) saves X0-X15 when it
// preempts a goroutine asynchronously in a block of the runtime's own
// (runtime.xRegs: 32 slots of 64 bytes, then 8 mask words), 16 bytes at
// the start of each of the first 16 slots; the rest of the block stays
// zero. A vector register still holding a key then (a memmove of it
// leaves one there) is copied into it, where it stays until the next
// preemption on that P (src/runtime/preempt_xreg.go).
const (
	xregSlot  = 64
	xregSaved = 16 // registers saved: X0-X15
	xregWidth = 16 // bytes saved of each
	xregSize  = 32*xregSlot + 8*8
)

// inPreemptSave reports whether the n bytes at addr lie in a register in
// such a block; around holds the memory from addr-len(around)/2.
func inPreemptSave(around []byte, addr uintptr, n int) bool {
	base := addr - uintptr(len(around)/2)
	for i := range xregSaved {
		for k := 0; k+n <= xregWidth; k++ {
			start := addr - uintptr(i*xregSlot+k)
			if start < base || start+xregSize > base+uintptr(len(around)) {
				continue
			}
			if xregShape(around[start-base:][:xregSize]) {
				return true
			}
		}
	}
	return false
}

// xregShape reports whether b is zero but for the first 16 bytes of its
// first 16 slots.
func xregShape(b []byte) bool {
	for i, c := range b {
		if c != 0 && (i >= xregSaved*xregSlot || i%xregSlot >= xregWidth) {
			return false
		}
	}
	return true
}

// x/crypto's Argon2 (golang.org/x/crypto/argon2) hashes with BLAKE2b-512
// objects that it allocates on the heap and does not clear. The one of
// H0 keeps its input in its 128-byte buffer when that fits there, as it
// does with a short passphrase: the parameters, the passphrase, the salt.
// The one of H', for a key longer than 64 bytes, is reset after each
// 64-byte piece and then given the piece before the last, whose first 32
// bytes are key (bytes 96..127 of a 192-byte key). Both still hold the
// initial state then: nothing was compressed since New or Reset.
// (golang.org/x/crypto/blake2b's digest: h [8]uint64, c [2]uint64, size
// int, then block [128]byte.)
var blake2bInit = [8]uint64{
	0x6a09e667f3bcc908 ^ 0x01010040, // IV0 ^ digest length 64, fanout 1, depth 1, no key
	0xbb67ae8584caa73b, 0x3c6ef372fe94f82b, 0xa54ff53a5f1d36f1,
	0x510e527fade682d1, 0x9b05688c2b3e6c1f, 0x1f83d9abfb41bd6b, 0x5be0cd19137e2179,
}

const blake2bBlockOff = 8*8 + 2*8 + 8

const blake2bBlockSize = 128

// inArgon2Hash reports whether the n bytes at addr lie in the buffer of
// such a BLAKE2b state; around holds the memory from addr-len(around)/2.
func inArgon2Hash(around []byte, addr uintptr, n int) bool {
	base := addr - uintptr(len(around)/2)
	for block := addr &^ 7; block+128 >= addr+uintptr(n); block -= 8 {
		h := block - blake2bBlockOff
		if h < base || block+128 > base+uintptr(len(around)) {
			break
		}
		ok := true
		for i, v := range blake2bInit {
			if binary.LittleEndian.Uint64(around[h-base+uintptr(8*i):]) != v {
				ok = false
				break
			}
		}
		if ok {
			return true
		}
	}
	return false
}

// inArgon2H0Input reports whether the n bytes at addr, bytes off.. of a
// passphrase, lie in the buffer of the BLAKE2b digest in which x/crypto's
// Argon2 hashes H0's input, recognised by the input's layout rather than
// by the state before the buffer (inArgon2Hash): once the object is
// garbage, the memory holding its start can be reused while the rest
// still holds the passphrase's tail (seen in one run of the LUKS keyslot
// memory test in about twenty, at a 256-byte boundary). The input puts
// the passphrase at byte 28 of the 128-byte block, then the salt's length
// and the salt, then two zero lengths (no secret, no associated data);
// the rest of the block is zero, and the digest's count of buffered bytes
// follows the block. around holds the memory from addr-len(around)/2.
func inArgon2H0Input(around []byte, addr uintptr, off, n int) bool {
	const passAt, lenWords = 28, 8
	base := addr - uintptr(len(around)/2)
	block := addr - uintptr(off) - passAt
	if block < base || block+blake2bBlockSize+8 > base+uintptr(len(around)) {
		return false
	}
	b := around[block-base:][:blake2bBlockSize+8]
	count := binary.LittleEndian.Uint64(b[blake2bBlockSize:])
	if count > blake2bBlockSize {
		return false
	}
	total := int(count)
	for l := off + n; passAt+l+4+lenWords <= total; l++ {
		salt := int(binary.LittleEndian.Uint32(b[passAt+l:]))
		if passAt+l+4+salt+lenWords == total && !slices.ContainsFunc(b[total-lenWords:blake2bBlockSize], func(c byte) bool { return c != 0 }) {
			return true
		}
	}
	return false
}

// Scan searches this process's readable anonymous memory (Go's heap and
// goroutine stacks, the thread stacks, cgo/libc heap) for the
// fingerprinted windows at every byte offset. It reads through
// /proc/self/mem into a buffer mapped outside Go's heap, which it skips.
func (f *Set) Scan(t *testing.T) (found []Piece, scanned int64) {
	t.Helper()
	const chunk, probeSize = 1 << 20, 16 << 10
	buf, err := unix.Mmap(-1, 0, chunk+Window+probeSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(buf)
	probe := buf[chunk+Window:]
	own := uintptr(unsafe.Pointer(unsafe.SliceData(buf)))
	masks := make([]uint64, len(f.lens))
	for i, n := range f.lens {
		masks[i] = mask(n)
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
		l := strings.Fields(line)
		var path string
		if len(l) >= 6 {
			path = l[5]
		}
		if l[1][0] != 'r' || path != "" && path != "[heap]" && path != "[stack]" && !strings.HasPrefix(path, "[anon") {
			continue
		}
		lohi := strings.SplitN(l[0], "-", 2)
		start, _ := strconv.ParseUint(lohi[0], 16, 64)
		end, _ := strconv.ParseUint(lohi[1], 16, 64)
		if uintptr(start) <= own && own < uintptr(end) {
			continue // the scan buffer
		}
		if end-start > 1<<32 {
			continue // a sanitizer's shadow reservation, not data
		}
		for off := start; off < end; off += chunk {
			n := min(uint64(chunk+Window-1), end-off)
			got, err := mem.ReadAt(buf[:n], int64(off))
			if err != nil && got == 0 {
				break // unreadable after all (a guard page)
			}
			scanned += int64(min(uint64(got), chunk))
			b := buf[:got]
			for i := 0; i+Window <= len(b) && i < chunk; i++ {
				lo := binary.LittleEndian.Uint64(b[i:])
				hi := binary.LittleEndian.Uint64(b[i+8:])
				for _, m := range masks {
					h := hash(lo, hi&m, f.k1, f.k2)
					if f.filter[h>>48/64]&(1<<(h>>48%64)) == 0 {
						continue
					}
					p, ok := f.byHash[h]
					if !ok {
						continue
					}
					p.Addr, p.Region = uintptr(off)+uintptr(i), path
					// The memory around p, within the region (zeros beyond).
					clear(probe)
					from := max(uint64(p.Addr)-probeSize/2, start)
					to := min(uint64(p.Addr)+probeSize/2, end)
					mem.ReadAt(probe[from-(uint64(p.Addr)-probeSize/2):][:to-from], int64(from))
					switch {
					case p.OutOfReach != "":
					case inSignalFrame(probe, p.Addr):
						p.OutOfReach = "in the registers a signal frame saved"
					case inPreemptSave(probe, p.Addr, p.Len):
						p.OutOfReach = "in the registers Go's asynchronous preemption saved"
					case inArgon2Hash(probe, p.Addr, p.Len):
						p.OutOfReach = "in a BLAKE2b state that x/crypto's Argon2 does not clear"
					case inArgon2H0Input(probe, p.Addr, p.Offset, p.Len):
						p.OutOfReach = "in the H0 input x/crypto's Argon2 leaves in a BLAKE2b buffer"
					}
					clear(probe)
					found = append(found, p)
				}
			}
		}
	}
	return found, scanned
}

// CheckClose scans while the keys are in use, where it must find each
// secret that seen names (else it does not see where they are), calls
// close, and fails the test for every piece of a secret found after it:
// after a garbage collection, and again after debug.FreeOSMemory (freed
// memory is not cleared by Go until reused: it looks before the runtime
// returns free pages to the system, and after).
func (f *Set) CheckClose(t *testing.T, seen []string, close func()) {
	t.Helper()
	found, scanned := f.Scan(t)
	t.Logf("scanned %d MiB for %d fingerprints", scanned>>20, len(f.byHash))
	for _, s := range seen {
		if !slices.ContainsFunc(found, func(p Piece) bool { return p.Secret == s }) {
			t.Fatalf("the scan found %d key pieces while the keys are in use, none of the %s: it does not see where they are", len(found), s)
		}
	}
	close()
	runtime.GC()
	found, _ = f.Scan(t)
	Report(t, "after Close and a GC", found)
	debug.FreeOSMemory()
	found, _ = f.Scan(t)
	Report(t, "after debug.FreeOSMemory", found)
}

// Report fails the test for every piece found, except those out of the
// program's reach: in saved registers (while a kernel runs, its keys are
// in vector registers, and stay there after a copy; when a signal
// interrupts the thread, and Go preempts goroutines with signals, the
// kernel writes them to the thread's signal stack, and Go's preemption to
// a block of its own, where they stay until the next save there), and in
// x/crypto's Argon2 hash states. SECURITY.md says so; those are logged.
func Report(t *testing.T, when string, found []Piece) {
	t.Helper()
	for _, p := range found {
		if p.OutOfReach != "" {
			t.Logf("%s: bytes %d..%d of the %s at %#x %s (outside the program's reach)", when, p.Offset, p.Offset+p.Len, p.Secret, p.Addr, p.OutOfReach)
			continue
		}
		t.Errorf("%s: bytes %d..%d of the %s at %#x (%s)", when, p.Offset, p.Offset+p.Len, p.Secret, p.Addr, p.Region)
	}
}

// ReadStdin reads what the test gave the helper on its standard input.
func (h *HelperRun) ReadStdin() []byte {
	b, err := io.ReadAll(os.Stdin)
	if err != nil {
		h.t.Fatal(err)
	}
	return b
}
