//go:build !purego

package inplace

const slowCrypto = false
