package tcrypt

import (
	"context"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/xtsctl/xtsctl/internal/pbkdf2"
)

// A location is one place a header may be: its kind and offset, and the
// 512 bytes read there.
type location struct {
	kind   locKind
	offset int64 // in the header's file
	sector [headerSize]byte
	// trueCryptOnly: only TrueCrypt rows apply (headers of TrueCrypt 5
	// and earlier; VeraCrypt never wrote them).
	trueCryptOnly bool
}

type locKind int

const (
	locNormal locKind = iota
	locHidden
	locHiddenLegacy // TrueCrypt header versions 1-3: 1536 bytes before the end
	locBackup
	locBackupHidden
	locSystem
)

func (k locKind) String() string {
	return [...]string{"normal", "hidden", "hidden (TrueCrypt 5 and earlier)", "backup", "backup of the hidden volume", "system"}[k]
}

// A candidate is one header location and one key derivation to try.
type candidate struct {
	loc *location
	kdf kdf
}

// A match is a candidate whose derived key decrypted a header whose magic
// and CRCs matched, and the cipher that did it.
type match struct {
	cand   candidate
	cipher *headerCipher
	hdr    *header
}

// trial derives a candidate's key and tries the header ciphers. The key
// is derived in stages for PBKDF2: its first 64 bytes (AES-XTS and the
// other single ciphers) first, and the 128 or 192 bytes that cascades
// take only in a second pass when no candidate opened in the first, so
// that an AES volume costs a third of a full derivation for hashes with
// 64-byte output.
type trial struct {
	cand candidate
	pass []byte
	p    *pbkdf2.Stream // nil for Argon2id, and after its last stage
	dk   []byte         // Argon2id: the whole key
}

func (t *trial) wipe() {
	if t.p != nil {
		t.p.Wipe()
	}
	clear(t.dk)
}

// stage1 tries what the first 64 bytes open (everything, for Argon2id
// and the cheap TrueCrypt rows, which derive the whole key at once).
func (t *trial) stage1(ctx context.Context) (*match, error) {
	k := t.cand.kdf
	if k.row.hash == hashArgon2id {
		dk, err := argon2Key(ctx, t.pass, t.cand.loc.sector[:saltSize], k.t, k.m)
		if err != nil {
			return nil, err
		}
		t.dk = dk
		return t.try(dk, true), nil
	}
	t.p = pbkdf2.New(newHash(k.row.hash), t.pass, t.cand.loc.sector[:saltSize], k.iter)
	n := 64
	if k.row.product == trueCrypt {
		n = dkLen
	}
	dk, err := t.p.Derive(ctx, n)
	if err != nil {
		return nil, err
	}
	m := t.try(dk, n == dkLen)
	if n == dkLen {
		t.p.Wipe()
		t.p = nil
	}
	return m, nil
}

// stage2 derives the rest of a VeraCrypt PBKDF2 key and tries the
// cascades.
func (t *trial) stage2(ctx context.Context) (*match, error) {
	if t.p == nil {
		return nil, nil
	}
	dk, err := t.p.Derive(ctx, dkLen)
	if err != nil {
		return nil, err
	}
	return t.tryList(dk, cascades), nil
}

func (t *trial) try(dk []byte, all bool) *match {
	if m := t.tryList(dk, []headerCipher{aesXTS}); m != nil {
		return m
	}
	if m := t.tryList(dk, firstCiphers); m != nil {
		return m
	}
	if all {
		return t.tryList(dk, cascades)
	}
	return nil
}

func (t *trial) tryList(dk []byte, list []headerCipher) *match {
	var dec [encSize]byte
	defer clear(dec[:])
	for i := range list {
		c := &list[i]
		if c.mode != "xts" && t.cand.kdf.row.product != trueCrypt {
			continue // LRW and CBC are TrueCrypt's before 5.0
		}
		if c.need > len(dk) || !c.decrypt(dec[:], t.cand.loc.sector[saltSize:], dk) {
			continue
		}
		if h, ok := parseHeader(dec[:]); ok {
			return &match{cand: t.cand, cipher: c, hdr: h}
		}
	}
	return nil
}

// search tries the candidates on workers goroutines (0: one per CPU),
// cheapest first, and stops at the first that opens, cancelling the rest.
// It returns nil without error when none opens.
func search(ctx context.Context, cands []candidate, pass []byte, workers int) (*match, error) {
	if workers <= 0 {
		workers = runtime.NumCPU()
	}
	cands = slices.Clone(cands)
	slices.SortStableFunc(cands, func(a, b candidate) int {
		ca, cb := a.kdf.cost(), b.kdf.cost()
		switch {
		case ca < cb:
			return -1
		case ca > cb:
			return 1
		}
		return 0
	})
	trials := make([]*trial, len(cands))
	for i, c := range cands {
		trials[i] = &trial{cand: c, pass: pass}
	}
	defer func() {
		for _, t := range trials {
			t.wipe()
		}
	}()
	m, err := runAll(ctx, trials, workers, (*trial).stage1)
	if m != nil || err != nil {
		return m, err
	}
	return runAll(ctx, trials, workers, (*trial).stage2)
}

// runAll runs step on every trial, at most workers at once, and returns
// the first match, cancelling the steps still running.
func runAll(parent context.Context, trials []*trial, workers int, step func(*trial, context.Context) (*match, error)) (*match, error) {
	ctx, cancel := context.WithCancel(parent)
	defer cancel()
	var (
		next  atomic.Int64
		mu    sync.Mutex
		found *match
		wg    sync.WaitGroup
	)
	for range min(workers, len(trials)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= len(trials) || ctx.Err() != nil {
					return
				}
				m, err := step(trials[i], ctx)
				if err != nil {
					return // cancelled: by a match, or by the caller
				}
				if m != nil {
					mu.Lock()
					if found == nil {
						found = m
					} else {
						m.hdr.wipe()
					}
					mu.Unlock()
					cancel()
					return
				}
			}
		}()
	}
	wg.Wait()
	if found != nil {
		return found, nil
	}
	return nil, parent.Err()
}
