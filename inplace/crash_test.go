package inplace

import (
	"bytes"
	"math/rand/v2"
)

// The power-loss model (as volume/crash_test.go's crashImages): what was
// synced is on the disk; of each write since the device's last sync, any
// subset of its 512-byte sectors may be; a size change since the last sync
// may or may not be. A journal appears complete (it was written, synced and
// renamed) and disappears in one step (the directory is synced).

// diskState is what a crash leaves: the target and the journal (nil: none).
type diskState struct {
	target, journal []byte
}

// piece is a part of a pending operation that reaches the disk or not.
type piece struct {
	dev  string
	kind opKind
	off  int64
	data []byte
}

// crashStates returns states a crash after the first n operations of ops
// may leave, from start: none and all of the pending pieces, prefixes and
// suffixes at a few cuts, and random subsets.
func crashStates(start diskState, ops []op, n int, r *rand.Rand, random int) []diskState {
	durable := diskState{target: bytes.Clone(start.target), journal: bytes.Clone(start.journal)}
	var pending []piece
	get := func(s *diskState, dev string) *[]byte {
		if dev == "journal" {
			return &s.journal
		}
		return &s.target
	}
	apply := func(s *diskState, p piece) {
		b := get(s, p.dev)
		switch p.kind {
		case opWrite:
			if *b == nil && p.dev == "journal" {
				return // written to a journal that is gone
			}
			if end := p.off + int64(len(p.data)); end > int64(len(*b)) {
				*b = append(*b, make([]byte, end-int64(len(*b)))...)
			}
			copy((*b)[p.off:], p.data)
		case opTruncate:
			if p.off > int64(len(*b)) {
				*b = append(*b, make([]byte, p.off-int64(len(*b)))...)
			} else {
				*b = (*b)[:p.off]
			}
		}
	}
	for _, o := range ops[:n] {
		switch o.kind {
		case opWrite:
			for i := 0; i < len(o.data); i += 512 {
				pending = append(pending, piece{o.dev, opWrite, o.off + int64(i), o.data[i:min(i+512, len(o.data))]})
			}
		case opTruncate:
			pending = append(pending, piece{dev: o.dev, kind: opTruncate, off: o.off})
		case opSync:
			keep := pending[:0]
			for _, p := range pending {
				if p.dev == o.dev {
					apply(&durable, p)
				} else {
					keep = append(keep, p)
				}
			}
			pending = keep
		case opCreate:
			durable.journal = bytes.Clone(o.data)
		case opRemove:
			durable.journal = nil
			keep := pending[:0]
			for _, p := range pending {
				if p.dev != "journal" {
					keep = append(keep, p)
				}
			}
			pending = keep
		}
	}
	build := func(keep func(i int) bool) diskState {
		s := diskState{target: bytes.Clone(durable.target), journal: bytes.Clone(durable.journal)}
		for i, p := range pending {
			if keep(i) {
				apply(&s, p)
			}
		}
		return s
	}
	states := []diskState{build(func(int) bool { return false })}
	if len(pending) == 0 {
		return states
	}
	states = append(states, build(func(int) bool { return true }))
	for range 3 {
		k := r.IntN(len(pending))
		states = append(states, build(func(i int) bool { return i < k }), build(func(i int) bool { return i >= k }))
	}
	for range random {
		states = append(states, build(func(int) bool { return r.IntN(2) == 0 }))
	}
	return states
}
