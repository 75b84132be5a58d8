// Package impl lets tests and benchmarks force one implementation of a
// package's kernels, as the standard library's crypto/internal/impl does.
// A package registers its implementations once, at start-up; Select forces
// one of them for every later call into that package, and Reset gives the
// choice back to the package's own dispatch. Production code never calls
// Select: it is how xtsctl's tests run every kernel, and how `xtsctl bench
// --variant` measures each one.
//
// Select and Reset are not safe to call while other goroutines use the
// package whose implementation they change.
//
// impl imports nothing of xtsctl's, so that the kernel packages below
// everything else (aesni) can register in it.
package impl

import (
	"fmt"
	"strings"
	"sync"
)

type entry struct {
	names     []string
	available []bool
	force     func(i int) // i < 0: back to automatic dispatch
}

var (
	mu   sync.Mutex
	pkgs = map[string]*entry{}
)

// Register records the implementations of pkg, in the order List reports
// them, whether each can run on this machine, and force, which Select calls
// with an index into names (or -1 from Reset). It panics if pkg is
// registered twice or the lists differ in length: both are programming
// errors caught at start-up.
func Register(pkg string, names []string, available []bool, force func(i int)) {
	mu.Lock()
	defer mu.Unlock()
	if pkgs[pkg] != nil {
		panic("impl: package " + pkg + " registered twice")
	}
	if len(names) != len(available) {
		panic("impl: names and availability of " + pkg + " differ in length")
	}
	pkgs[pkg] = &entry{names: append([]string(nil), names...), available: append([]bool(nil), available...), force: force}
}

func lookup(pkg string) (*entry, error) {
	e := pkgs[pkg]
	if e == nil {
		return nil, fmt.Errorf("impl: no implementations registered for package %q", pkg)
	}
	return e, nil
}

// List returns the names of pkg's implementations, whether they run here
// or not (nil for an unknown package).
func List(pkg string) []string {
	mu.Lock()
	defer mu.Unlock()
	if e := pkgs[pkg]; e != nil {
		return append([]string(nil), e.names...)
	}
	return nil
}

// Available reports whether pkg's implementation name runs on this machine.
func Available(pkg, name string) bool {
	mu.Lock()
	defer mu.Unlock()
	e := pkgs[pkg]
	if e == nil {
		return false
	}
	for i, n := range e.names {
		if n == name {
			return e.available[i]
		}
	}
	return false
}

// Select forces every later call into pkg to use the implementation name.
// It fails, changing nothing, if the name is unknown or cannot run here.
func Select(pkg, name string) error {
	mu.Lock()
	defer mu.Unlock()
	e, err := lookup(pkg)
	if err != nil {
		return err
	}
	for i, n := range e.names {
		if n != name {
			continue
		}
		if !e.available[i] {
			return fmt.Errorf("impl: %s implementation %s does not run on this CPU", pkg, name)
		}
		e.force(i)
		return nil
	}
	return fmt.Errorf("impl: unknown %s implementation %q (known: %s)", pkg, name, strings.Join(e.names, ", "))
}

// Reset undoes Select for pkg: calls go back to its automatic dispatch.
func Reset(pkg string) {
	mu.Lock()
	defer mu.Unlock()
	if e := pkgs[pkg]; e != nil {
		e.force(-1)
	}
}
