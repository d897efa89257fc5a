package pagewise

import (
	"errors"
	"sync"
	"syscall"
	"unsafe"
)

// userfaultfd(2)'s ABI (linux/userfaultfd.h).
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

// Enable registers the executable's read-only mappings (those of /proc/self/exe's file that are
// not writable) with a userfaultfd in asynchronous write-protect mode and drops their resident
// pages (MADV_DONTNEED: clean page cache, which stays cached), which came in with fault-around.
// It returns nil when it did; where userfaultfd is refused (an older kernel, a seccomp filter,
// valgrind) it returns the error and nothing changes. Only the first call does anything; later
// ones return its result.
func Enable() error { return enable() }

var enable = sync.OnceValue(func() error {
	ranges, err := ReadOnly()
	if err != nil {
		return err
	}
	if sysUserfaultfd == 0 {
		return errors.ErrUnsupported
	}
	fd, _, e := syscall.Syscall(sysUserfaultfd, syscall.O_CLOEXEC|syscall.O_NONBLOCK|uffdUserModeOnly, 0, 0)
	if e != 0 {
		return errors.Join(errors.New("userfaultfd"), e)
	}
	api := uffdioAPIArg{API: uffdAPI, Features: uffdFeatureWPAsync}
	if err := ioctl(fd, uffdioAPI, unsafe.Pointer(&api)); err != nil {
		syscall.Close(int(fd))
		return errors.Join(errors.New("UFFDIO_API with asynchronous write-protection"), err)
	}
	for _, r := range ranges {
		reg := uffdioRegisterArg{Start: r[0], Len: r[1] - r[0], Mode: uffdioRegisterModeWP}
		if err := ioctl(fd, uffdioRegister, unsafe.Pointer(&reg)); err != nil {
			// Closing the descriptor undoes the ranges registered before this one.
			syscall.Close(int(fd))
			return errors.Join(errors.New("UFFDIO_REGISTER"), err)
		}
	}
	on.Store(true)
	for _, r := range ranges {
		// Not writable (readOnly), so the range holds no private changes to lose.
		_, _, _ = syscall.Syscall(syscall.SYS_MADVISE, uintptr(r[0]), uintptr(r[1]-r[0]), syscall.MADV_DONTNEED)
	}
	return nil // fd stays open: the registration lasts as long as it does
})

func ioctl(fd, req uintptr, arg unsafe.Pointer) error {
	if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, fd, req, uintptr(arg)); e != 0 {
		return e
	}
	return nil
}

// ReadOnly returns the [start, end) address ranges of the executable's mappings that the process
// cannot write, from /proc/self/maps, read and parsed with system calls alone (see the package
// comment for why). It reads them once: the executable stays mapped where exec put it. Package
// exepages drops the pages of the same ranges.
func ReadOnly() ([][2]uint64, error) { return readOnlyOnce() }

var readOnlyOnce = sync.OnceValues(readOnly)

func readOnly() ([][2]uint64, error) {
	var st syscall.Stat_t
	if err := syscall.Stat("/proc/self/exe", &st); err != nil {
		return nil, err
	}
	fd, err := syscall.Open("/proc/self/maps", syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	defer syscall.Close(fd)
	buf := make([]byte, 0, 16<<10)
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		n, err := syscall.Read(fd, buf[len(buf):cap(buf)])
		if err != nil {
			return nil, err
		}
		if n == 0 {
			break
		}
		buf = buf[:len(buf)+n]
	}
	// The kernel's encoding of dev_t (glibc's gnu_dev_major and gnu_dev_minor).
	major := (st.Dev>>8)&0xfff | (st.Dev>>32)&^0xfff
	minor := st.Dev&0xff | (st.Dev>>12)&^0xff
	return parseReadOnly(buf, major, minor, st.Ino), nil
}

// parseReadOnly returns the ranges of the lines of a /proc/PID/maps text ("start-end perms
// offset major:minor inode path", numbers in hex but the inode) whose file is the given one and
// whose permissions do not allow writing. A line it cannot read is skipped.
func parseReadOnly(text []byte, major, minor, inode uint64) [][2]uint64 {
	var out [][2]uint64
	for len(text) > 0 {
		line := text
		if i := indexByte(text, '\n'); i >= 0 {
			line, text = text[:i], text[i+1:]
		} else {
			text = nil
		}
		var f [5][]byte // start-end, perms, offset, major:minor, inode
		n := 0
		for n < len(f) {
			for len(line) > 0 && line[0] == ' ' {
				line = line[1:]
			}
			i := indexByte(line, ' ')
			if i < 0 {
				i = len(line)
			}
			if i == 0 {
				break
			}
			f[n], line = line[:i], line[i:]
			n++
		}
		if n < len(f) || len(f[1]) < 2 || f[1][1] == 'w' {
			continue
		}
		lo, hi, ok1 := cutNumbers(f[0], '-', 16)
		maj, mnr, ok2 := cutNumbers(f[3], ':', 16)
		ino, ok3 := number(f[4], 10)
		if ok1 && ok2 && ok3 && maj == major && mnr == minor && ino == inode && lo < hi {
			out = append(out, [2]uint64{lo, hi})
		}
	}
	return out
}

func indexByte(b []byte, c byte) int {
	for i, x := range b {
		if x == c {
			return i
		}
	}
	return -1
}

// cutNumbers reads "a<sep>b", both in base.
func cutNumbers(b []byte, sep byte, base uint64) (x, y uint64, ok bool) {
	i := indexByte(b, sep)
	if i < 0 {
		return 0, 0, false
	}
	x, ok1 := number(b[:i], base)
	y, ok2 := number(b[i+1:], base)
	return x, y, ok1 && ok2
}

// number reads an unsigned number in base 10 or 16 (lower-case digits, as the kernel writes).
func number(b []byte, base uint64) (uint64, bool) {
	var v uint64
	for _, c := range b {
		var d uint64
		switch {
		case c >= '0' && c <= '9':
			d = uint64(c - '0')
		case base == 16 && c >= 'a' && c <= 'f':
			d = uint64(c-'a') + 10
		default:
			return 0, false
		}
		v = v*base + d
	}
	return v, len(b) > 0
}
