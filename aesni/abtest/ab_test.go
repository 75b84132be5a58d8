//go:build abtest

package abtest

import (
	"encoding/binary"
	"flag"
	"fmt"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/xtsctl/xtsctl/aesni"
	old "github.com/xtsctl/xtsctl/aesni/abtest/_old/aesni"
	"github.com/xtsctl/xtsctl/internal/impl"
	"github.com/xtsctl/xtsctl/internal/testutil"
)

var (
	flagA      = flag.String("a", "old", "side A: old[:variant] or new[:variant] (variant as xtsctl bench --variant; default: dispatch)")
	flagB      = flag.String("b", "new", "side B, as -a")
	flagSizes  = flag.String("sizes", "512,4096,16384", "data-unit lengths (unit mode) or sector sizes (sectors mode)")
	flagKeys   = flag.String("keys", "512", "XTS key sizes in bits (256, 512)")
	flagOps    = flag.String("ops", "encrypt,decrypt", "encrypt, decrypt")
	flagMode   = flag.String("mode", "unit", "unit: one call per data unit; sectors: 64 KiB of sectors per EncryptSectors call")
	flagRounds = flag.Int("rounds", 201, "interleaved rounds")
	flagRunNs  = flag.Int64("run", 150_000, "thread CPU nanoseconds per side per round (about)")
	flagBufs   = flag.Int("buffers", 1, "unit mode: convert this many buffers in turn, each in place (1: every call reads the previous call's output, which at short lengths times a call's latency; more: calls that do not depend on one another)")
)

// side is one build and variant under test.
type side struct {
	name    string
	isOld   bool
	variant string // "" = dispatch
	cNew    *aesni.Cipher
	cOld    *old.Cipher
}

func parseSide(t *testing.T, s string) *side {
	pkg, variant, _ := strings.Cut(s, ":")
	if pkg != "old" && pkg != "new" {
		t.Fatalf("side %q: want old[:variant] or new[:variant]", s)
	}
	return &side{name: s, isOld: pkg == "old", variant: variant}
}

func (s *side) selectImpl(t *testing.T) {
	pkg := aesni.ImplPackage
	if s.isOld {
		pkg = old.ImplPackage
	}
	impl.Reset(aesni.ImplPackage)
	impl.Reset(old.ImplPackage)
	if s.variant != "" {
		if err := impl.Select(pkg, s.variant); err != nil {
			t.Fatal(err)
		}
	}
}

func (s *side) init(t *testing.T, key []byte) {
	s.selectImpl(t)
	if s.isOld {
		s.cOld = new(old.Cipher)
		if err := s.cOld.Init(key); err != nil {
			t.Fatal(err)
		}
	} else {
		s.cNew = new(aesni.Cipher)
		if err := s.cNew.Init(key); err != nil {
			t.Fatal(err)
		}
	}
}

// run makes calls calls on bufs (sectors mode: the first; unit mode: each
// in turn) and returns the thread CPU time they took.
func (s *side) run(t *testing.T, bufs [][]byte, calls int, decrypt, sectors bool, unit int, seq uint64) int64 {
	buf := bufs[0]
	s.selectImpl(t)
	var tw [16]byte
	start := testutil.ThreadCPUNanos(t)
	switch {
	case sectors && s.isOld:
		step := uint64(unit / 512)
		for i := range calls {
			first := (seq + uint64(i)) * uint64(len(buf)/512)
			if decrypt {
				s.cOld.DecryptSectors(buf, buf, unit, first, step)
			} else {
				s.cOld.EncryptSectors(buf, buf, unit, first, step)
			}
		}
	case sectors:
		step := uint64(unit / 512)
		for i := range calls {
			first := (seq + uint64(i)) * uint64(len(buf)/512)
			if decrypt {
				s.cNew.DecryptSectors(buf, buf, unit, first, step)
			} else {
				s.cNew.EncryptSectors(buf, buf, unit, first, step)
			}
		}
	case s.isOld:
		c := s.cOld
		if decrypt {
			for i := range calls {
				binary.LittleEndian.PutUint64(tw[:8], seq+uint64(i))
				b := bufs[i%len(bufs)]
				c.Decrypt(b, b, &tw)
			}
		} else {
			for i := range calls {
				binary.LittleEndian.PutUint64(tw[:8], seq+uint64(i))
				b := bufs[i%len(bufs)]
				c.Encrypt(b, b, &tw)
			}
		}
	default:
		c := s.cNew
		if decrypt {
			for i := range calls {
				binary.LittleEndian.PutUint64(tw[:8], seq+uint64(i))
				b := bufs[i%len(bufs)]
				c.Decrypt(b, b, &tw)
			}
		} else {
			for i := range calls {
				binary.LittleEndian.PutUint64(tw[:8], seq+uint64(i))
				b := bufs[i%len(bufs)]
				c.Encrypt(b, b, &tw)
			}
		}
	}
	return testutil.ThreadCPUNanos(t) - start
}

func ints(t *testing.T, s string) []int {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil {
			t.Fatalf("%q: %v", s, err)
		}
		out = append(out, n)
	}
	return out
}

func quantile(s []float64, q float64) float64 {
	c := slices.Clone(s)
	slices.Sort(c)
	return c[int(q*float64(len(c)-1)+0.5)]
}

// TestAB prints, per length, operation and key size: the median MB/s of A
// and B (thread CPU time), each as a fraction of the raw zmm (else widest)
// AES rate timed in the same rounds, and the per-round ratio B/A (median,
// quartiles, and the 10th and 90th percentiles).
func TestAB(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := unix.Mlockall(unix.MCL_CURRENT | unix.MCL_FUTURE); err != nil {
		t.Logf("mlockall: %v", err)
	}
	a, b := parseSide(t, *flagA), parseSide(t, *flagB)
	sectors := *flagMode == "sectors"
	units := aesni.RooflineUnits()
	roofUnit := units[len(units)-1]
	roofBytes := aesni.RooflineBlocks(roofUnit) * aesni.BlockSize
	var out strings.Builder
	mode := *flagMode
	if mode == "unit" && *flagBufs > 1 {
		mode = fmt.Sprintf("unit, %d buffers in turn", *flagBufs)
	}
	fmt.Fprintf(&out, "A = %s, B = %s; mode %s; %d rounds of about %d µs per side; roofline: raw AES on %v\n", a.name, b.name, mode, *flagRounds, *flagRunNs/1000, roofUnit)
	fmt.Fprintf(&out, "%-8s %-7s %-4s %9s %9s %7s %7s %8s %8s %8s %8s %8s\n", "size", "op", "key", "A MB/s", "B MB/s", "A roof", "B roof", "B/A", "q1", "q3", "p10", "p90")
	for _, keyBits := range ints(t, *flagKeys) {
		key := make([]byte, keyBits/8)
		for i := range key {
			key[i] = byte(7*i + 3)
		}
		a.init(t, key)
		b.init(t, key)
		rounds := 6 + keyBits/64
		for _, size := range ints(t, *flagSizes) {
			for _, op := range strings.Split(*flagOps, ",") {
				decrypt := op == "decrypt"
				bytes := size
				if sectors {
					bytes = 64 << 10
				}
				bufs := make([][]byte, 1)
				if !sectors {
					bufs = make([][]byte, max(1, *flagBufs))
				}
				for i := range bufs {
					bufs[i] = make([]byte, bytes)
				}
				// Calibrate the calls per run on A.
				calls := 1
				for a.run(t, bufs, calls, decrypt, sectors, size, 0) < *flagRunNs && calls < 1<<22 {
					calls *= 2
				}
				roofIters := 1
				for {
					s := testutil.ThreadCPUNanos(t)
					aesni.RawAESRounds(roofUnit, rounds, roofIters)
					if testutil.ThreadCPUNanos(t)-s > *flagRunNs/4 || roofIters > 1<<24 {
						break
					}
					roofIters *= 2
				}
				var ra, rb, ratio, fa, fb []float64
				seq := uint64(1)
				for r := 0; r < *flagRounds; r++ {
					s := testutil.ThreadCPUNanos(t)
					aesni.RawAESRounds(roofUnit, rounds, roofIters)
					roof := float64(roofIters*roofBytes) * 1e3 / float64(testutil.ThreadCPUNanos(t)-s)
					var na, nb int64
					if r%2 == 0 {
						na = a.run(t, bufs, calls, decrypt, sectors, size, seq)
						nb = b.run(t, bufs, calls, decrypt, sectors, size, seq+uint64(calls))
					} else {
						nb = b.run(t, bufs, calls, decrypt, sectors, size, seq)
						na = a.run(t, bufs, calls, decrypt, sectors, size, seq+uint64(calls))
					}
					seq += 2 * uint64(calls)
					mba := float64(calls*bytes) * 1e3 / float64(na)
					mbb := float64(calls*bytes) * 1e3 / float64(nb)
					ra, rb = append(ra, mba), append(rb, mbb)
					ratio = append(ratio, mbb/mba)
					fa, fb = append(fa, mba/roof), append(fb, mbb/roof)
				}
				fmt.Fprintf(&out, "%-8d %-7s %-4d %9.0f %9.0f %7.3f %7.3f %8.4f %8.4f %8.4f %8.4f %8.4f\n", size, op, keyBits,
					quantile(ra, .5), quantile(rb, .5), quantile(fa, .5), quantile(fb, .5),
					quantile(ratio, .5), quantile(ratio, .25), quantile(ratio, .75), quantile(ratio, .1), quantile(ratio, .9))
			}
		}
	}
	impl.Reset(aesni.ImplPackage)
	impl.Reset(old.ImplPackage)
	t.Log("\n" + out.String())
}
