//go:build race

package sockio

import (
	"runtime"
	"unsafe"
)

// ioSync is what socket messages synchronize on under the race detector (syscall's own is
// not reachable from here).
var ioSync int64

func raceAcquire()      { runtime.RaceAcquire(unsafe.Pointer(&ioSync)) }
func raceReleaseMerge() { runtime.RaceReleaseMerge(unsafe.Pointer(&ioSync)) }

func raceWrite(p unsafe.Pointer, n int) { runtime.RaceWriteRange(p, n) }
func raceRead(p unsafe.Pointer, n int)  { runtime.RaceReadRange(p, n) }
