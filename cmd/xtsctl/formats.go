package main

// The formats xtsctl reads and writes: each registers itself with package
// disk; a new format is one package and one line here.
import (
	_ "github.com/xtsctl/xtsctl/bitlk"
	_ "github.com/xtsctl/xtsctl/fvault2"
	_ "github.com/xtsctl/xtsctl/luks/luksimage"
	_ "github.com/xtsctl/xtsctl/plain"
	_ "github.com/xtsctl/xtsctl/tcrypt"
	_ "github.com/xtsctl/xtsctl/volume"
)
