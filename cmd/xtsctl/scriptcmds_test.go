package main

import (
	"os"
	"strconv"

	"github.com/rogpeppe/go-internal/testscript"
)

// scriptCmds damage images the way the bad-input tests need, at byte
// offsets the scripts take from docs/FORMAT.md's layout.
var scriptCmds = map[string]func(ts *testscript.TestScript, neg bool, args []string){
	// flipbyte FILE OFFSET...: invert the lowest bit of each byte.
	"flipbyte": func(ts *testscript.TestScript, neg bool, args []string) {
		if neg || len(args) < 2 {
			ts.Fatalf("usage: flipbyte FILE OFFSET...")
		}
		f := openRW(ts, args[0])
		defer f.Close()
		for _, a := range args[1:] {
			off := scriptInt(ts, a)
			b := make([]byte, 1)
			if _, err := f.ReadAt(b, off); err != nil {
				ts.Fatalf("flipbyte: %v", err)
			}
			b[0] ^= 1
			if _, err := f.WriteAt(b, off); err != nil {
				ts.Fatalf("flipbyte: %v", err)
			}
		}
	},
	// swapbytes FILE OFFSET1 OFFSET2 LENGTH: exchange two ranges.
	"swapbytes": func(ts *testscript.TestScript, neg bool, args []string) {
		if neg || len(args) != 4 {
			ts.Fatalf("usage: swapbytes FILE OFFSET1 OFFSET2 LENGTH")
		}
		f := openRW(ts, args[0])
		defer f.Close()
		o1, o2, n := scriptInt(ts, args[1]), scriptInt(ts, args[2]), scriptInt(ts, args[3])
		a, b := make([]byte, n), make([]byte, n)
		f.ReadAt(a, o1)
		f.ReadAt(b, o2)
		f.WriteAt(b, o1)
		f.WriteAt(a, o2)
	},
	// truncate FILE SIZE
	"truncate": func(ts *testscript.TestScript, neg bool, args []string) {
		if neg || len(args) != 2 {
			ts.Fatalf("usage: truncate FILE SIZE")
		}
		ts.Check(os.Truncate(ts.MkAbs(args[0]), scriptInt(ts, args[1])))
	},
}

func openRW(ts *testscript.TestScript, name string) *os.File {
	f, err := os.OpenFile(ts.MkAbs(name), os.O_RDWR, 0)
	ts.Check(err)
	return f
}

func scriptInt(ts *testscript.TestScript, s string) int64 {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		ts.Fatalf("bad number %q", s)
	}
	return n
}
