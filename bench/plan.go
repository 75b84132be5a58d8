package bench

import (
	"bytes"
	"context"
	"crypto/aes"
	"crypto/subtle"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	xcxts "golang.org/x/crypto/xts"

	"github.com/xtsctl/xtsctl/aesni"
	"github.com/xtsctl/xtsctl/blake2b"
	"github.com/xtsctl/xtsctl/internal/impl"
	"github.com/xtsctl/xtsctl/sector"
	"github.com/xtsctl/xtsctl/xts"
)

// A plan is the list of measurements of a run, known up front so progress
// can be reported. Single-core points run first, on one pinned thread;
// batch points (which start their own goroutines) after it is released.
type plan struct {
	cfg        Config
	report     *Report
	single     []point
	multi      []point
	keys       map[int][]byte // XTS key per key size
	tagKey     []byte
	dispatched map[int]string // the variant dispatch picks, by length
}

type point struct {
	what string
	run  func(ctx context.Context, t timer) error
}

func newPlan(c Config, r *Report, keys, sizes []int, variants []string, peer *openssl) *plan {
	p := &plan{cfg: c, report: r, keys: map[int][]byte{}, tagKey: randomBytes(TagKeySize), dispatched: map[int]string{}}
	for _, d := range r.Dispatch {
		p.dispatched[d.Size] = d.Variant
	}
	for _, k := range keys {
		p.keys[k] = randomBytes(k / 8)
	}
	// The roofline is measured before and after the XTS figures, and the
	// faster of the two kept: it is a limit, and on a shared machine one
	// measurement alone may land in a busy moment.
	var roofline []point
	if c.Roofline {
		for _, k := range keys {
			for _, u := range aesni.RooflineUnits() {
				roofline = append(roofline, p.roofline(u, k))
			}
		}
	}
	p.single = append(p.single, roofline...)
	skippedBaseline := map[int]bool{}
	for _, k := range keys {
		for _, n := range sizes {
			baseline := c.Baseline && n%aesni.BlockSize == 0
			if c.Baseline && !baseline && !skippedBaseline[n] {
				skippedBaseline[n] = true
				r.note("no x/crypto/xts figure for %d bytes: it has no ciphertext stealing (lengths must be multiples of 16)", n)
			}
			for _, op := range []string{"encrypt", "decrypt"} {
				p.single = append(p.single, p.unitGroup(k, n, op, variants, baseline))
				if peer != nil {
					p.single = append(p.single, p.peer(peer, k, n, op))
				}
			}
		}
	}
	p.single = append(p.single, roofline...)
	if c.Threads > 0 {
		workers := []int{1}
		if c.Threads > 1 {
			workers = append(workers, c.Threads)
		}
		if c.BatchBytes == 0 {
			c.BatchBytes = batchBytes(c.Threads)
			p.cfg.BatchBytes = c.BatchBytes
		}
		r.Timing.BatchBytes = c.BatchBytes
		var notSectors []string
		for _, n := range sizes {
			if !isSectorSize(n) {
				notSectors = append(notSectors, fmt.Sprint(n))
			}
		}
		if notSectors != nil {
			r.note("--threads measures whole sectors: lengths %s are not sector sizes and are measured on one core only", strings.Join(notSectors, ", "))
		}
		for _, k := range keys {
			for _, n := range sizes {
				if !isSectorSize(n) {
					continue
				}
				for _, op := range []string{"encrypt", "decrypt"} {
					p.multi = append(p.multi, p.batchGroup(k, n, op, variants, workers))
					if peer != nil && c.Threads > 1 {
						p.multi = append(p.multi, p.peerMulti(peer, k, n, op, c.Threads))
					}
				}
			}
		}
	}
	return p
}

// batchBytes is the length of one sector-layer call: large enough that
// every worker gets several sectors, small enough to stay in cache.
func batchBytes(threads int) int { return max(1<<20, threads*256<<10) }

func (p *plan) run(ctx context.Context) error {
	total, done := len(p.single)+len(p.multi), 0
	step := func(pt point, t timer) error {
		if p.cfg.Progress != nil {
			p.cfg.Progress(done, total, pt.what)
		}
		done++
		if err := ctx.Err(); err != nil {
			return err
		}
		return pt.run(ctx, t)
	}
	t := timer{budget: p.cfg.Time, runs: p.cfg.Runs}
	err := func() error {
		pin := pin()
		defer pin.undo()
		p.report.Timing.PinnedCPU = pin.cpu
		t.clock = singleCoreClock()
		p.report.Timing.Clock = t.clock.name()
		for _, pt := range p.single {
			if err := step(pt, t); err != nil {
				return err
			}
		}
		return nil
	}()
	if err != nil {
		return err
	}
	t.clock = &wallClock{start: time.Now()}
	for _, pt := range p.multi {
		if err := step(pt, t); err != nil {
			return err
		}
	}
	return nil
}

func (p *plan) add(r Result, s Stats) {
	r.Cipher = "aes-xts"
	r.Integrity = p.cfg.Integrity && r.Impl == ImplXtsctl
	r.MBps = s
	r.Dispatched = r.Impl == ImplXtsctl && p.dispatched[r.Size] == r.Variant
	p.report.Results = append(p.report.Results, r)
}

// useVariant forces v (or dispatch, for Auto) and returns the kernel that
// calls on n-byte units will use.
func useVariant(v string, n int) (string, error) {
	impl.Reset(aesni.ImplPackage)
	if v == Auto {
		return aesni.Pick(n).String(), nil
	}
	return v, impl.Select(aesni.ImplPackage, v)
}

func (p *plan) roofline(u aesni.RooflineUnit, keyBits int) point {
	rounds := 6 + keyBits/64 // 10 for AES-128, 14 for AES-256
	return point{
		what: fmt.Sprintf("raw AES rounds on %v, %d rounds", u, rounds),
		run: func(ctx context.Context, t timer) error {
			s, err := t.measure(ctx, aesni.RooflineBlocks(u)*aesni.BlockSize, func(n int) {
				aesni.RawAESRounds(u, rounds, n)
			})
			if err != nil {
				return err
			}
			rl := Roofline{Unit: u.String(), KeyBits: keyBits, Rounds: rounds, MBps: s}
			for i, old := range p.report.Roofline {
				if old.Unit == rl.Unit && old.KeyBits == rl.KeyBits {
					if s.Median > old.MBps.Median {
						p.report.Roofline[i] = rl
					}
					return nil
				}
			}
			p.report.Roofline = append(p.report.Roofline, rl)
			return nil
		},
	}
}

// unitGroup measures one call per message on one core: every variant,
// and x/crypto/xts if baseline, their runs interleaved.
func (p *plan) unitGroup(keyBits, size int, op string, variants []string, baseline bool) point {
	return point{
		what: fmt.Sprintf("%d-bit key, %d bytes, %s: %s", keyBits, size, op, strings.Join(variants, " ")),
		run: func(ctx context.Context, t timer) error {
			defer impl.Reset(aesni.ImplPackage)
			var ms []member
			var results []Result
			var checks []func() error
			for _, v := range variants {
				used, err := useVariant(v, size)
				if err != nil {
					return err
				}
				c, err := xts.NewCipher(p.keys[keyBits])
				if err != nil {
					return err
				}
				defer c.Wipe()
				f, check := p.unitOp(c, unitRing(size, p.cfg.InPlace), op == "decrypt")
				ms = append(ms, member{bytesPerOp: size, setup: selectVariant(v), op: f})
				checks = append(checks, check)
				results = append(results, Result{KeyBits: keyBits, Size: size, Op: op, Impl: ImplXtsctl,
					Variant: used, Auto: v == Auto, Mode: ModeUnit, Threads: 1})
			}
			if baseline {
				f, err := xcryptoOp(p.keys[keyBits], size, op == "decrypt", p.cfg.InPlace)
				if err != nil {
					return err
				}
				ms = append(ms, member{bytesPerOp: size, setup: resetVariant, op: f})
				checks = append(checks, func() error { return nil })
				results = append(results, Result{KeyBits: keyBits, Size: size, Op: op, Impl: ImplXCrypto, Mode: ModeUnit, Threads: 1})
			}
			t.slice = unitSlice
			stats, err := t.measureGroup(ctx, ms)
			if err != nil {
				return err
			}
			for i, r := range results {
				if err := checks[i](); err != nil {
					return err
				}
				p.add(r, stats[i])
			}
			return nil
		},
	}
}

// resetVariant goes back to automatic dispatch.
func resetVariant() { impl.Reset(aesni.ImplPackage) }

// selectVariant returns a setup function that forces v (checked before).
func selectVariant(v string) func() {
	if v == Auto {
		return resetVariant
	}
	return func() { _ = impl.Select(aesni.ImplPackage, v) }
}

var errTagMismatch = errors.New("bench: an integrity tag did not verify during the benchmark")

// unitBuffers is how many buffers the one-call-per-message loops convert in
// turn: enough that a call never reads what the call before it wrote, and
// few enough to stay in the L1 cache (at most 16 KiB, or two units up to
// 16 KiB). A buffer converted in place call after call, as openssl speed
// does, makes each call wait for the previous call's stores: at 100-odd
// bytes that times a call's latency through memory, which no caller of a
// data unit sees (the sector layer converts each sector once). Measured on
// Intel family 6 model 167: vaes512c decrypting 127-byte units ran at 4314
// MB/s in place and 5902 with 2 or 16 buffers (vaes256: 4610 and 4820), so
// the two ways rank the kernels differently. --in-place keeps one buffer.
func unitBuffers(size int, inPlace bool) int {
	const budget = 16 << 10
	switch {
	case inPlace || size > budget:
		return 1
	case size > budget/2:
		return 2
	}
	return min(16, budget/size)
}

// unitRing returns unitBuffers(size, inPlace) buffers of random data, each
// its own allocation.
func unitRing(size int, inPlace bool) [][]byte {
	bufs := make([][]byte, unitBuffers(size, inPlace))
	for i := range bufs {
		bufs[i] = randomBytes(size)
	}
	return bufs
}

// unitOp returns the timed loop for one call per message, and a check to
// run after it (the integrity tags must have verified). Messages are
// encrypted and decrypted in place, each call on the next buffer of bufs
// (a ring from unitRing); only a decryption that verifies tags first reads
// the ciphertext (a copy of bufs[0], made here) into the buffers, as a
// volume read does.
func (p *plan) unitOp(c *xts.Cipher, bufs [][]byte, decrypt bool) (op func(n int), check func() error) {
	size := len(bufs[0])
	check = func() error { return nil }
	switch {
	case !p.cfg.Integrity && !decrypt:
		op = func(n int) {
			for i, j := 0, 0; i < n; i++ {
				buf := bufs[j]
				if j++; j == len(bufs) {
					j = 0
				}
				c.Encrypt(buf, buf, uint64(i))
			}
		}
	case !p.cfg.Integrity && decrypt:
		op = func(n int) {
			for i, j := 0, 0; i < n; i++ {
				buf := bufs[j]
				if j++; j == len(bufs) {
					j = 0
				}
				c.Decrypt(buf, buf, uint64(i))
			}
		}
	case !decrypt:
		// Encrypt, then tag the sector number and ciphertext.
		tag := make([]byte, TagSize)
		op = func(n int) {
			for i, j := 0, 0; i < n; i++ {
				buf := bufs[j]
				if j++; j == len(bufs) {
					j = 0
				}
				c.Encrypt(buf, buf, uint64(i))
				blake2b.SumSectors(tag, TagSize, p.tagKey, uint64(i), buf, size)
			}
		}
	default:
		// Verify the stored tag, then decrypt (every message is sector 0;
		// the ciphertext does not change, so one copy is enough, and the
		// plaintexts go round the ring).
		buf := bytes.Clone(bufs[0])
		want, tag := make([]byte, TagSize), make([]byte, TagSize)
		blake2b.SumSectors(want, TagSize, p.tagKey, 0, buf, size)
		dsts := bufs
		bad := 0
		op = func(n int) {
			for i, j := 0, 0; i < n; i++ {
				blake2b.SumSectors(tag, TagSize, p.tagKey, 0, buf, size)
				bad += 1 - subtle.ConstantTimeCompare(tag, want)
				c.Decrypt(dsts[j], buf, 0)
				if j++; j == len(dsts) {
					j = 0
				}
			}
		}
		check = func() error {
			if bad != 0 {
				return errTagMismatch
			}
			return nil
		}
	}
	return op, check
}

// xcryptoOp returns the timed loop of golang.org/x/crypto/xts, over the
// same ring of buffers as unitOp.
func xcryptoOp(key []byte, size int, decrypt, inPlace bool) (func(n int), error) {
	c, err := xcxts.NewCipher(aes.NewCipher, key)
	if err != nil {
		return nil, err
	}
	bufs := unitRing(size, inPlace)
	if decrypt {
		return func(n int) {
			for i, j := 0, 0; i < n; i++ {
				buf := bufs[j]
				if j++; j == len(bufs) {
					j = 0
				}
				c.Decrypt(buf, buf, uint64(i))
			}
		}, nil
	}
	return func(n int) {
		for i, j := 0, 0; i < n; i++ {
			buf := bufs[j]
			if j++; j == len(bufs) {
				j = 0
			}
			c.Encrypt(buf, buf, uint64(i))
		}
	}, nil
}

func (p *plan) peer(o *openssl, keyBits, size int, op string) point {
	return point{
		what: fmt.Sprintf("openssl speed, %d-bit key, %d bytes, %s", keyBits, size, op),
		run: func(ctx context.Context, t timer) error {
			mbps, err := o.speed(ctx, keyBits, size, op == "decrypt", t.budget)
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if err != nil {
				p.report.note("%v", err)
				return nil
			}
			p.add(Result{KeyBits: keyBits, Size: size, Op: op, Impl: ImplOpenSSL, Mode: ModeUnit, Threads: 1},
				Stats{Median: mbps, Min: mbps, Max: mbps, Q1: mbps, Q3: mbps, Runs: 1})
			return nil
		},
	}
}

// peerMulti measures openssl speed -elapsed in one process and in procs
// processes at once (-multi), taking turns, at most three times each: the
// gain more cores give a program that shares nothing between them, beside
// the sector layer's with as many workers.
func (p *plan) peerMulti(o *openssl, keyBits, size int, op string, procs int) point {
	return point{
		what: fmt.Sprintf("openssl speed -multi %d, %d-bit key, %d bytes, %s", procs, keyBits, size, op),
		run: func(ctx context.Context, t timer) error {
			rounds := max(1, min(t.runs, 3))
			per := [2][]float64{}
			for range rounds {
				for i, n := range []int{1, procs} {
					mbps, err := o.speedMulti(ctx, keyBits, size, op == "decrypt", t.budget/time.Duration(rounds), n)
					if ctx.Err() != nil {
						return ctx.Err()
					}
					if err != nil {
						p.report.note("%v", err)
						return nil
					}
					per[i] = append(per[i], mbps)
				}
			}
			for i, n := range []int{1, procs} {
				p.add(Result{KeyBits: keyBits, Size: size, Op: op, Impl: ImplOpenSSL, Mode: ModeBatch, Threads: n}, summarise(per[i]))
			}
			return nil
		},
	}
}

// batchGroup measures sector.Codec on batches of sectors, for every
// variant and worker count, their runs interleaved.
func (p *plan) batchGroup(keyBits, size int, op string, variants []string, workers []int) point {
	return point{
		what: fmt.Sprintf("sector layer, %d-bit key, %d-byte sectors, %s: %s, workers %v", keyBits, size, op, strings.Join(variants, " "), workers),
		run: func(ctx context.Context, t timer) error {
			defer impl.Reset(aesni.ImplPackage)
			length := p.cfg.BatchBytes
			var ms []member
			var results []Result
			var checks []func() error
			for _, v := range variants {
				used, err := useVariant(v, size)
				if err != nil {
					return err
				}
				for _, w := range workers {
					c, err := xts.NewCipher(p.keys[keyBits])
					if err != nil {
						return err
					}
					defer c.Wipe()
					codec, err := sector.NewCodec(c, sector.Params{Size: size, IVMode: sector.Plain64})
					if err != nil {
						return err
					}
					codec.SetWorkers(w)
					f, check, stop := p.batchOp(codec, length, size, w, op == "decrypt")
					defer stop()
					ms = append(ms, member{bytesPerOp: length, setup: selectVariant(v), op: f})
					checks = append(checks, check)
					results = append(results, Result{KeyBits: keyBits, Size: size, Op: op, Impl: ImplXtsctl,
						Variant: used, Auto: v == Auto, Mode: ModeBatch, Threads: w})
				}
			}
			stats, err := t.measureGroup(ctx, ms)
			if err != nil {
				return err
			}
			for i, r := range results {
				if err := checks[i](); err != nil {
					return err
				}
				p.add(r, stats[i])
			}
			return nil
		},
	}
}

func (p *plan) batchOp(codec *sector.Codec, length, size, w int, decrypt bool) (op func(n int), check func() error, stop func()) {
	// In place, except a decryption that verifies tags first (as unitOp).
	buf := randomBytes(length)
	sectors := uint64(length / size)
	check, stop = func() error { return nil }, func() {}
	if !p.cfg.Integrity {
		op = func(n int) {
			for i := range n {
				if decrypt {
					codec.Decrypt(buf, buf, uint64(i)*sectors)
				} else {
					codec.Encrypt(buf, buf, uint64(i)*sectors)
				}
			}
		}
		return op, check, stop
	}
	tags := make([]byte, int(sectors)*TagSize)
	var want []byte
	tg := newTagger(w, p.tagKey, size)
	stop = tg.stop
	if !decrypt {
		op = func(n int) {
			for i := range n {
				codec.Encrypt(buf, buf, uint64(i)*sectors)
				tg.sum(tags, buf, uint64(i)*sectors)
			}
		}
		return op, check, stop
	}
	dst := make([]byte, length)
	want = make([]byte, len(tags))
	tg.sum(want, buf, 0)
	bad := 0
	op = func(n int) {
		for range n {
			tg.sum(tags, buf, 0)
			if !bytes.Equal(tags, want) {
				bad++
			}
			codec.Decrypt(dst, buf, 0)
		}
	}
	check = func() error {
		if bad != 0 {
			return errTagMismatch
		}
		return nil
	}
	return op, check, stop
}

// A tagger computes BLAKE2b sector tags with w workers: the caller and
// w-1 goroutines that live for one measurement, so the timed loop starts
// no goroutines and allocates nothing.
type tagger struct {
	key  []byte
	size int
	work chan tagJob
	wg   sync.WaitGroup
}

type tagJob struct {
	tags, data []byte
	first      uint64
}

func newTagger(w int, key []byte, size int) *tagger {
	tg := &tagger{key: key, size: size, work: make(chan tagJob, w)}
	for range w - 1 {
		go func() {
			for j := range tg.work {
				blake2b.SumSectors(j.tags, TagSize, tg.key, j.first, j.data, tg.size)
				tg.wg.Done()
			}
		}()
	}
	return tg
}

func (tg *tagger) sum(tags, data []byte, first uint64) {
	workers := cap(tg.work)
	sectors := len(data) / tg.size
	per := (sectors + workers - 1) / workers
	for lo := 0; lo < sectors; lo += per {
		hi := min(lo+per, sectors)
		j := tagJob{tags[lo*TagSize : hi*TagSize], data[lo*tg.size : hi*tg.size], first + uint64(lo)}
		if hi == sectors {
			blake2b.SumSectors(j.tags, TagSize, tg.key, j.first, j.data, tg.size)
			break
		}
		tg.wg.Add(1)
		tg.work <- j
	}
	tg.wg.Wait()
}

func (tg *tagger) stop() { close(tg.work) }

// ParseLengths reads a comma-separated list of message lengths (--sizes);
// a k or K suffix multiplies by 1024. Each must be MinSize..MaxSize.
func ParseLengths(s string) ([]int, error) {
	var sizes []int
	for _, field := range strings.Split(s, ",") {
		field = strings.TrimSpace(field)
		if field == "" {
			return nil, errors.New("empty length in the list")
		}
		mult := 1
		if num, ok := strings.CutSuffix(strings.ToLower(field), "k"); ok {
			field, mult = num, 1024
		}
		n, err := strconv.Atoi(field)
		if err != nil {
			return nil, fmt.Errorf("%q is not a length in bytes", field)
		}
		n *= mult
		if n < MinSize {
			return nil, fmt.Errorf("%d bytes is too short: an XTS data unit is at least %d bytes", n, MinSize)
		}
		if n > MaxSize {
			return nil, fmt.Errorf("%d bytes is too long (at most %d)", n, MaxSize)
		}
		sizes = append(sizes, n)
	}
	return sizes, nil
}
