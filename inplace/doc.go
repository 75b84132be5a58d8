// Package inplace encrypts and decrypts an image file or block device in
// place, resumably and crash-safely: plain images (cryptsetup plain mode,
// the same bytes as plain.Encrypt writes to a new file) and xtsctl
// volumes (the same volume as volume.Create would make, which opens,
// verifies and decrypts to the original).
//
// The data is converted zone by zone. A zone either moves by at least its
// own size (shift mode: a volume's data moves up past its header and state
// area, plain data by its --offset) and is written straight to its new
// place, whose old content was converted and recorded before; or it goes
// first into a journal (journal mode: plain data in place), synced with a
// record naming it, and is rewritten from there after a crash. Records
// alternate between two slots and are authenticated with a key derived from
// the run's key, so that a run is resumed only with its own key, on its own
// target, and nothing read from a journal is believed before it is
// authenticated. docs/INPLACE.md describes the on-disk structures and the
// order of writes and syncs, and why each crash point is safe.
//
// Runs: EncryptPlain and DecryptPlain keep their journal in a file beside
// the image (Journal, FileJournal); EncryptVolume, DecryptVolume and
// ResumeVolume keep theirs at the end of the target. Probe and
// ProbeJournal describe an interrupted run without a key, and FindRun
// finds one for info. OpenTarget opens and locks a target, refusing one
// that is read-only, mounted or in use.
//
// A command does not call the runs directly: PrepareVolume and
// PreparePlain (with JournalFor, which places a plain run's journal) look
// at the target first, say whether an interrupted run is resumed, and make
// every check that needs no key; the Plan then runs with the key, so that
// a refusal comes before the passphrase is asked for. Errors are typed or
// sentinel values, for the caller to map to its messages.
package inplace
