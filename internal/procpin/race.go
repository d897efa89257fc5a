//go:build race

package procpin

import (
	"runtime"
	"unsafe"
)

// Under the race detector a Cache's stack is a critical section of its P: only one goroutine
// runs on a P at a time and the scheduler orders them, which the detector cannot see, so each
// Get and Put says it with an acquire and a release on the stack.
func raceAcquire[T any](s *stack[T]) { runtime.RaceAcquire(unsafe.Pointer(s)) }
func raceRelease[T any](s *stack[T]) { runtime.RaceReleaseMerge(unsafe.Pointer(s)) }
