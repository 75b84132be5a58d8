// Package bitlk reads Windows BitLocker volumes (and BitLocker To Go) as a
// format of the disk layer (package disk): --type bitlk, detected by its
// signature.
//
// A volume's first sector names three copies of the FVE metadata. Open
// reads all three and uses the first valid one (signature, version,
// sizes, CRC-32, the offsets it names, its entries); info reports them
// all and whether they agree. The metadata holds the key protectors
// (VMK entries): each wraps the volume master key (VMK) with AES-CCM
// under a key that comes from a user password, a recovery password, a
// startup key (.BEK) file or, on a suspended volume, a key stored in the
// clear. The VMK opens the full-volume encryption key (FVEK) and the
// validation datum, the SHA-256 of the metadata copy: the copy is
// authenticated before anything it says is used to serve data.
//
// The data is AES-XTS (Windows 10 and later), AES-CBC with the encrypted
// byte-offset IV (Windows 8), or AES-CBC with the Elephant diffuser
// (Windows Vista and 7), in 512- or 4096-byte sectors. The device is laid
// out as Windows sees it and as cryptsetup maps it: the boot sectors
// Windows moved when it encrypted the volume come back at the start, the
// metadata areas read as zeros, the rest decrypts in place. None of these
// modes authenticates the data: a changed sector decrypts to garbage
// without an error (Elephant spreads the change over the whole sector).
// Volumes are served read-only.
//
// Refused, with an error naming the reason before any prompt: Windows
// Vista's version 1, volumes being encrypted or decrypted (or encrypted
// on write), protectors that need a TPM or a smart card, unknown methods
// and sector sizes. docs/FORMATS.md says what was checked and how.
package bitlk
