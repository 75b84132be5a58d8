//go:build linux

package fusefile

import "github.com/hanwen/go-fuse/v2/fs"

// The go-fuse interfaces each node implements; a changed signature fails
// the build here instead of silently dropping an operation.
var (
	_ fs.NodeOnAdder   = (*rootNode)(nil)
	_ fs.NodeGetattrer = (*rootNode)(nil)
	_ fs.NodeGetattrer = (*fileNode)(nil)
	_ fs.NodeOpener    = (*fileNode)(nil)
	_ fs.NodeReader    = (*fileNode)(nil)
	_ fs.NodeWriter    = (*fileNode)(nil)
	_ fs.NodeFsyncer   = (*fileNode)(nil)
	_ fs.NodeFlusher   = (*fileNode)(nil)
	_ fs.NodeSetattrer = (*fileNode)(nil)
	_ fs.InodeEmbedder = (*fileNode)(nil)
	_ fs.InodeEmbedder = (*rootNode)(nil)
)
