// Package disk is the format layer: every on-disk encryption format xtsctl
// reads (plain, xtsctl volumes, LUKS1/LUKS2, VeraCrypt/TrueCrypt, ...) sits
// behind one interface, and every verb runs one path for all of them:
// detect the format (Pick), open its header, check the unlock request
// before any prompt, unlock once, act.
//
// A Format probes an image for its signature and opens its header. A Header
// reports what `info` shows, says before any prompt whether an unlock can
// succeed and which secrets it takes (Check), and unlocks with them
// (Unlock), returning an Unlocked: the one description of what to serve,
// a Layout (the plaintext's extents in the image, the sector size and
// tweak rule of each, the cipher) and the key. Formats that keep state
// while served (our volume's dirty regions) attach a session to it
// (Attacher); the rest are served by the generic extent device here.
// Optional capabilities are separate interfaces a Header or a Format may
// implement: key slots, header backup and restore, verify, create; the
// in-place conversion of a format (InPlacer) is registered by the package
// that provides it (RegisterInPlace: package inplace, for volumes and
// plain images).
//
// Formats register themselves (Register) from their package's init; a
// program selects the formats it supports by importing their packages.
// Failures are *Error values whose Kind the command line maps to exit
// codes.
package disk
