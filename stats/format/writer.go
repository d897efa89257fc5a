package format

import (
	"bufio"
	"io"
	"runtime"
)

// newWriter buffers a renderer's output in 64 KiB chunks. After each chunk
// it hands the goroutine's processor to any runnable goroutine
// (runtime.Gosched): a render of a million stats is CPU-bound for hundreds
// of milliseconds, and without the yield a /ready request arriving on a
// busy process waits for the scheduler's 10 ms time slice, or longer when
// sysmon itself is delayed. The yield costs about a microsecond per chunk.
func newWriter(w io.Writer) *bufio.Writer {
	return bufio.NewWriterSize(yieldWriter{w}, 64<<10)
}

type yieldWriter struct{ w io.Writer }

func (y yieldWriter) Write(p []byte) (int, error) {
	n, err := y.w.Write(p)
	runtime.Gosched()
	return n, err
}
