package blake2b

import (
	"bufio"
	"bytes"
	"encoding"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"hash"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"testing"

	xblake2b "golang.org/x/crypto/blake2b"
)

// implConfig is one choice of compression function and lane kernels.
type implConfig struct{ compress, lanes implID }

func (c implConfig) String() string {
	return "compress=" + c.compress.String() + "/lanes=" + c.lanes.String()
}

// implConfigs lists the configurations to test: every compression function
// with the default lane kernels, and every lane kernel with the default
// compression function (lone messages in a batch go through compress), on
// this CPU or not (unavailable ones are skipped).
func implConfigs() []implConfig {
	var cs []implConfig
	for i := range numImpls {
		if i == implAVX512x16 {
			continue // not a compression function
		}
		cs = append(cs, implConfig{i, lanesWith})
	}
	for i := range numImpls {
		if i == implScalar {
			continue // not a lane kernel
		}
		if c := (implConfig{compressWith, i}); !slices.Contains(cs, c) {
			cs = append(cs, c)
		}
	}
	return cs
}

// forEachImpl runs f once per configuration available on this CPU, with
// that configuration forced.
func forEachImpl(t *testing.T, f func(t *testing.T)) {
	t.Helper()
	for _, c := range implConfigs() {
		t.Run(c.String(), func(t *testing.T) {
			if !compressAvailable[c.compress] || !lanesAvailable[c.lanes] {
				t.Skipf("%v is not available on this CPU", c)
			}
			defer useImpls(c.compress, c.lanes)()
			f(t)
		})
	}
}

type kat struct {
	in, key, out []byte
}

// readTextKATs parses the blank-line separated in:/key:/hash: records of
// blake2b-kat.txt and rfc7693-abc.txt.
func readTextKATs(t *testing.T, name string) []kat {
	t.Helper()
	f, err := os.Open("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var kats []kat
	var cur kat
	fields := 0
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "#") || strings.TrimSpace(line) == "" {
			continue
		}
		label, value, ok := strings.Cut(line, ":")
		if !ok {
			t.Fatalf("%s: bad line %q", name, line)
		}
		b, err := hex.DecodeString(strings.TrimSpace(value))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		switch label {
		case "in":
			cur.in = b
		case "key":
			cur.key = b
		case "hash":
			cur.out = b
		default:
			t.Fatalf("%s: unknown label %q", name, label)
		}
		if fields++; fields == 3 {
			kats = append(kats, cur)
			cur, fields = kat{}, 0
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return kats
}

func readJSONKATs(t *testing.T) []kat {
	t.Helper()
	raw, err := os.ReadFile("testdata/blake2-kat.json")
	if err != nil {
		t.Fatal(err)
	}
	var all []struct{ Hash, In, Key, Out string }
	if err := json.Unmarshal(raw, &all); err != nil {
		t.Fatal(err)
	}
	var kats []kat
	for _, v := range all {
		if v.Hash != "blake2b" {
			continue
		}
		in, err1 := hex.DecodeString(v.In)
		key, err2 := hex.DecodeString(v.Key)
		out, err3 := hex.DecodeString(v.Out)
		if err1 != nil || err2 != nil || err3 != nil {
			t.Fatalf("bad JSON vector %+v", v)
		}
		kats = append(kats, kat{in, key, out})
	}
	return kats
}

func allKATs(t *testing.T) []kat {
	t.Helper()
	txt := readTextKATs(t, "blake2b-kat.txt")
	js := readJSONKATs(t)
	abc := readTextKATs(t, "rfc7693-abc.txt")
	// Guard against a parser that silently drops records.
	if len(txt) != 256 || len(js) != 512 || len(abc) != 1 {
		t.Fatalf("parsed %d text, %d JSON, %d RFC vectors; want 256, 512, 1", len(txt), len(js), len(abc))
	}
	unkeyed := 0
	for _, k := range js {
		if len(k.key) == 0 {
			unkeyed++
		}
	}
	if unkeyed != 256 {
		t.Fatalf("%d unkeyed JSON vectors, want 256", unkeyed)
	}
	return append(append(txt, js...), abc...)
}

func TestKnownAnswers(t *testing.T) {
	kats := allKATs(t)
	forEachImpl(t, func(t *testing.T) {
		for i, k := range kats {
			h, err := New512(k.key)
			if err != nil {
				t.Fatal(err)
			}
			h.Write(k.in)
			if got := h.Sum(nil); !bytes.Equal(got, k.out) {
				t.Fatalf("vector %d (in %d bytes, key %d bytes): New512 = %x, want %x", i, len(k.in), len(k.key), got, k.out)
			}
			// Byte by byte exercises every buffering path.
			h.Reset()
			for _, c := range k.in {
				h.Write([]byte{c})
			}
			if got := h.Sum(nil); !bytes.Equal(got, k.out) {
				t.Fatalf("vector %d: bytewise = %x, want %x", i, got, k.out)
			}
			var many [Size]byte
			SumMany(many[:], Size, k.key, k.in, len(k.in))
			if !bytes.Equal(many[:], k.out) {
				t.Fatalf("vector %d: SumMany = %x, want %x", i, many, k.out)
			}
			if len(k.key) == 0 {
				if got := Sum512(k.in); !bytes.Equal(got[:], k.out) {
					t.Fatalf("vector %d: Sum512 = %x, want %x", i, got, k.out)
				}
			}
		}
	})
}

// TestSum256 checks Sum256 and New256 against x/crypto, which shares no
// code with this package.
func TestSum256(t *testing.T) {
	forEachImpl(t, func(t *testing.T) {
		for n := range 600 {
			data := pattern(n, uint64(n))
			want := xblake2b.Sum256(data)
			if got := Sum256(data); got != want {
				t.Fatalf("Sum256(%d bytes) = %x, want %x", n, got, want)
			}
			h, _ := New256(nil)
			h.Write(data)
			if got := h.Sum(nil); !bytes.Equal(got, want[:]) {
				t.Fatalf("New256(nil) over %d bytes = %x, want %x", n, got, want)
			}
		}
	})
}

func TestDigestSizes(t *testing.T) {
	key := pattern(64, 7)
	forEachImpl(t, func(t *testing.T) {
		for size := 1; size <= Size; size++ {
			for _, keyLen := range []int{0, 1, 32, 64} {
				for _, n := range []int{0, 1, 127, 128, 129, 1000} {
					data := pattern(n, uint64(size))
					ours, err := New(size, key[:keyLen])
					if err != nil {
						t.Fatal(err)
					}
					theirs, err := xblake2b.New(size, key[:keyLen])
					if err != nil {
						t.Fatal(err)
					}
					ours.Write(data)
					theirs.Write(data)
					got, want := ours.Sum(nil), theirs.Sum(nil)
					if !bytes.Equal(got, want) {
						t.Fatalf("size %d, key %d, %d bytes: %x, want %x", size, keyLen, n, got, want)
					}
					if ours.Size() != size || ours.BlockSize() != BlockSize {
						t.Fatalf("Size() = %d, BlockSize() = %d", ours.Size(), ours.BlockSize())
					}
					many := make([]byte, size)
					SumMany(many, size, key[:keyLen], data, n)
					if !bytes.Equal(many, want) {
						t.Fatalf("SumMany size %d, key %d, %d bytes: %x, want %x", size, keyLen, n, many, want)
					}
				}
			}
		}
	})
}

func TestNewErrors(t *testing.T) {
	for _, size := range []int{-1, 0, 65} {
		if _, err := New(size, nil); err == nil {
			t.Errorf("New(%d, nil) succeeded", size)
		}
	}
	if _, err := New(32, make([]byte, 65)); err == nil {
		t.Error("New with a 65-byte key succeeded")
	}
	if _, err := New512(make([]byte, 65)); err == nil {
		t.Error("New512 with a 65-byte key succeeded")
	}
	if _, err := New(1, make([]byte, 64)); err != nil {
		t.Errorf("New(1, 64-byte key): %v", err)
	}
}

// pattern returns n deterministic pseudo-random bytes.
func pattern(n int, seed uint64) []byte {
	r := rand.New(rand.NewPCG(seed, 0x5eed))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// reference hashes data with the generic implementation forced.
func reference(size int, key, data []byte) []byte {
	defer useImpls(implGeneric, implGeneric)()
	h, err := New(size, key)
	if err != nil {
		panic(err)
	}
	h.Write(data)
	return h.Sum(nil)
}

// writeSplit writes data to h in random pieces, some of them empty.
func writeSplit(h hash.Hash, data []byte, r *rand.Rand) {
	for len(data) > 0 {
		n := r.IntN(min(len(data), 3*BlockSize) + 1)
		if r.IntN(4) == 0 {
			n = r.IntN(len(data) + 1)
		}
		h.Write(data[:n])
		data = data[n:]
	}
}

// TestLengths hashes every length 0..1024 and random lengths up to 64 KiB,
// in one Write and in random splits, against the generic reference and
// x/crypto.
func TestLengths(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	lengths := make([]int, 0, 1025+64)
	for n := 0; n <= 1024; n++ {
		lengths = append(lengths, n)
	}
	for range 64 {
		lengths = append(lengths, r.IntN(64<<10+1))
	}
	lengths = append(lengths, 64<<10, 64<<10-1, 4096)
	key := pattern(64, 3)
	data := pattern(64<<10, 4)
	type want struct{ plain, keyed []byte }
	wants := make([]want, len(lengths))
	for i, n := range lengths {
		wants[i] = want{reference(Size, nil, data[:n]), reference(Size256, key[:32], data[:n])}
		if x := xblake2b.Sum512(data[:n]); !bytes.Equal(x[:], wants[i].plain) {
			t.Fatalf("generic and x/crypto disagree on %d bytes", n)
		}
	}
	forEachImpl(t, func(t *testing.T) {
		r := rand.New(rand.NewPCG(5, 6))
		for i, n := range lengths {
			msg := data[:n]
			if got := Sum512(msg); !bytes.Equal(got[:], wants[i].plain) {
				t.Fatalf("Sum512(%d bytes) = %x, want %x", n, got, wants[i].plain)
			}
			h, _ := New256(key[:32])
			h.Write(msg)
			if got := h.Sum(nil); !bytes.Equal(got, wants[i].keyed) {
				t.Fatalf("keyed, %d bytes, one Write: %x, want %x", n, got, wants[i].keyed)
			}
			h.Reset()
			writeSplit(h, msg, r)
			if got := h.Sum(nil); !bytes.Equal(got, wants[i].keyed) {
				t.Fatalf("keyed, %d bytes, split Writes: %x, want %x", n, got, wants[i].keyed)
			}
			h2, _ := New512(nil)
			writeSplit(h2, msg, r)
			if got := h2.Sum(nil); !bytes.Equal(got, wants[i].plain) {
				t.Fatalf("unkeyed, %d bytes, split Writes: %x, want %x", n, got, wants[i].plain)
			}
		}
	})
}

// TestSumIsRepeatable checks that Sum leaves the state alone, and that
// writing after Sum continues the same message.
func TestSumIsRepeatable(t *testing.T) {
	data := pattern(1000, 9)
	h, _ := New512(nil)
	h.Write(data[:300])
	a := h.Sum(nil)
	b := h.Sum([]byte("prefix"))
	if !bytes.Equal(a, b[6:]) || string(b[:6]) != "prefix" {
		t.Fatal("Sum is not repeatable or does not append")
	}
	h.Write(data[300:])
	want := xblake2b.Sum512(data)
	if got := h.Sum(nil); !bytes.Equal(got, want[:]) {
		t.Fatalf("after Sum and more Writes: %x, want %x", got, want)
	}
}

func TestMarshal(t *testing.T) {
	data := pattern(1500, 12)
	forEachImpl(t, func(t *testing.T) {
		for _, size := range []int{1, 20, 32, 64} {
			for _, cut := range []int{0, 1, 127, 128, 129, 256, 700, 1500} {
				h, _ := New(size, nil)
				h.Write(data[:cut])
				state, err := h.(encoding.BinaryMarshaler).MarshalBinary()
				if err != nil {
					t.Fatal(err)
				}
				h2, _ := New(size, nil)
				h2.Write([]byte("something else entirely"))
				if err := h2.(encoding.BinaryUnmarshaler).UnmarshalBinary(state); err != nil {
					t.Fatal(err)
				}
				h.Write(data[cut:])
				h2.Write(data[cut:])
				want := reference(size, nil, data)
				if got := h.Sum(nil); !bytes.Equal(got, want) {
					t.Fatalf("size %d cut %d: original %x, want %x", size, cut, got, want)
				}
				if got := h2.Sum(nil); !bytes.Equal(got, want) {
					t.Fatalf("size %d cut %d: restored %x, want %x", size, cut, got, want)
				}

				// The state layout is x/crypto's, so it moves both ways.
				x, _ := xblake2b.New(size, nil)
				if err := x.(encoding.BinaryUnmarshaler).UnmarshalBinary(state); err != nil {
					t.Fatalf("x/crypto rejects our state: %v", err)
				}
				x.Write(data[cut:])
				if got := x.Sum(nil); !bytes.Equal(got, want) {
					t.Fatalf("x/crypto continuing our state: %x, want %x", got, want)
				}
				x.Reset()
				x.Write(data[:cut])
				xstate, err := x.(encoding.BinaryMarshaler).MarshalBinary()
				if err != nil {
					t.Fatal(err)
				}
				// x/crypto leaves stale bytes after the used part of the
				// block buffer; they carry no meaning.
				if !bytes.Equal(maskBlock(xstate), maskBlock(state)) {
					t.Fatalf("size %d cut %d: state differs from x/crypto's:\n%x\n%x", size, cut, state, xstate)
				}
				h3, _ := New(size, nil)
				if err := h3.(encoding.BinaryUnmarshaler).UnmarshalBinary(xstate); err != nil {
					t.Fatalf("x/crypto's state rejected: %v", err)
				}
				h3.Write(data[cut:])
				if got := h3.Sum(nil); !bytes.Equal(got, want) {
					t.Fatalf("continuing x/crypto's state: %x, want %x", got, want)
				}
			}
		}
	})
}

// TestMarshalMAC checks that a keyed state is never exported: it is as good
// as the key.
func TestMarshalMAC(t *testing.T) {
	h, _ := New256(pattern(32, 1))
	h.Write([]byte("abc"))
	if b, err := h.(encoding.BinaryMarshaler).MarshalBinary(); err == nil {
		t.Fatalf("keyed state marshalled: %x", b)
	}
}

// maskBlock zeroes the unused tail of the block buffer in a marshalled
// state (the last byte says how much of it is used).
func maskBlock(state []byte) []byte {
	c := append([]byte{}, state...)
	used := 3 + 8*8 + 2*8 + 1 + min(int(c[len(c)-1]), BlockSize)
	clear(c[used : len(c)-1])
	return c
}

func withByte(b []byte, i int, v byte) []byte {
	c := append([]byte{}, b...)
	c[i] = v
	return c
}

func TestUnmarshalErrors(t *testing.T) {
	h, _ := New256(nil)
	h.Write([]byte("abc"))
	good, _ := h.(encoding.BinaryMarshaler).MarshalBinary()
	u := func(b []byte) error {
		h, _ := New256(nil)
		return h.(encoding.BinaryUnmarshaler).UnmarshalBinary(b)
	}
	if err := u(good); err != nil {
		t.Fatalf("good state rejected: %v", err)
	}
	bad := map[string][]byte{
		"short":      good[:len(good)-1],
		"long":       append(append([]byte{}, good...), 0),
		"magic":      append([]byte("b2s"), good[3:]...),
		"size":       withByte(good, 3+64+16, 64),
		"offset 129": withByte(good, len(good)-1, 129),
	}
	for name, b := range bad {
		if err := u(b); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// laneCounts are batch sizes around every kernel width (1, 4, 8, 16) and
// group boundary.
var laneCounts = []int{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 31, 32, 33, 47}

// TestSumSectorsMatchesSingleCalls compares SumSectors with one New(...)
// per sector, for lane counts 1..19, 31..33 and 47 (full and partial
// groups of 4, 8 and 16)
// and sector sizes on every side of the block boundaries (the 8-byte prefix
// moves them).
func TestSumSectorsMatchesSingleCalls(t *testing.T) {
	key := pattern(64, 21)
	sectorSizes := []int{1, 7, 8, 119, 120, 121, 128, 247, 248, 249, 256, 504, 512, 1000, 4088, 4096, 4104}
	firsts := []uint64{0, 1, 1<<32 - 3, 1<<64 - 5}
	forEachImpl(t, func(t *testing.T) {
		for _, sectorSize := range sectorSizes {
			for _, n := range laneCounts {
				data := pattern(n*sectorSize, uint64(sectorSize*100+n))
				for _, c := range []struct{ tagSize, keyLen int }{{32, 32}, {16, 32}, {16, 64}, {32, 64}, {64, 0}, {1, 5}} {
					first := firsts[(n+sectorSize)%len(firsts)]
					tags := make([]byte, n*c.tagSize)
					SumSectors(tags, c.tagSize, key[:c.keyLen], first, data, sectorSize)
					for i := range n {
						x, err := xblake2b.New(c.tagSize, key[:c.keyLen])
						if err != nil {
							t.Fatal(err)
						}
						var num [8]byte
						for b := range num {
							num[b] = byte((first + uint64(i)) >> (8 * b))
						}
						x.Write(num[:])
						x.Write(data[i*sectorSize : (i+1)*sectorSize])
						want := x.Sum(nil)
						if got := tags[i*c.tagSize : (i+1)*c.tagSize]; !bytes.Equal(got, want) {
							t.Fatalf("sector size %d, %d sectors, tag %d, key %d: sector %d tag %x, want %x",
								sectorSize, n, c.tagSize, c.keyLen, i, got, want)
						}
					}
				}
			}
		}
	})
}

// TestSumManyMatchesSingleCalls is the same for SumMany, where messages
// have no prefix and may be empty.
func TestSumManyMatchesSingleCalls(t *testing.T) {
	key := pattern(64, 31)
	msgLens := []int{0, 1, 8, 100, 127, 128, 129, 255, 256, 384, 1024, 4096, 4104}
	forEachImpl(t, func(t *testing.T) {
		for _, msgLen := range msgLens {
			for _, n := range laneCounts {
				msgs := pattern(n*msgLen, uint64(msgLen*100+n))
				for _, c := range []struct{ size, keyLen int }{{32, 32}, {16, 64}, {64, 0}, {7, 1}} {
					sums := make([]byte, n*c.size)
					SumMany(sums, c.size, key[:c.keyLen], msgs, msgLen)
					for i := range n {
						want := reference(c.size, key[:c.keyLen], msgs[i*msgLen:(i+1)*msgLen])
						if got := sums[i*c.size : (i+1)*c.size]; !bytes.Equal(got, want) {
							t.Fatalf("len %d, %d messages, size %d, key %d: message %d: %x, want %x",
								msgLen, n, c.size, c.keyLen, i, got, want)
						}
					}
				}
			}
		}
	})
}

func TestSumManyEmptyBatch(t *testing.T) {
	SumMany(nil, 32, nil, nil, 100)
	SumSectors(nil, 32, nil, 0, nil, 4096)
}

func TestMisusePanics(t *testing.T) {
	buf := make([]byte, 4096)
	cases := map[string]func(){
		"tag size 0":          func() { SumSectors(nil, 0, nil, 0, nil, 512) },
		"tag size 65":         func() { SumSectors(make([]byte, 65), 65, nil, 0, buf[:512], 512) },
		"key 65":              func() { SumSectors(make([]byte, 32), 32, make([]byte, 65), 0, buf[:512], 512) },
		"sector size 0":       func() { SumSectors(nil, 32, nil, 0, nil, 0) },
		"partial sector":      func() { SumSectors(make([]byte, 32), 32, nil, 0, buf[:513], 512) },
		"too few tags":        func() { SumSectors(make([]byte, 32), 32, nil, 0, buf[:1024], 512) },
		"too many tags":       func() { SumSectors(make([]byte, 96), 32, nil, 0, buf[:1024], 512) },
		"tags overlap data":   func() { SumSectors(buf[1000:1064], 32, nil, 0, buf[:1024], 512) },
		"sums not multiple":   func() { SumMany(make([]byte, 33), 32, nil, buf[:100], 100) },
		"msgs too short":      func() { SumMany(make([]byte, 64), 32, nil, buf[:100], 100) },
		"msgs too long":       func() { SumMany(make([]byte, 32), 32, nil, buf[:101], 100) },
		"negative msgLen":     func() { SumMany(make([]byte, 32), 32, nil, nil, -1) },
		"SumMany size 0":      func() { SumMany(nil, 0, nil, nil, 0) },
		"sums overlap msgs":   func() { SumMany(buf[50:82], 32, nil, buf[:100], 100) },
		"SumMany key 65":      func() { SumMany(make([]byte, 32), 32, make([]byte, 65), buf[:100], 100) },
		"sums for 0-len msgs": func() { SumMany(make([]byte, 32), 32, nil, buf[:1], 0) },
	}
	for name, f := range cases {
		t.Run(name, func(t *testing.T) {
			defer func() {
				r := recover()
				if r == nil {
					t.Fatal("no panic")
				}
				if s := fmt.Sprint(r); !strings.HasPrefix(s, "blake2b: ") {
					t.Fatalf("panic %q lacks the blake2b: prefix", s)
				}
			}()
			f()
		})
	}
}

func TestZeroAllocs(t *testing.T) {
	data := pattern(4096*8, 41)
	key := pattern(32, 42)
	tags := make([]byte, 8*16)
	sums := make([]byte, 8*32)
	forEachImpl(t, func(t *testing.T) {
		for name, f := range map[string]func(){
			"Sum256":                        func() { Sum256(data[:1000]) },
			"Sum512":                        func() { Sum512(data) },
			"SumKeyed":                      func() { SumKeyed(sums[:64], key, data[:1000]) },
			"SumSectors":                    func() { SumSectors(tags, 16, key, 99, data, 4096) },
			"SumSectors, 1 sector":          func() { SumSectors(tags[:16], 16, key, 99, data[:4096], 4096) },
			"SumSectors, 3 sectors":         func() { SumSectors(tags[:48], 16, key, 99, data[:3*4096], 4096) },
			"SumSectors, 13 sectors of 512": func() { SumSectors(tags[:13*8], 8, key, 99, data[:13*512], 512) },
			"SumMany":                       func() { SumMany(sums, 32, key, data, 4096) },
		} {
			if n := testing.AllocsPerRun(20, f); n != 0 {
				t.Errorf("%s: %v allocations, want 0", name, n)
			}
		}
	})
}

// TestAvailable fails when the CPU has the features of a kernel that is not
// registered, so a dispatch bug cannot silently leave a path untested.
func TestAvailable(t *testing.T) {
	for i := range numImpls {
		if want := cpuSupports(t, i, false); compressAvailable[i] != want {
			t.Errorf("compress %v: available = %v, but the CPU (under GODEBUG) says %v", i, compressAvailable[i], want)
		}
		if want := cpuSupports(t, i, true); lanesAvailable[i] != want {
			t.Errorf("lanes %v: available = %v, but the CPU (under GODEBUG) says %v", i, lanesAvailable[i], want)
		}
	}
	t.Logf("dispatch: compress=%v lanes=%v", compressWith, lanesWith)
}
