// Package pbkdf2 is PBKDF2-HMAC (RFC 8018) that leaves no copy of the
// password or of its output behind. crypto/pbkdf2 takes the password as a
// string (a copy nobody can overwrite), and its HMAC keeps the password
// XORed with the pads, and the hashes' states after them, in memory that
// is freed as it is. Here every such buffer is the Stream's own, and Wipe
// clears it.
//
// The output comes block by block (Derive), so that a caller can try the
// first bytes before the rest are derived, and a derivation stops when
// its context is done.
package pbkdf2

import (
	"context"
	"crypto/subtle"
	"encoding"
	"encoding/binary"
	"hash"
)

// A Stream derives one password's PBKDF2 output. The caller calls Wipe.
type Stream struct {
	inner, outer hash.Hash
	// istate and ostate are the hashes' states after the inner and outer
	// pads, restored for every HMAC as crypto/hmac restores them; nil
	// for a hash that cannot marshal its state, which is given ipad and
	// opad again instead.
	istate, ostate []byte
	iu, ou         encoding.BinaryUnmarshaler
	ipad, opad     []byte
	salt           []byte
	iter           int
	out            []byte // the blocks derived so far
	u, t           []byte
	index          [4]byte
}

type marshaler interface {
	encoding.BinaryMarshaler
	encoding.BinaryUnmarshaler
}

// New returns a Stream of PBKDF2-HMAC with h over password and salt, iter
// iterations. It keeps salt, and no reference to password.
func New(h func() hash.Hash, password, salt []byte, iter int) *Stream {
	s := &Stream{inner: h(), outer: h(), salt: salt, iter: iter}
	size, bs := s.inner.Size(), s.inner.BlockSize()
	s.ipad, s.opad = make([]byte, bs), make([]byte, bs)
	key := password
	if len(key) > bs {
		// HMAC's key is the password's hash.
		s.outer.Write(password)
		key = s.outer.Sum(make([]byte, 0, size))
		scrub(s.outer)
	}
	copy(s.ipad, key)
	copy(s.opad, key)
	if len(password) > bs {
		clear(key)
	}
	for i := range s.ipad {
		s.ipad[i] ^= 0x36
		s.opad[i] ^= 0x5c
	}
	im, iok := s.inner.(marshaler)
	om, ook := s.outer.(marshaler)
	if iok && ook {
		s.inner.Reset()
		s.inner.Write(s.ipad)
		s.outer.Reset()
		s.outer.Write(s.opad)
		is, ierr := im.MarshalBinary()
		os, oerr := om.MarshalBinary()
		if ierr == nil && oerr == nil {
			s.istate, s.ostate, s.iu, s.ou = is, os, im, om
			clear(s.ipad)
			clear(s.opad)
			s.ipad, s.opad = nil, nil
		} else {
			clear(is)
			clear(os)
		}
	}
	s.u, s.t = make([]byte, 0, size), make([]byte, size)
	return s
}

// mac computes HMAC(password, a || b) into s.u.
func (s *Stream) mac(a, b []byte) {
	padded(s.inner, s.iu, s.istate, s.ipad)
	s.inner.Write(a)
	if b != nil {
		s.inner.Write(b)
	}
	s.u = s.inner.Sum(s.u[:0])
	padded(s.outer, s.ou, s.ostate, s.opad)
	s.outer.Write(s.u)
	s.u = s.outer.Sum(s.u[:0])
}

// iterate runs n iterations after the first: U = HMAC(U), T ^= U. It
// keeps the hashes and states in locals, the loop crypto/pbkdf2 runs.
func (s *Stream) iterate(n int) {
	inner, outer, iu, ou, istate, ostate := s.inner, s.outer, s.iu, s.ou, s.istate, s.ostate
	u, t := s.u, s.t
	if iu == nil || ou == nil {
		for range n {
			s.mac(s.u, nil)
			subtle.XORBytes(t, t, s.u)
		}
		return
	}
	for range n {
		if err := iu.UnmarshalBinary(istate); err != nil {
			panic("pbkdf2: " + err.Error())
		}
		inner.Write(u)
		u = inner.Sum(u[:0])
		if err := ou.UnmarshalBinary(ostate); err != nil {
			panic("pbkdf2: " + err.Error())
		}
		outer.Write(u)
		u = outer.Sum(u[:0])
		subtle.XORBytes(t, t, u)
	}
	s.u = u
}

// padded puts h in its state after pad: restored from state through u,
// or, without u, written again.
func padded(h hash.Hash, u encoding.BinaryUnmarshaler, state, pad []byte) {
	if u == nil {
		h.Reset()
		h.Write(pad)
		return
	}
	if err := u.UnmarshalBinary(state); err != nil {
		panic("pbkdf2: " + err.Error())
	}
}

// Derive extends the output to at least n bytes and returns its first n,
// which stay the Stream's (Wipe clears them). It returns ctx.Err() if ctx
// is done first.
func (s *Stream) Derive(ctx context.Context, n int) ([]byte, error) {
	hLen := len(s.t)
	if need := (n + hLen - 1) / hLen * hLen; cap(s.out) < need {
		// Grown here, once, so that append never leaves a copy behind.
		out := make([]byte, len(s.out), need)
		copy(out, s.out)
		clear(s.out)
		s.out = out
	}
	done := ctx.Done()
	for len(s.out) < n {
		binary.BigEndian.PutUint32(s.index[:], uint32(len(s.out)/hLen+1))
		s.mac(s.salt, s.index[:])
		copy(s.t, s.u)
		for i := 1; i < s.iter; i += 1024 {
			select {
			case <-done:
				return nil, ctx.Err()
			default:
			}
			s.iterate(min(1024, s.iter-i))
		}
		s.out = append(s.out, s.t...)
	}
	return s.out[:n], nil
}

// Wipe clears the output and everything derived from the password.
func (s *Stream) Wipe() {
	clear(s.out[:cap(s.out)])
	clear(s.u[:cap(s.u)])
	clear(s.t)
	clear(s.istate)
	clear(s.ostate)
	clear(s.ipad)
	clear(s.opad)
	scrub(s.inner)
	scrub(s.outer)
}

// scrub resets h and overwrites the partial block it buffers (the tail of
// the last thing written: part of a long password, or of an HMAC).
func scrub(h hash.Hash) {
	h.Reset()
	h.Write(make([]byte, h.BlockSize()-1))
	h.Reset()
}

// Key returns the first keyLen bytes of PBKDF2-HMAC with h, which the
// caller wipes, and wipes the rest. The caller bounds iter and keyLen.
func Key(h func() hash.Hash, password, salt []byte, iter, keyLen int) []byte {
	s := New(h, password, salt, iter)
	defer s.Wipe()
	out, _ := s.Derive(context.Background(), keyLen)
	return append(make([]byte, 0, keyLen), out...)
}
