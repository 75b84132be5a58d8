//go:build purego

package inplace

// slowCrypto: the pure-Go AES of -tags purego makes the crash replays
// tens of times slower; they then replay every fifth crash point (and the
// last ones), which CI's plain run replays all of.
const slowCrypto = true
