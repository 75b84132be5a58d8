package volume

// The end-to-end digest is the BLAKE2b-512 of the whole plaintext, in order
// (docs/FORMAT.md, "End-to-end digest"): what b2sum prints for the
// plaintext image, so that anyone can check it without xtsctl. One BLAKE2b
// stream cannot be split over cores; stream.Run hashes the chunks in order on
// a goroutine of its own (stream.Stages.Ordered) while the workers encrypt,
// tag and write the others.
