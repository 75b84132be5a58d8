// Package tcrypt opens VeraCrypt and TrueCrypt volumes whose data is
// encrypted with AES (XTS, 512-byte data units), as a format of the
// format layer (package disk): normal, hidden and system-encrypted
// volumes, through the primary or the backup header, with passphrases,
// PIMs and keyfiles, and every header KDF the two programs use (PBKDF2
// with SHA-512, SHA-256, RIPEMD-160, Whirlpool, BLAKE2s-256 and
// Streebog-512 at their iteration counts, and VeraCrypt's Argon2id).
//
// A header has no magic in clear: it is found by trial decryption, every
// candidate key derivation on every core until one decrypts a header whose
// magic and CRCs match. Nothing read from an image is used before that,
// and the data area the header describes is then bounded by the image.
// Volumes encrypted with VeraCrypt's other ciphers and cascades (Serpent,
// Twofish, Camellia, Kuznyechik) or TrueCrypt's legacy AES-LRW and AES-CBC
// modes are recognised and refused by name. docs/FORMATS.md says what is supported and how it was
// checked.
package tcrypt
