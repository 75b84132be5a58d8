//go:build purego

package main

// puregoBuild: the AES and BLAKE2b assembly is left out (-tags purego).
const puregoBuild = true
