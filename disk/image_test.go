package disk_test

import (
	"errors"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"

	"github.com/xtsctl/xtsctl/disk"
)

// TestOpenImageErrors: each unusable path is named with its role and
// refused as wrong input before anything is opened.
func TestOpenImageErrors(t *testing.T) {
	dir := t.TempDir()
	img := writeFile(t, make([]byte, 1<<20))
	missing := filepath.Join(dir, "missing")
	for _, c := range []struct {
		path, header string
		access       disk.Access
		want         string
		is           error
	}{
		{missing, "", disk.Inspect, "image " + missing + " does not exist", fs.ErrNotExist},
		{dir, "", disk.Inspect, "image " + dir + " is a directory", nil},
		{"/dev/null", "", disk.Read, "image /dev/null", nil},
		{img, missing, disk.Read, "header file " + missing + " does not exist", fs.ErrNotExist},
		{img, dir, disk.WriteHeader, "header file " + dir + " is a directory", nil},
	} {
		im, err := disk.OpenImage(c.path, disk.ImageOptions{Access: c.access, HeaderPath: c.header})
		if err == nil {
			im.Close()
			t.Errorf("%s (header %q): opened", c.path, c.header)
			continue
		}
		if !strings.HasPrefix(err.Error(), c.want) || disk.KindOf(err) != disk.KindInput || c.is != nil && !errors.Is(err, c.is) {
			t.Errorf("%s (header %q): %v (kind %v), want %q, wrong input", c.path, c.header, err, disk.KindOf(err), c.want)
		}
	}
}

// TestOpenImageLocks: Read shares the image with readers, WriteHeader
// and Write want it alone, Inspect takes no lock.
func TestOpenImageLocks(t *testing.T) {
	img := writeFile(t, make([]byte, 1<<20))
	open := func(a disk.Access) (*disk.Image, error) {
		return disk.OpenImage(img, disk.ImageOptions{Access: a})
	}
	inUse := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, disk.ErrInUse) || disk.KindOf(err) != disk.KindDevice || !strings.Contains(err.Error(), "image "+img+" is in use") {
			t.Errorf("%s: %v, want in use", what, err)
		}
	}
	r, err := open(disk.Read)
	if err != nil {
		t.Fatal(err)
	}
	r2, err := open(disk.Read)
	if err != nil {
		t.Fatalf("Read beside a reader: %v", err)
	}
	r2.Close()
	_, err = open(disk.WriteHeader)
	inUse("WriteHeader beside a reader", err)
	_, err = open(disk.Write)
	inUse("Write beside a reader", err)
	r.Close()

	w, err := open(disk.WriteHeader)
	if err != nil {
		t.Fatal(err)
	}
	if !w.Writable {
		t.Error("WriteHeader: not writable")
	}
	_, err = open(disk.Read)
	inUse("Read beside a writer", err)
	i, err := open(disk.Inspect)
	if err != nil {
		t.Fatalf("Inspect beside a writer: %v", err)
	}
	i.Close()
	w.Close()
}

// TestOpenImageDetached: a detached header is opened and locked like the
// image; WriteHeader neither opens nor locks the data device.
func TestOpenImageDetached(t *testing.T) {
	data := writeFile(t, make([]byte, 2<<20))
	hdr := writeFile(t, make([]byte, 1<<20))
	held, err := disk.OpenImage(data, disk.ImageOptions{Access: disk.WriteHeader})
	if err != nil {
		t.Fatal(err)
	}
	w, err := disk.OpenImage(data, disk.ImageOptions{Access: disk.WriteHeader, HeaderPath: hdr})
	if err != nil {
		t.Fatalf("WriteHeader of a detached header with the data device held: %v", err)
	}
	if w.File != nil || w.HeaderFile == nil || w.HeaderSize != 1<<20 {
		t.Errorf("WriteHeader, detached: data %v, header %v (%d bytes)", w.File, w.HeaderFile, w.HeaderSize)
	}
	_, err = disk.OpenImage(data, disk.ImageOptions{Access: disk.Read, HeaderPath: hdr})
	if !errors.Is(err, disk.ErrInUse) || !strings.Contains(err.Error(), "image "+data) {
		t.Errorf("Read of a data device held for writing: %v", err)
	}
	held.Close()
	_, err = disk.OpenImage(data, disk.ImageOptions{Access: disk.Read, HeaderPath: hdr})
	if !errors.Is(err, disk.ErrInUse) || !strings.Contains(err.Error(), "header file "+hdr) {
		t.Errorf("Read of a detached header being written: %v", err)
	}
	w.Close()
	r, err := disk.OpenImage(data, disk.ImageOptions{Access: disk.Read, HeaderPath: hdr})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if r.Size != 2<<20 || r.HeaderSize != 1<<20 || r.HeaderPath != hdr {
		t.Errorf("Read, detached: data %d bytes, header %d bytes at %q", r.Size, r.HeaderSize, r.HeaderPath)
	}
}
