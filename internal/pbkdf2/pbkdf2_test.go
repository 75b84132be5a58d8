package pbkdf2

import (
	"bytes"
	"context"
	"crypto/md5"
	stdpbkdf2 "crypto/pbkdf2"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"hash"
	"testing"
	"time"

	"golang.org/x/crypto/blake2s"
	"golang.org/x/crypto/ripemd160" //lint:ignore SA1019 a hash without a marshalable state, as LUKS1 and TrueCrypt headers use
)

var hashes = map[string]func() hash.Hash{
	"sha1": sha1.New, "sha256": sha256.New, "sha512": sha512.New, "md5": md5.New,
	"ripemd160": ripemd160.New, // no marshalable state: the pads are written again
	"blake2s":   func() hash.Hash { h, _ := blake2s.New256(nil); return h },
}

// TestKey compares with crypto/pbkdf2: passwords shorter and longer than
// the hash's block, outputs of part of a block and of several, derived at
// once and in two steps, iteration counts on either side of the batches
// between context checks (1024).
func TestKey(t *testing.T) {
	salt := []byte("salt of sixteen!")
	for name, h := range hashes {
		for _, c := range []struct{ pwLen, iter int }{
			{0, 3}, {12, 1}, {12, 2}, {12, 3}, {64, 1025}, {65, 3}, {129, 2049}, {12, 1024},
		} {
			pwLen, iter := c.pwLen, c.iter
			pw := bytes.Repeat([]byte{'p'}, pwLen)
			for _, n := range []int{1, 16, 64, 192} {
				want, err := stdpbkdf2.Key(h, string(pw), salt, iter, n)
				if err != nil {
					t.Fatal(err)
				}
				if got := Key(h, pw, salt, iter, n); !bytes.Equal(got, want) {
					t.Fatalf("%s, %d-byte password, %d iterations, %d bytes: %x, want %x", name, pwLen, iter, n, got, want)
				}
				s := New(h, pw, salt, iter)
				first, _ := s.Derive(context.Background(), n/2+1)
				if !bytes.Equal(first, want[:n/2+1]) {
					t.Fatalf("%s, %d-byte password: the first %d bytes differ", name, pwLen, n/2+1)
				}
				all, _ := s.Derive(context.Background(), n)
				if !bytes.Equal(all, want) {
					t.Fatalf("%s, %d-byte password: %d bytes in two steps differ", name, pwLen, n)
				}
				s.Wipe()
			}
		}
	}
}

// TestWipe: after Wipe the Stream holds nothing of the password, the pads
// or the output.
func TestWipe(t *testing.T) {
	for name, h := range hashes {
		pw := []byte("a password long enough to show!!")
		s := New(h, pw, []byte("salt"), 2)
		out, _ := s.Derive(context.Background(), 100)
		out = out[:cap(out)]
		ipad, opad := s.ipad, s.opad
		s.Wipe()
		for what, b := range map[string][]byte{"output": out, "istate": s.istate, "ostate": s.ostate, "ipad": ipad, "opad": opad, "u": s.u[:cap(s.u)], "t": s.t} {
			if !bytes.Equal(b, make([]byte, len(b))) {
				t.Errorf("%s: %s not cleared", name, what)
			}
		}
	}
}

// TestDeriveCancel: a derivation stops when its context is done.
func TestDeriveCancel(t *testing.T) {
	s := New(sha512.New, []byte("pw"), make([]byte, 64), 1<<30)
	defer s.Wipe()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { _, err := s.Derive(ctx, 64); done <- err }()
	time.Sleep(10 * time.Millisecond)
	cancel()
	select {
	case err := <-done:
		if err != context.Canceled {
			t.Fatalf("Derive: %v, want context.Canceled", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Derive did not stop")
	}
}

// BenchmarkKey compares with crypto/pbkdf2 (the same state restoring).
func BenchmarkKey(b *testing.B) {
	for _, name := range []string{"sha256", "sha512"} {
		h := hashes[name]
		b.Run(name+"/std", func(b *testing.B) {
			for range b.N {
				stdpbkdf2.Key(h, "passphrase", make([]byte, 32), 10000, 64)
			}
		})
		b.Run(name+"/wiped", func(b *testing.B) {
			for range b.N {
				Key(h, []byte("passphrase"), make([]byte, 32), 10000, 64)
			}
		})
	}
}
