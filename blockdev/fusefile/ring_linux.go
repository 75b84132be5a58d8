//go:build linux

package fusefile

// FUSE over io_uring (Linux 6.14 and later, with the fuse module's
// enable_uring parameter set): the kernel hands requests to per-CPU queues
// of pre-registered buffers and takes replies through the same ring,
// instead of one read(2) and one write(2) on /dev/fuse per request.
//
// Why it matters here: on /dev/fuse every 4 KiB read costs the server a
// wakeup of a reader thread, a blocking pread of the image and the reply,
// about six context switches per I/O in all (BENCHMARKS.md). A queue
// thread here instead submits the image read through the same ring and
// goes on with the next request; one io_uring_enter then reaps several
// FUSE requests and image completions and submits several replies and
// reads, so switches and device notifications are shared by many I/Os.
//
// Layout of the work: one thread per online CPU, pinned to it, owning one
// ring. It registers ringEntries buffers for its CPU's FUSE queue (and one
// for each possible CPU that is offline, so that the kernel sees every
// queue populated). Reads of whole sectors go the fast way: image read(s)
// through the ring, then verification and decryption in place in the
// request's payload buffer (on the queue thread up to 16 KiB, on a
// goroutine beyond, so that large reads do not hold up small ones), then
// the reply. Everything else (writes, fsync, lookups) runs on a goroutine
// through go-fuse's own file system bridge, exactly as on /dev/fuse, and
// comes back to the thread through an eventfd to be replied.

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"github.com/hanwen/go-fuse/v2/fuse"
	"github.com/xtsctl/xtsctl/internal/uring"
	"golang.org/x/sys/unix"
)

// Kernel ABI (include/uapi/linux/fuse.h).
const (
	fuseOverIOURing = 1 << 41 // FUSE_OVER_IO_URING in the INIT flags

	ringCmdRegister = 1 // FUSE_IO_URING_CMD_REGISTER
	ringCmdCommit   = 2 // FUSE_IO_URING_CMD_COMMIT_AND_FETCH

	// struct fuse_uring_req_header: in_out[128] (fuse_in_header on the
	// way in, fuse_out_header on the way out), op_in[128] (the opcode's
	// own header), then struct fuse_uring_ent_in_out.
	ringHdrInOut    = 0
	ringHdrOpIn     = 128
	ringHdrEntInOut = 256
	ringHdrSize     = 256 + 32

	inHeaderSize  = 40
	outHeaderSize = 16
)

// ringEntries is the number of request buffers per online CPU, and
// ringEntriesTotal the most for all CPUs together: the loop device keeps
// up to its queue depth of requests in flight, spread over the CPUs that
// submit them, and each buffer takes MaxRequest bytes.
const (
	ringEntries      = 16
	ringEntriesTotal = 64
)

// userData tags a submission: what completed, and for which entry.
const (
	kindRequest = iota // an entry's FUSE command: a request arrived, or the queue stopped
	kindData           // an image read of an entry's fast read
	kindTag            // the tag read of an entry's fast read
	kindWake           // the eventfd: slow requests finished
	kindShift   = 56
)

func userData(kind, ent int) uint64 { return uint64(kind)<<kindShift | uint64(ent) }

// RingAvailable reports whether FUSE over io_uring can be used here: the
// fuse module has the enable_uring parameter and it is set, and this
// process may set up an io_uring (kernel.io_uring_disabled, seccomp).
func RingAvailable() bool {
	b, err := os.ReadFile("/sys/module/fuse/parameters/enable_uring")
	if err != nil || strings.TrimSpace(string(b)) != "Y" {
		return false
	}
	r, err := uring.New(1)
	if err != nil {
		return false
	}
	r.Close()
	return true
}

// ringServer is the io_uring side of one FUSE connection.
type ringServer struct {
	fuseFd int
	raw    fuse.RawFileSystem
	dev    *Disk
	reader DirectReader // nil: every read takes the slow way
	queues []*ringQueue
	wg     sync.WaitGroup
	logf   func(string, ...any)
	// order is touched before and after every request handed to go-fuse.
	// The kernel already orders requests (RELEASEDIR comes after the
	// READDIR reply it follows), but through queue threads that never
	// meet; go-fuse's bridge relies on that order for its per-handle
	// state, and this makes it one Go's memory model (and the race
	// detector) sees.
	order atomic.Uint64
}

type ringQueue struct {
	srv  *ringServer
	cpu  int // pinned to it; -1: not pinned
	ring *uring.Ring
	ents []*ringEnt
	evfd int
	evb  [8]byte

	start chan bool // true: register and serve; false: give up

	mu       sync.Mutex
	finished []*ringEnt // slow requests answered, to commit
	slowWG   sync.WaitGroup

	fastReads atomic.Uint64 // reads served without leaving the thread's ring

	live     int // entries whose command is registered with the kernel
	inflight int // image reads not completed
	failed   error
}

// ringEnt is one request buffer and the state of the request in it.
type ringEnt struct {
	idx     int
	qid     uint16
	hdr     []byte
	payload []byte
	iov     [2]unix.Iovec

	// A fast read in progress.
	parts  int   // image reads outstanding
	ioErr  error // the first of them to fail
	first  uint64
	size   int
	tags   []byte
	unlock func()
	fell   bool // to be redone the slow way (EINVAL from O_DIRECT, or short)

	registering bool
	retries     int
}

func (e *ringEnt) unique() uint64 { return binary.LittleEndian.Uint64(e.hdr[8:16]) }
func (e *ringEnt) opcode() uint32 { return binary.LittleEndian.Uint32(e.hdr[4:8]) }
func (e *ringEnt) payloadLen() int {
	return int(binary.LittleEndian.Uint32(e.hdr[ringHdrEntInOut+16:]))
}

// possibleCPUs is the kernel's queue count for FUSE over io_uring,
// num_possible_cpus(): the CPUs listed in /sys/devices/system/cpu/possible.
func possibleCPUs() (int, error) {
	b, err := os.ReadFile("/sys/devices/system/cpu/possible")
	if err != nil {
		return 0, err
	}
	n := 0
	for _, r := range strings.Split(strings.TrimSpace(string(b)), ",") {
		lo, hi, isRange := strings.Cut(r, "-")
		a, err := strconv.Atoi(lo)
		z := a
		if err == nil && isRange {
			z, err = strconv.Atoi(hi)
		}
		if err != nil || z < a {
			return 0, fmt.Errorf("cannot parse possible CPUs %q", b)
		}
		n += z - a + 1
	}
	return n, nil
}

// newRingServer starts one queue thread per CPU this process may run on,
// each with its ring created, and waits until they are ready. Nothing is
// registered with FUSE yet: that waits for register, after INIT.
func newRingServer(dev *Disk, logf func(string, ...any)) (*ringServer, error) {
	nq, err := possibleCPUs()
	if err != nil {
		return nil, err
	}
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		return nil, err
	}
	s := &ringServer{dev: dev, logf: logf}
	s.reader, _ = dev.store.(DirectReader)
	// Queue threads for the CPUs we can use; the queues of the others
	// each get one entry, served by the first thread.
	var cpus []int
	for c := range nq {
		if set.IsSet(c) {
			cpus = append(cpus, c)
		}
	}
	if len(cpus) == 0 {
		return nil, errors.New("no usable CPU for FUSE queues")
	}
	for _, c := range cpus {
		s.queues = append(s.queues, &ringQueue{srv: s, cpu: c, evfd: -1, start: make(chan bool, 1)})
	}
	for c := range nq {
		if !set.IsSet(c) {
			s.queues[0].addEntries(c, 1)
		}
	}
	// Buffers are a MiB each: fewer per queue on machines with many CPUs.
	perQueue := max(2, min(ringEntries, ringEntriesTotal/len(s.queues)))
	for _, q := range s.queues {
		q.addEntries(q.cpu, perQueue)
	}
	ready := make(chan error, len(s.queues))
	for _, q := range s.queues {
		go q.setup(ready)
	}
	for range s.queues {
		if e := <-ready; e != nil && err == nil {
			err = e
		}
	}
	if err != nil {
		s.abort()
		return nil, err
	}
	return s, nil
}

func (q *ringQueue) addEntries(qid, n int) {
	for range n {
		e := &ringEnt{idx: len(q.ents), qid: uint16(qid)}
		e.hdr = make([]byte, ringHdrSize)
		e.payload = AlignedBuffer(MaxRequest)
		e.iov[0] = unix.Iovec{Base: &e.hdr[0]}
		e.iov[0].SetLen(len(e.hdr))
		e.iov[1] = unix.Iovec{Base: &e.payload[0]}
		e.iov[1].SetLen(len(e.payload))
		q.ents = append(q.ents, e)
	}
}

// setup runs on the queue's own thread for its whole life: it creates the
// ring (the ring then belongs to this thread), reports, and waits for
// register or abort.
func (q *ringQueue) setup(ready chan<- error) {
	runtime.LockOSThread() // for good: the ring is bound to this thread
	if q.cpu >= 0 {
		var set unix.CPUSet
		set.Set(q.cpu)
		_ = unix.SchedSetaffinity(0, &set) // placement only; not fatal
	}
	n := uint32(8)
	for n < uint32(2*len(q.ents)+2) {
		n *= 2
	}
	r, err := uring.New(n)
	if err == nil {
		q.evfd, err = unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
		if err != nil {
			r.Close()
		}
	}
	if err != nil {
		ready <- err
		return
	}
	q.ring = r
	ready <- nil
	if !<-q.start {
		q.close()
		return
	}
	q.serve()
}

// register hands the queues the FUSE device and file system and lets them
// register their entries; serving starts at once.
func (s *ringServer) register(fuseFd int, raw fuse.RawFileSystem) {
	s.fuseFd, s.raw = fuseFd, raw
	for _, q := range s.queues {
		s.wg.Add(1)
		q.start <- true
	}
}

// abort stops queue threads that were never registered.
func (s *ringServer) abort() {
	for _, q := range s.queues {
		q.start <- false // buffered: queues that failed setup never read it
	}
}

// wait returns once every queue thread has ended (the FUSE connection is
// gone), with the first error a queue met.
func (s *ringServer) wait() error {
	s.wg.Wait()
	unix.Close(s.fuseFd)
	for _, q := range s.queues {
		if q.failed != nil {
			return q.failed
		}
	}
	return nil
}

func (q *ringQueue) close() {
	if q.ring != nil {
		q.ring.Close()
	}
	if q.evfd >= 0 {
		unix.Close(q.evfd)
	}
}

func (q *ringQueue) sqe() *uring.SQE {
	for {
		if s := q.ring.NextSQE(); s != nil {
			return s
		}
		q.enter(0)
	}
}

// enter submits and waits for waitFor completions. It cannot fail
// quietly: a queue thread that stopped would leave the kernel waiting for
// replies forever and every reader of the device hanging, where ending the
// process aborts the FUSE connection (readers get errors, the volume is
// recovered at the next open).
func (q *ringQueue) enter(waitFor uint32) {
	for {
		_, err := q.ring.Enter(waitFor)
		if err == nil {
			return
		}
		if errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EBUSY) {
			// Short of kernel memory, or completions to reap first.
			q.ring.Completions(q.complete)
			time.Sleep(time.Millisecond)
			continue
		}
		panic(fmt.Sprintf("serve: FUSE io_uring queue on CPU %d: %v", q.cpu, err))
	}
}

func (q *ringQueue) fail(err error) {
	if q.failed == nil {
		q.failed = err
		q.srv.logf("FUSE io_uring queue on CPU %d: %v", q.cpu, err)
	}
}

// fuseCmd prepares an entry's FUSE command: register, or commit the reply
// in it and fetch the next request.
func (q *ringQueue) fuseCmd(e *ringEnt, op uint32, commitID uint64) {
	s := q.sqe()
	s.Opcode = uring.OpURingCmd
	s.Fd = int32(q.srv.fuseFd)
	s.Off = uint64(op) // cmd_op
	s.Addr = uint64(uintptr(unsafe.Pointer(&e.iov[0])))
	s.Len = 2
	s.UserData = userData(kindRequest, e.idx)
	// struct fuse_uring_cmd_req: flags, commit_id, qid.
	binary.LittleEndian.PutUint64(s.Cmd[8:], commitID)
	binary.LittleEndian.PutUint16(s.Cmd[16:], e.qid)
}

func (q *ringQueue) armWake() {
	s := q.sqe()
	s.Opcode = uring.OpRead
	s.Fd = int32(q.evfd)
	s.Addr = uint64(uintptr(unsafe.Pointer(&q.evb[0])))
	s.Len = 8
	s.UserData = userData(kindWake, 0)
	q.inflight++
}

func (q *ringQueue) serve() {
	defer q.srv.wg.Done()
	defer q.close()
	for _, e := range q.ents {
		e.registering = true
		q.fuseCmd(e, ringCmdRegister, 0)
		q.live++
	}
	q.armWake()
	for q.live > 0 {
		q.enter(1)
		q.ring.Completions(q.complete)
	}
	// The connection is gone. Image reads still in flight target our
	// buffers, and slow requests still running will write to the
	// eventfd: wait for both before the ring and the eventfd close.
	for q.inflight > 1 { // the eventfd read itself stays pending
		q.enter(1)
		q.ring.Completions(q.complete)
	}
	q.slowWG.Wait()
}

func (q *ringQueue) complete(c uring.CQE) {
	kind := int(c.UserData >> kindShift)
	idx := int(c.UserData & (1<<kindShift - 1))
	switch kind {
	case kindRequest:
		e := q.ents[idx]
		if c.Res == -int32(unix.EAGAIN) && e.registering && e.retries < 200 {
			// The kernel finishes INIT processing a moment after
			// our reply to it; registering before that is refused.
			e.retries++
			time.Sleep(5 * time.Millisecond)
			q.fuseCmd(e, ringCmdRegister, 0)
			return
		}
		e.registering = false
		if c.Res < 0 {
			// ENOTCONN/ECANCELED: the queue stopped (unmount);
			// anything else is a protocol error, which also ends
			// this entry.
			if c.Res != -int32(unix.ENOTCONN) && c.Res != -int32(unix.ECANCELED) {
				q.fail(fmt.Errorf("FUSE command: %w", syscall.Errno(-c.Res)))
			}
			q.live--
			return
		}
		q.request(e)
	case kindData, kindTag:
		q.inflight--
		e := q.ents[idx]
		want := e.size
		if kind == kindTag {
			want = len(e.tags)
		}
		switch {
		case c.Res == -int32(unix.EINVAL) && kind == kindData, c.Res >= 0 && int(c.Res) < want:
			// O_DIRECT refused (alignment), or a short read: the
			// slow way reads through the page cache, to the end or
			// to a real error.
			e.fell = true
		case c.Res < 0:
			e.ioErr = cmpErr(e.ioErr, fmt.Errorf("read image: %w", syscall.Errno(-c.Res)))
		}
		if e.parts--; e.parts == 0 {
			q.finishRead(e)
		}
	case kindWake:
		q.inflight--
		q.mu.Lock()
		done := q.finished
		q.finished = nil
		q.mu.Unlock()
		for _, e := range done {
			q.fuseCmd(e, ringCmdCommit, e.unique())
		}
		q.armWake()
	}
}

func cmpErr(old, err error) error {
	if old != nil {
		return old
	}
	return err
}

// reply writes the out header and the payload size for a commit.
func (e *ringEnt) reply(errno syscall.Errno, n int) {
	h := e.hdr[ringHdrInOut:]
	unique := e.unique()
	binary.LittleEndian.PutUint32(h[0:], uint32(outHeaderSize+n))
	binary.LittleEndian.PutUint32(h[4:], uint32(-int32(errno)))
	binary.LittleEndian.PutUint64(h[8:], unique)
	binary.LittleEndian.PutUint32(e.hdr[ringHdrEntInOut+16:], uint32(n))
}

func (q *ringQueue) request(e *ringEnt) {
	if e.opcode() == opRead && q.srv.reader != nil && q.startRead(e) {
		return
	}
	q.goSlow(e)
}

func (q *ringQueue) goSlow(e *ringEnt) {
	q.slowWG.Add(1)
	go q.slow(e)
}

// startRead begins a fast read; false sends the request the slow way.
func (q *ringQueue) startRead(e *ringEnt) bool {
	var in fuse.ReadIn
	e.load(unsafe.Pointer(&in), unsafe.Sizeof(in))
	d := q.srv.dev
	off, size := int64(in.Offset), int64(in.Size)
	if off >= d.size {
		e.reply(0, 0)
		q.fuseCmd(e, ringCmdCommit, e.unique())
		return true
	}
	size = min(size, d.size-off, int64(len(e.payload)))
	ss := d.sectorSize
	if off%ss != 0 || size%ss != 0 || size == 0 {
		return false
	}
	unlock, ok := d.tryLockRange(off, size, false)
	if !ok {
		return false // a write holds part of it: wait for it the slow way
	}
	first, n := uint64(off/ss), int(size/ss)
	fd, pos, tagFd, tagOff, tagLen := q.srv.reader.ReadPlan(first, n)
	if fd < 0 {
		unlock()
		return false // the store reads this one itself
	}
	d.Counters.reads.Add(1)
	q.fastReads.Add(1)
	e.first, e.size, e.unlock, e.ioErr, e.fell = first, int(size), unlock, nil, false
	e.parts = 1
	s := q.sqe()
	s.Opcode = uring.OpRead
	s.Fd = int32(fd)
	s.Off = uint64(pos)
	s.Addr = uint64(uintptr(unsafe.Pointer(&e.payload[0])))
	s.Len = uint32(size)
	s.UserData = userData(kindData, e.idx)
	q.inflight++
	if tagLen > 0 {
		if cap(e.tags) < tagLen {
			e.tags = make([]byte, tagLen)
		}
		e.tags = e.tags[:tagLen]
		e.parts++
		s := q.sqe()
		s.Opcode = uring.OpRead
		s.Fd = int32(tagFd)
		s.Off = uint64(tagOff)
		s.Addr = uint64(uintptr(unsafe.Pointer(&e.tags[0])))
		s.Len = uint32(tagLen)
		s.UserData = userData(kindTag, e.idx)
		q.inflight++
	}
	return true
}

func (q *ringQueue) finishRead(e *ringEnt) {
	if e.fell {
		e.unlock()
		q.srv.dev.Counters.reads.Add(^uint64(0))
		q.fastReads.Add(^uint64(0))
		q.goSlow(e)
		return
	}
	if e.size <= ringInlineMax {
		q.openRead(e)
		q.fuseCmd(e, ringCmdCommit, e.unique())
		return
	}
	// Large reads are decrypted (and verified) off this thread, which
	// meanwhile keeps submitting the image reads of other requests.
	q.slowWG.Add(1)
	go func() {
		defer q.slowWG.Done()
		q.openRead(e)
		q.finish(e)
	}()
}

// ringInlineMax is the largest read a queue thread verifies and decrypts
// itself: about 2 µs of work at 4 KiB, less than a hand-off to another
// thread costs.
const ringInlineMax = 16 << 10

// openRead verifies and decrypts a fast read's data in place and writes
// the reply.
func (q *ringQueue) openRead(e *ringEnt) {
	d := q.srv.dev
	buf := e.payload[:e.size]
	err := e.ioErr
	if err == nil {
		err = q.srv.reader.FinishRead(buf, e.tags, e.first)
	}
	e.unlock()
	if err != nil {
		clear(buf)
		d.noteReadError(err)
		e.reply(syscall.EIO, 0)
		return
	}
	d.Counters.readBytes.Add(uint64(e.size))
	e.reply(0, e.size)
}

// fastReads counts the reads served through the rings' image reads.
func (s *ringServer) fastReads() uint64 {
	var n uint64
	for _, q := range s.queues {
		n += q.fastReads.Load()
	}
	return n
}

// describe names the transport for logs and status.
func (s *ringServer) describe() string {
	return fmt.Sprintf("over io_uring, %d queue threads", len(s.queues))
}
