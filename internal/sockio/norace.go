//go:build !race

package sockio

import "unsafe"

func raceAcquire()                  {}
func raceReleaseMerge()             {}
func raceWrite(unsafe.Pointer, int) {}
func raceRead(unsafe.Pointer, int)  {}
