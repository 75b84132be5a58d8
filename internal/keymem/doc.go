// Package keymem lets a test look for keys in its own process's memory:
// after a volume or device is closed, no piece of its keys may be left
// (SECURITY.md, "Keys in memory"). Only tests import it.
//
// The test does not hold the keys it looks for: a helper process (the
// test binary run again, with Env set, see Helper) derives them and prints
// fingerprints of every window of them, hashed with multipliers the test
// picks at random for the run. The test then hashes every window of its
// readable anonymous memory (/proc/self/maps, /proc/self/mem), at every
// byte offset, and looks the hashes up.
package keymem
