// Package cputime reports the process's CPU time per iteration in benchmarks: on a machine
// shared with other load it varies far less than wall time, and a cache line written by every
// core shows up as more CPU per iteration in parallel than serially even when the load hides
// it in ns/op.
package cputime

import (
	"syscall"
	"testing"
)

// Report calls run, which runs the benchmark's b.N iterations, and reports the process CPU time
// (user plus system) per iteration as "cpu-ns/op".
func Report(b *testing.B, run func()) {
	start := process(b)
	run()
	b.ReportMetric(float64(process(b)-start)/float64(b.N), "cpu-ns/op")
}

func process(b *testing.B) int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}
