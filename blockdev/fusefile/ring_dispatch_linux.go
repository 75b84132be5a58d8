//go:build linux

package fusefile

// The requests a FUSE queue thread does not serve itself go to go-fuse's
// file system bridge, the same code that answers them on /dev/fuse; this
// file unpacks them from a ring entry and packs the answers back.

import (
	"strings"
	"syscall"
	"unsafe"

	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"
)

// FUSE opcodes the ring answers itself or passes to go-fuse.
const (
	opLookup     = 1
	opGetattr    = 3
	opSetattr    = 4
	opSymlink    = 6
	opMknod      = 8
	opMkdir      = 9
	opUnlink     = 10
	opRmdir      = 11
	opRename     = 12
	opLink       = 13
	opOpen       = 14
	opRead       = 15
	opWrite      = 16
	opStatfs     = 17
	opRelease    = 18
	opFsync      = 20
	opFlush      = 25
	opOpendir    = 27
	opReaddir    = 28
	opReleasedir = 29
	opFsyncdir   = 30
	opAccess     = 34
	opCreate     = 35
	opDestroy    = 38
	opFallocate  = 43
	opRename2    = 45
	opTmpfile    = 51
)

// load copies the request's in header and opcode header into *dst, a
// go-fuse input struct (which starts with InHeader).
func (e *ringEnt) load(dst unsafe.Pointer, size uintptr) {
	b := unsafe.Slice((*byte)(dst), size)
	copy(b, e.hdr[ringHdrInOut:ringHdrInOut+inHeaderSize])
	if size > inHeaderSize {
		copy(b[inHeaderSize:], e.hdr[ringHdrOpIn:ringHdrEntInOut])
	}
}

// out stores a go-fuse output struct as the reply's payload.
func out[T any](e *ringEnt, v *T) int {
	n := int(unsafe.Sizeof(*v))
	copy(e.payload, unsafe.Slice((*byte)(unsafe.Pointer(v)), n))
	return n
}

// slow answers a request through go-fuse's file system bridge, on its own
// goroutine, then queues the entry for its thread to commit.
func (q *ringQueue) slow(e *ringEnt) {
	defer q.slowWG.Done()
	q.srv.order.Add(1)
	errno, n := q.dispatch(e)
	q.srv.order.Add(1)
	e.reply(errno, n)
	q.finish(e)
}

// finish hands an entry whose reply is ready, from another goroutine, to
// the queue thread to commit.
func (q *ringQueue) finish(e *ringEnt) {
	q.mu.Lock()
	q.finished = append(q.finished, e)
	q.mu.Unlock()
	var one [8]byte
	one[0] = 1
	for {
		if _, err := unix.Write(q.evfd, one[:]); err != unix.EINTR {
			break
		}
	}
}

func (q *ringQueue) dispatch(e *ringEnt) (syscall.Errno, int) {
	raw := q.srv.raw
	var hdr fuse.InHeader
	e.load(unsafe.Pointer(&hdr), unsafe.Sizeof(hdr))
	payload := e.payload[:min(e.payloadLen(), len(e.payload))]
	switch e.opcode() {
	case opLookup:
		name, _, _ := strings.Cut(string(payload), "\x00")
		var o fuse.EntryOut
		if st := raw.Lookup(nil, &hdr, name, &o); !st.Ok() {
			return syscall.Errno(st), 0
		}
		return 0, out(e, &o)
	case opGetattr:
		var in fuse.GetAttrIn
		e.load(unsafe.Pointer(&in), unsafe.Sizeof(in))
		var o fuse.AttrOut
		if st := raw.GetAttr(nil, &in, &o); !st.Ok() {
			return syscall.Errno(st), 0
		}
		return 0, out(e, &o)
	case opSetattr:
		var in fuse.SetAttrIn
		e.load(unsafe.Pointer(&in), unsafe.Sizeof(in))
		var o fuse.AttrOut
		if st := raw.SetAttr(nil, &in, &o); !st.Ok() {
			return syscall.Errno(st), 0
		}
		return 0, out(e, &o)
	case opOpen, opOpendir:
		var in fuse.OpenIn
		e.load(unsafe.Pointer(&in), unsafe.Sizeof(in))
		var o fuse.OpenOut
		open := raw.Open
		if e.opcode() == opOpendir {
			open = raw.OpenDir
		}
		if st := open(nil, &in, &o); !st.Ok() {
			return syscall.Errno(st), 0
		}
		return 0, out(e, &o)
	case opRead:
		var in fuse.ReadIn
		e.load(unsafe.Pointer(&in), unsafe.Sizeof(in))
		buf := e.payload[:min(int(in.Size), len(e.payload))]
		res, st := raw.Read(nil, &in, buf)
		if !st.Ok() {
			return syscall.Errno(st), 0
		}
		data, st := res.Bytes(buf)
		n := copy(buf, data)
		res.Done()
		if !st.Ok() {
			return syscall.Errno(st), 0
		}
		return 0, n
	case opWrite:
		var in fuse.WriteIn
		e.load(unsafe.Pointer(&in), unsafe.Sizeof(in))
		n, st := raw.Write(nil, &in, payload[:min(int(in.Size), len(payload))])
		if !st.Ok() {
			return syscall.Errno(st), 0
		}
		return 0, out(e, &fuse.WriteOut{Size: n})
	case opStatfs:
		var o fuse.StatfsOut
		if st := raw.StatFs(nil, &hdr, &o); !st.Ok() {
			return syscall.Errno(st), 0
		}
		return 0, out(e, &o)
	case opRelease, opReleasedir:
		var in fuse.ReleaseIn
		e.load(unsafe.Pointer(&in), unsafe.Sizeof(in))
		if e.opcode() == opRelease {
			raw.Release(nil, &in)
		} else {
			raw.ReleaseDir(&in)
		}
		return 0, 0
	case opFsync, opFsyncdir:
		var in fuse.FsyncIn
		e.load(unsafe.Pointer(&in), unsafe.Sizeof(in))
		fsync := raw.Fsync
		if e.opcode() == opFsyncdir {
			fsync = raw.FsyncDir
		}
		return syscall.Errno(fsync(nil, &in)), 0
	case opFlush:
		var in fuse.FlushIn
		e.load(unsafe.Pointer(&in), unsafe.Sizeof(in))
		return syscall.Errno(raw.Flush(nil, &in)), 0
	case opReaddir:
		var in fuse.ReadIn
		e.load(unsafe.Pointer(&in), unsafe.Sizeof(in))
		l := fuse.NewDirEntryList(e.payload[:min(int(in.Size), len(e.payload))], in.Offset)
		if st := raw.ReadDir(nil, &in, l); !st.Ok() {
			return syscall.Errno(st), 0
		}
		return 0, len(l.Bytes())
	case opAccess:
		var in fuse.AccessIn
		e.load(unsafe.Pointer(&in), unsafe.Sizeof(in))
		return syscall.Errno(raw.Access(nil, &in)), 0
	case opFallocate:
		var in fuse.FallocateIn
		e.load(unsafe.Pointer(&in), unsafe.Sizeof(in))
		return syscall.Errno(raw.Fallocate(nil, &in)), 0
	case opDestroy:
		return 0, 0
	case opSymlink, opMknod, opMkdir, opUnlink, opRmdir, opRename, opLink, opCreate, opRename2, opTmpfile:
		return syscall.EPERM, 0 // one file, and it stays
	}
	return syscall.ENOSYS, 0
}
