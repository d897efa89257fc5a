package exepages

import (
	"fmt"
	"syscall"
)

// Release advises MADV_DONTNEED on every read-only mapping of the executable and returns how
// many bytes of address space it covered. Pages the process uses later fault back in from the
// page cache.
func Release() (int, error) {
	maps, err := ReadOnly()
	if err != nil {
		return 0, err
	}
	n := 0
	for _, m := range maps {
		// The mapping is not writable (ReadOnly), so it holds no private changes to lose.
		if _, _, e := syscall.Syscall(syscall.SYS_MADVISE, uintptr(m.Start), uintptr(m.End-m.Start), syscall.MADV_DONTNEED); e != 0 {
			return n, fmt.Errorf("madvise %x-%x %s: %w", m.Start, m.End, m.Perms, e)
		}
		n += int(m.End - m.Start)
	}
	return n, nil
}

// exeFile identifies the running executable as /proc/self/maps names files: device and inode.
func exeFile() (major, minor uint32, inode uint64, err error) {
	var st syscall.Stat_t
	if err := syscall.Stat("/proc/self/exe", &st); err != nil {
		return 0, 0, 0, err
	}
	// The kernel's encoding of dev_t (glibc's gnu_dev_major and gnu_dev_minor).
	dev := st.Dev
	major = uint32((dev>>8)&0xfff) | uint32((dev>>32)&^0xfff)
	minor = uint32(dev&0xff) | uint32((dev>>12)&^0xff)
	return major, minor, st.Ino, nil
}
