package exepages

import (
	"fmt"
	"sync/atomic"
	"syscall"

	"github.com/legateproxy/legate/internal/exepages/pagewise"
)

// Release advises MADV_DONTNEED on every read-only mapping of the executable and returns how
// many bytes of address space it covered. Pages the process uses later fault back in from the
// page cache.
func Release() (int, error) {
	ranges, err := pagewise.ReadOnly()
	if err != nil {
		return 0, err
	}
	n := 0
	for _, r := range ranges {
		// The mapping is not writable (pagewise.ReadOnly), so it holds no private changes to lose.
		if _, _, e := syscall.Syscall(syscall.SYS_MADVISE, uintptr(r[0]), uintptr(r[1]-r[0]), syscall.MADV_DONTNEED); e != 0 {
			return n, fmt.Errorf("madvise %x-%x: %w", r[0], r[1], e)
		}
		n += int(r[1] - r[0])
	}
	return n, nil
}

// Trim releases the read-only mappings of the executable (Release) when the process's resident
// file-backed memory has grown by more than budget bytes since the last release, and reports
// whether it did. It costs one read of /proc/self/statm when it releases nothing, so it may be
// called at every phase boundary and on a timer: the pages a phase keeps using fault back in
// after a release, so releasing while the binary's resident pages stay under the budget would
// only pay those faults again.
//
// statm counts every file's pages (and shared memory), not only the executable's: what is
// resident right after a release (libc with cgo, a tool's own mappings under valgrind) is
// taken as the floor the budget is counted from, so that other files do not make each call
// release.
func Trim(budget int) (bool, error) {
	shared, err := residentShared()
	if err != nil || shared-int(floor.Load()) <= budget {
		return false, err
	}
	_, err = Release()
	if after, e := residentShared(); e == nil {
		floor.Store(int64(after))
	}
	return true, err
}

// floor is what statm counted as shared right after the last release by Trim.
var floor atomic.Int64

// residentShared returns the third field of /proc/self/statm, in bytes. It reads into a buffer on
// the stack, so a timer calling Trim allocates nothing.
func residentShared() (int, error) {
	fd, err := syscall.Open("/proc/self/statm", syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return 0, err
	}
	defer syscall.Close(fd)
	var buf [128]byte
	n, err := syscall.Read(fd, buf[:])
	if err != nil {
		return 0, err
	}
	return parseStatmShared(buf[:n])
}
