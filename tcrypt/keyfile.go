package tcrypt

import (
	"errors"
	"fmt"
	"hash/crc32"
)

// Passphrase and keyfile limits of the two programs.
const (
	// maxPassphrase is VeraCrypt's longest passphrase (1.24 and later);
	// TrueCrypt's is maxLegacyPassphrase.
	maxPassphrase       = 128
	maxLegacyPassphrase = 64
	// keyfileMaxRead: only a keyfile's first MiB counts.
	keyfileMaxRead = 1 << 20
)

// KeyFileMax is how much of a keyfile VeraCrypt and TrueCrypt read: a
// caller need read no more.
const KeyFileMax = keyfileMaxRead

// kdfPassword returns the password the KDF takes: the passphrase as it
// is, or with keyfiles VeraCrypt's keyfile pool (KeyfilesApply) with the
// passphrase added onto it. The pool is 64 bytes, or 128 when the
// passphrase is longer than TrueCrypt's 64 (VeraCrypt only). Keyfile
// order does not matter: their pools add up.
func kdfPassword(pass []byte, keyfiles [][]byte) ([]byte, error) {
	if len(pass) > maxPassphrase {
		return nil, fmt.Errorf("the passphrase is %d bytes, more than the %d VeraCrypt takes", len(pass), maxPassphrase)
	}
	if len(keyfiles) == 0 {
		if len(pass) == 0 {
			return nil, errors.New("a VeraCrypt or TrueCrypt volume opens with a passphrase, keyfiles or both: none was given")
		}
		return append([]byte(nil), pass...), nil
	}
	size := 64
	if len(pass) > maxLegacyPassphrase {
		size = 128
	}
	pool := make([]byte, size)
	for i, kf := range keyfiles {
		if len(kf) == 0 {
			return nil, fmt.Errorf("keyfile %d is empty: VeraCrypt refuses empty keyfiles", i+1)
		}
		crc := uint32(0xFFFFFFFF)
		at := 0
		for _, b := range kf[:min(len(kf), keyfileMaxRead)] {
			// The running CRC-32 register, without the final inversion.
			crc = crc32.IEEETable[byte(crc)^b] ^ crc>>8
			pool[at] += byte(crc >> 24)
			pool[at+1] += byte(crc >> 16)
			pool[at+2] += byte(crc >> 8)
			pool[at+3] += byte(crc)
			at += 4
			if at >= size {
				at = 0
			}
		}
	}
	for i, b := range pass {
		pool[i] += b
	}
	return pool, nil
}
