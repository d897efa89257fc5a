package exepages

import (
	"fmt"
	"sync"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// userfaultfd(2)'s ABI (linux/userfaultfd.h); golang.org/x/sys has the system call's number
// but not these.
const (
	uffdUserModeOnly     = 1       // UFFD_USER_MODE_ONLY: allowed without privilege
	uffdAPI              = 0xAA    // UFFD_API
	uffdFeatureWPAsync   = 1 << 15 // UFFD_FEATURE_WP_ASYNC: the kernel resolves write faults itself
	uffdioAPI            = 0xC018AA3F
	uffdioRegister       = 0xC020AA00
	uffdioRegisterModeWP = 1 << 1
)

type uffdioAPIArg struct{ API, Features, Ioctls uint64 }

type uffdioRegisterArg struct{ Start, Len, Mode, Ioctls uint64 }

// SinglePageFaults makes each later fault in the executable's read-only mappings (ReadOnly) map
// the one page it touches, where the kernel otherwise maps the pages cached around it too
// (fault-around, 64 KiB), and returns nil when it did. Legate's phases each read a few bytes in
// hundreds of those windows spread over the binary (init functions, descriptors, types, pc
// tables), so with fault-around most of its resident file pages are neighbours never read.
//
// How: the mappings are registered with a userfaultfd in asynchronous write-protect mode
// (Linux 6.7 and later), for which the kernel does not fault around. Nothing writes those
// mappings, and in that mode the kernel would resolve a write fault itself, so no fault is
// ever delivered to the descriptor and nothing reads it; it is kept open for the life of the
// process (closing it would end the registration) and not inherited by an exec (O_CLOEXEC).
// It only changes how pages come in, not what the process reads or which pages stay cached.
// Pages already resident stay so: a Release afterwards drops them. Where userfaultfd is not
// available (an older kernel, a seccomp filter, valgrind) it returns the error and nothing
// changes. Only the first call does anything; later ones return its result.
func SinglePageFaults() error { return singlePage() }

var singlePage = sync.OnceValue(func() error {
	maps, err := cachedReadOnly()
	if err != nil {
		return err
	}
	fd, _, e := syscall.Syscall(unix.SYS_USERFAULTFD, syscall.O_CLOEXEC|syscall.O_NONBLOCK|uffdUserModeOnly, 0, 0)
	if e != 0 {
		return fmt.Errorf("userfaultfd: %w", e)
	}
	api := uffdioAPIArg{API: uffdAPI, Features: uffdFeatureWPAsync}
	if err := uffdIoctl(fd, uffdioAPI, unsafe.Pointer(&api)); err != nil {
		syscall.Close(int(fd))
		return fmt.Errorf("UFFDIO_API with asynchronous write-protection: %w", err)
	}
	for _, m := range maps {
		r := uffdioRegisterArg{Start: m.Start, Len: m.End - m.Start, Mode: uffdioRegisterModeWP}
		if err := uffdIoctl(fd, uffdioRegister, unsafe.Pointer(&r)); err != nil {
			// Closing the descriptor undoes the mappings registered before this one.
			syscall.Close(int(fd))
			return fmt.Errorf("UFFDIO_REGISTER %x-%x %s: %w", m.Start, m.End, m.Perms, err)
		}
	}
	pagewise.Store(true)
	return nil // fd stays open: the registration lasts as long as it does
})

func uffdIoctl(fd, req uintptr, arg unsafe.Pointer) error {
	if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, fd, req, uintptr(arg)); e != 0 {
		return e
	}
	return nil
}
