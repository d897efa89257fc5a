package format

import (
	"io"
	"runtime"
)

// yieldWriter gives other goroutines the processor after each block it
// passes on. A 1M-stat render is CPU-bound for tens of milliseconds; without
// yielding, a /ready request that arrives meanwhile waits for Go's 10 ms
// preemption slice (Envoy's /stats is known to block /ready for seconds).
type yieldWriter struct{ w io.Writer }

func (y yieldWriter) Write(p []byte) (int, error) {
	n, err := y.w.Write(p)
	runtime.Gosched()
	return n, err
}
