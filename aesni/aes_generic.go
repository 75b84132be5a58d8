package aesni

// Reference AES (FIPS-197), byte by byte as the standard writes it: the key
// expansion into the round-key layout the AES-NI instructions use (round key
// r is 16 bytes at offset 16*r, in the state's column-major byte order), and
// single-block encryption and decryption over those schedules. The assembly
// key expansion and kernels are tested against it.
//
// Indexing tables by secret bytes takes variable time: this code runs in
// production only where no AES instructions exist (other GOARCHes, the
// purego tag), as crypto/aes's generic code does. SECURITY.md says so.

// sbox is the AES S-box (FIPS-197 figure 7).
var sbox = [256]byte{
	0x63, 0x7c, 0x77, 0x7b, 0xf2, 0x6b, 0x6f, 0xc5, 0x30, 0x01, 0x67, 0x2b, 0xfe, 0xd7, 0xab, 0x76,
	0xca, 0x82, 0xc9, 0x7d, 0xfa, 0x59, 0x47, 0xf0, 0xad, 0xd4, 0xa2, 0xaf, 0x9c, 0xa4, 0x72, 0xc0,
	0xb7, 0xfd, 0x93, 0x26, 0x36, 0x3f, 0xf7, 0xcc, 0x34, 0xa5, 0xe5, 0xf1, 0x71, 0xd8, 0x31, 0x15,
	0x04, 0xc7, 0x23, 0xc3, 0x18, 0x96, 0x05, 0x9a, 0x07, 0x12, 0x80, 0xe2, 0xeb, 0x27, 0xb2, 0x75,
	0x09, 0x83, 0x2c, 0x1a, 0x1b, 0x6e, 0x5a, 0xa0, 0x52, 0x3b, 0xd6, 0xb3, 0x29, 0xe3, 0x2f, 0x84,
	0x53, 0xd1, 0x00, 0xed, 0x20, 0xfc, 0xb1, 0x5b, 0x6a, 0xcb, 0xbe, 0x39, 0x4a, 0x4c, 0x58, 0xcf,
	0xd0, 0xef, 0xaa, 0xfb, 0x43, 0x4d, 0x33, 0x85, 0x45, 0xf9, 0x02, 0x7f, 0x50, 0x3c, 0x9f, 0xa8,
	0x51, 0xa3, 0x40, 0x8f, 0x92, 0x9d, 0x38, 0xf5, 0xbc, 0xb6, 0xda, 0x21, 0x10, 0xff, 0xf3, 0xd2,
	0xcd, 0x0c, 0x13, 0xec, 0x5f, 0x97, 0x44, 0x17, 0xc4, 0xa7, 0x7e, 0x3d, 0x64, 0x5d, 0x19, 0x73,
	0x60, 0x81, 0x4f, 0xdc, 0x22, 0x2a, 0x90, 0x88, 0x46, 0xee, 0xb8, 0x14, 0xde, 0x5e, 0x0b, 0xdb,
	0xe0, 0x32, 0x3a, 0x0a, 0x49, 0x06, 0x24, 0x5c, 0xc2, 0xd3, 0xac, 0x62, 0x91, 0x95, 0xe4, 0x79,
	0xe7, 0xc8, 0x37, 0x6d, 0x8d, 0xd5, 0x4e, 0xa9, 0x6c, 0x56, 0xf4, 0xea, 0x65, 0x7a, 0xae, 0x08,
	0xba, 0x78, 0x25, 0x2e, 0x1c, 0xa6, 0xb4, 0xc6, 0xe8, 0xdd, 0x74, 0x1f, 0x4b, 0xbd, 0x8b, 0x8a,
	0x70, 0x3e, 0xb5, 0x66, 0x48, 0x03, 0xf6, 0x0e, 0x61, 0x35, 0x57, 0xb9, 0x86, 0xc1, 0x1d, 0x9e,
	0xe1, 0xf8, 0x98, 0x11, 0x69, 0xd9, 0x8e, 0x94, 0x9b, 0x1e, 0x87, 0xe9, 0xce, 0x55, 0x28, 0xdf,
	0x8c, 0xa1, 0x89, 0x0d, 0xbf, 0xe6, 0x42, 0x68, 0x41, 0x99, 0x2d, 0x0f, 0xb0, 0x54, 0xbb, 0x16,
}

// expandKeyGeneric fills c.enc and c.dec from k1 and c.tweak from k2.
func expandKeyGeneric(c *Cipher, k1, k2 []byte) {
	expandEncGeneric(&c.enc, k1)
	expandEncGeneric(&c.tweak, k2)
	invertScheduleGeneric(&c.dec, &c.enc, 6+len(k1)/4)
}

// expandEncGeneric writes the encryption schedule of key (16 or 32 bytes).
func expandEncGeneric(s *schedule, key []byte) {
	nk := len(key) / 4
	rounds := nk + 6
	w := s[:16*(rounds+1)]
	copy(w, key)
	rcon := byte(1)
	for i := nk; i < 4*(rounds+1); i++ {
		var t [4]byte
		copy(t[:], w[4*(i-1):4*i])
		switch {
		case i%nk == 0:
			t = [4]byte{sbox[t[1]] ^ rcon, sbox[t[2]], sbox[t[3]], sbox[t[0]]} // SubWord(RotWord(t)) ^ Rcon
			rcon = xtime(rcon)
		case nk > 6 && i%nk == 4:
			t = [4]byte{sbox[t[0]], sbox[t[1]], sbox[t[2]], sbox[t[3]]}
		}
		for j := range 4 {
			w[4*i+j] = w[4*(i-nk)+j] ^ t[j]
		}
	}
}

// invertScheduleGeneric builds the decryption schedule for the equivalent
// inverse cipher (FIPS-197 section 5.3.5), as AESDEC expects: the round keys
// in reverse order, InvMixColumns applied to all but the first and last.
func invertScheduleGeneric(dec, enc *schedule, rounds int) {
	copy(dec[0:16], enc[16*rounds:16*rounds+16])
	for r := 1; r < rounds; r++ {
		rk := dec[16*r : 16*r+16]
		copy(rk, enc[16*(rounds-r):16*(rounds-r)+16])
		for col := 0; col < 16; col += 4 {
			invMixColumn(rk[col : col+4])
		}
	}
	copy(dec[16*rounds:16*rounds+16], enc[0:16])
}

// xtime multiplies b by x in GF(2^8) modulo x^8 + x^4 + x^3 + x + 1.
func xtime(b byte) byte { return b<<1 ^ (b>>7)*0x1b }

// gmul multiplies a and b in GF(2^8).
func gmul(a, b byte) byte {
	var p byte
	for b != 0 {
		if b&1 != 0 {
			p ^= a
		}
		a = xtime(a)
		b >>= 1
	}
	return p
}

func invMixColumn(c []byte) {
	a0, a1, a2, a3 := c[0], c[1], c[2], c[3]
	c[0] = mul14[a0] ^ mul11[a1] ^ mul13[a2] ^ mul9[a3]
	c[1] = mul9[a0] ^ mul14[a1] ^ mul11[a2] ^ mul13[a3]
	c[2] = mul13[a0] ^ mul9[a1] ^ mul14[a2] ^ mul11[a3]
	c[3] = mul11[a0] ^ mul13[a1] ^ mul9[a2] ^ mul14[a3]
}

// invSbox is the inverse of sbox, and mul9..mul14 multiply by InvMixColumns'
// coefficients; all are derived from sbox and gmul at start-up.
var invSbox, mul9, mul11, mul13, mul14 [256]byte

func init() {
	for i := range 256 {
		invSbox[sbox[i]] = byte(i)
		mul9[i] = gmul(byte(i), 9)
		mul11[i] = gmul(byte(i), 11)
		mul13[i] = gmul(byte(i), 13)
		mul14[i] = gmul(byte(i), 14)
	}
}

// The state is 16 bytes, column-major: byte r+4c is row r of column c.

func addRoundKey(s *[16]byte, rk []byte) {
	for i := range 16 {
		s[i] ^= rk[i]
	}
}

// subShiftRows applies SubBytes and ShiftRows (row r rotates left by r).
func subShiftRows(s *[16]byte) {
	var t [16]byte
	for c := range 4 {
		for r := range 4 {
			t[r+4*c] = sbox[s[r+4*((c+r)%4)]]
		}
	}
	*s = t
}

// invSubShiftRows applies InvShiftRows and InvSubBytes (they commute).
func invSubShiftRows(s *[16]byte) {
	var t [16]byte
	for c := range 4 {
		for r := range 4 {
			t[r+4*((c+r)%4)] = invSbox[s[r+4*c]]
		}
	}
	*s = t
}

func mixColumns(s *[16]byte) {
	for c := 0; c < 16; c += 4 {
		a0, a1, a2, a3 := s[c], s[c+1], s[c+2], s[c+3]
		s[c] = xtime(a0) ^ xtime(a1) ^ a1 ^ a2 ^ a3
		s[c+1] = a0 ^ xtime(a1) ^ xtime(a2) ^ a2 ^ a3
		s[c+2] = a0 ^ a1 ^ xtime(a2) ^ xtime(a3) ^ a3
		s[c+3] = xtime(a0) ^ a0 ^ a1 ^ a2 ^ xtime(a3)
	}
}

// encryptBlockGeneric encrypts one block with schedule ks (FIPS-197 section 5.1).
func encryptBlockGeneric(ks *schedule, rounds int, dst, src []byte) {
	var s [16]byte
	copy(s[:], src[:16])
	addRoundKey(&s, ks[0:16])
	for r := 1; r < rounds; r++ {
		subShiftRows(&s)
		mixColumns(&s)
		addRoundKey(&s, ks[16*r:16*r+16])
	}
	subShiftRows(&s)
	addRoundKey(&s, ks[16*rounds:16*rounds+16])
	copy(dst[:16], s[:])
}

// decryptBlockGeneric decrypts one block with the equivalent inverse cipher
// (FIPS-197 section 5.3.5), using the decryption schedule as AESDEC does.
func decryptBlockGeneric(dk *schedule, rounds int, dst, src []byte) {
	var s [16]byte
	copy(s[:], src[:16])
	addRoundKey(&s, dk[0:16])
	for r := 1; r < rounds; r++ {
		invSubShiftRows(&s)
		for c := 0; c < 16; c += 4 {
			invMixColumn(s[c : c+4])
		}
		addRoundKey(&s, dk[16*r:16*r+16])
	}
	invSubShiftRows(&s)
	addRoundKey(&s, dk[16*rounds:16*rounds+16])
	copy(dst[:16], s[:])
}
