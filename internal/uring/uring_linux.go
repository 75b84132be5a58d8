// Package uring is the small part of Linux io_uring that xtsctl's FUSE
// server needs: one ring with 128-byte submission entries (FUSE's
// io_uring commands carry their arguments in the second half), used by a
// single thread that submits and reaps in one system call.
//
// It is not a general io_uring library: no SQPOLL, no registered buffers,
// no linked requests. A Ring must only be used by the OS thread that
// created it (runtime.LockOSThread), because it is set up with
// IORING_SETUP_SINGLE_ISSUER and IORING_SETUP_DEFER_TASKRUN: completions
// are then produced only while that thread waits in Enter, instead of
// interrupting it at arbitrary points.
package uring

import (
	"errors"
	"fmt"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Setup flags and features (include/uapi/linux/io_uring.h).
const (
	setupSQE128       = 1 << 10
	setupSingleIssuer = 1 << 12
	setupDeferTaskrun = 1 << 13
	featSingleMmap    = 1 << 0
	enterGetEvents    = 1 << 0

	offSQRing = 0
	offCQRing = 0x8000000
	offSQEs   = 0x10000000
)

// Opcodes used by xtsctl.
const (
	OpNop      = 0
	OpRead     = 22
	OpWrite    = 23
	OpURingCmd = 46
)

// sqeSize is the size of one submission entry of a Ring (IORING_SETUP_SQE128).
const sqeSize = 128

// An SQE is one 128-byte submission entry. The fields are those of struct
// io_uring_sqe; Cmd is the command area of IORING_OP_URING_CMD.
type SQE struct {
	Opcode      uint8
	Flags       uint8
	IOPrio      uint16
	Fd          int32
	Off         uint64 // file offset; for URING_CMD, the low 32 bits are cmd_op
	Addr        uint64
	Len         uint32
	OpFlags     uint32
	UserData    uint64
	BufIndex    uint16
	Personality uint16
	SpliceFdIn  int32
	Cmd         [80]byte
}

// A CQE is one completion: the UserData of its SQE and the result (a
// byte count, or a negative errno).
type CQE struct {
	UserData uint64
	Res      int32
	Flags    uint32
}

type params struct {
	sqEntries, cqEntries, flags, sqThreadCPU, sqThreadIdle, features, wqFd uint32
	resv                                                                   [3]uint32
	sqOff                                                                  struct {
		head, tail, ringMask, ringEntries, flags, dropped, array, resv1 uint32
		userAddr                                                        uint64
	}
	cqOff struct {
		head, tail, ringMask, ringEntries, overflow, cqes, flags, resv1 uint32
		userAddr                                                        uint64
	}
}

// A Ring is one io_uring instance.
type Ring struct {
	fd             int
	sqRing, cqRing []byte
	sqes           []byte

	sqHead, sqTail *uint32
	sqMask         uint32
	sqEntries      uint32
	cqHead, cqTail *uint32
	cqMask         uint32
	cqes           unsafe.Pointer

	sqLocalTail uint32 // entries prepared, not yet published
	pending     uint32 // published, not yet submitted
}

// ErrUnsupported is returned by New when the kernel has no io_uring, or
// not the features a Ring needs (Linux 6.1 or later).
var ErrUnsupported = errors.New("io_uring with 128-byte entries and deferred task running is not available")

// New sets up a ring of at least entries submission entries (a power of
// two up to 32768) and twice as many completion entries.
func New(entries uint32) (*Ring, error) {
	var p params
	p.flags = setupSQE128 | setupSingleIssuer | setupDeferTaskrun
	fd, _, errno := unix.Syscall(unix.SYS_IO_URING_SETUP, uintptr(entries), uintptr(unsafe.Pointer(&p)), 0)
	if errno != 0 {
		if errno == unix.ENOSYS || errno == unix.EINVAL || errno == unix.EPERM {
			return nil, fmt.Errorf("%w: %v", ErrUnsupported, errno)
		}
		return nil, fmt.Errorf("io_uring_setup: %w", errno)
	}
	r := &Ring{fd: int(fd)}
	if p.features&featSingleMmap == 0 {
		r.Close()
		return nil, fmt.Errorf("%w: no single mmap", ErrUnsupported)
	}
	sqSize := int(p.sqOff.array + p.sqEntries*4)
	cqSize := int(p.cqOff.cqes + p.cqEntries*uint32(unsafe.Sizeof(CQE{})))
	size := max(sqSize, cqSize)
	ring, err := unix.Mmap(r.fd, offSQRing, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE)
	if err != nil {
		r.Close()
		return nil, fmt.Errorf("mmap io_uring: %w", err)
	}
	r.sqRing, r.cqRing = ring, ring
	r.sqes, err = unix.Mmap(r.fd, offSQEs, int(p.sqEntries)*sqeSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE)
	if err != nil {
		r.Close()
		return nil, fmt.Errorf("mmap io_uring entries: %w", err)
	}
	at := func(off uint32) *uint32 { return (*uint32)(unsafe.Pointer(&ring[off])) }
	r.sqHead, r.sqTail = at(p.sqOff.head), at(p.sqOff.tail)
	r.sqMask, r.sqEntries = *at(p.sqOff.ringMask), *at(p.sqOff.ringEntries)
	r.cqHead, r.cqTail = at(p.cqOff.head), at(p.cqOff.tail)
	r.cqMask = *at(p.cqOff.ringMask)
	r.cqes = unsafe.Pointer(&ring[p.cqOff.cqes])
	// The submission array maps ring slots to entries one to one.
	array := unsafe.Slice((*uint32)(unsafe.Pointer(&ring[p.sqOff.array])), p.sqEntries)
	for i := range array {
		array[i] = uint32(i)
	}
	r.sqLocalTail = atomic.LoadUint32(r.sqTail)
	return r, nil
}

// Close unmaps and closes the ring; the kernel cancels what is in flight.
func (r *Ring) Close() error {
	if r.sqes != nil {
		unix.Munmap(r.sqes)
		r.sqes = nil
	}
	if r.sqRing != nil {
		unix.Munmap(r.sqRing)
		r.sqRing, r.cqRing = nil, nil
	}
	if r.fd >= 0 {
		err := unix.Close(r.fd)
		r.fd = -1
		return err
	}
	return nil
}

// NextSQE returns a zeroed entry to fill in, or nil when the submission
// queue is full (Submit, then try again).
func (r *Ring) NextSQE() *SQE {
	head := atomic.LoadUint32(r.sqHead)
	if r.sqLocalTail-head >= r.sqEntries {
		return nil
	}
	sqe := (*SQE)(unsafe.Pointer(&r.sqes[int(r.sqLocalTail&r.sqMask)*sqeSize]))
	*sqe = SQE{}
	r.sqLocalTail++
	r.pending++
	return sqe
}

// Enter publishes the prepared entries, submits them, and waits until at
// least waitFor completions are ready (0: do not wait). It returns the
// number of entries the kernel consumed.
func (r *Ring) Enter(waitFor uint32) (int, error) {
	atomic.StoreUint32(r.sqTail, r.sqLocalTail)
	flags := uintptr(0)
	if waitFor > 0 {
		flags = enterGetEvents
	}
	for {
		n, _, errno := unix.Syscall6(unix.SYS_IO_URING_ENTER, uintptr(r.fd), uintptr(r.pending), uintptr(waitFor), flags, 0, 0)
		if errno == unix.EINTR {
			continue
		}
		if errno != 0 {
			return 0, fmt.Errorf("io_uring_enter: %w", errno)
		}
		r.pending -= uint32(n)
		return int(n), nil
	}
}

// Completions calls f for every completion ready, in order, and then
// frees their slots.
func (r *Ring) Completions(f func(CQE)) int {
	head := atomic.LoadUint32(r.cqHead)
	tail := atomic.LoadUint32(r.cqTail)
	n := 0
	for ; head != tail; head++ {
		c := *(*CQE)(unsafe.Add(r.cqes, uintptr(head&r.cqMask)*unsafe.Sizeof(CQE{})))
		f(c)
		n++
	}
	atomic.StoreUint32(r.cqHead, head)
	return n
}
