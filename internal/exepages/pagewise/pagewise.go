// Package pagewise turns the kernel's fault-around off for the running executable's read-only
// mappings (code, read-only data, the pc tables), so that each later fault in them maps the one
// page read, where the kernel otherwise maps the pages cached around it too (64 KiB).
//
// Why: Legate's start-up phases each read a few bytes in hundreds of 64 KiB windows spread over
// the binary (init functions, descriptors, types, pc tables), so with fault-around most of its
// resident file pages are neighbours never read (package exepages says what dropping them
// means and costs).
//
// How: the mappings are registered with a userfaultfd in asynchronous write-protect mode (Linux
// 6.7 and later), for which the kernel does not fault around. Nothing writes those mappings, and
// in that mode the kernel would resolve a write fault itself, so no fault is ever delivered to
// the descriptor and nothing reads it; it is kept open for the life of the process (closing it
// would end the registration) and not inherited by an exec (O_CLOEXEC). It changes how pages
// come in, not what the process reads or which pages stay cached.
//
// The package imports only the lowest of the standard library (syscall, sync), so that the init
// calling Enable (package aftersyscall) runs before almost every other package's init.
package pagewise

import "sync/atomic"

// On reports whether Enable has registered the executable's read-only mappings.
func On() bool { return on.Load() }

var on atomic.Bool
