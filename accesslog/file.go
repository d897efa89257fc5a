package accesslog

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"syscall"
	"time"

	"github.com/legateproxy/legate/internal/clock"
)

// FileOptions configure a File. The zero value gives Envoy's defaults.
type FileOptions struct {
	// FlushInterval is how often buffered lines are written (Envoy's
	// --file-flush-interval-msec); zero means 10 s, Envoy's default.
	FlushInterval time.Duration
	// MinFlushSize is the buffered size that triggers an immediate write; zero means 64 KiB.
	MinFlushSize int
	// Clock makes the flush ticker; nil means the system clock.
	Clock clock.Clock
}

// ErrClosed is returned by writes to a closed File.
var ErrClosed = errors.New("access log file is closed")

// File is a buffered access log file for envoy.access_loggers.file, reopened on request
// (after logrotate renamed it; admin /reopen_logs). It is safe for concurrent use: mu guards
// the buffer, the open file and the closed flag, so each Write lands whole and in order.
// A flush goroutine, started by OpenFile and stopped by Close, writes the buffer every
// FlushInterval.
type File struct {
	path    string
	minSize int

	mu     sync.Mutex
	file   *os.File
	buf    []byte
	closed bool
	err    error // last write error, reported once by Flush

	done    chan struct{}
	stopped chan struct{}
}

// OpenFile opens (creating, appending) the log file at path and starts its flush goroutine.
func OpenFile(path string, opts FileOptions) (*File, error) {
	fd, err := openLog(path)
	if err != nil {
		return nil, err
	}
	if opts.FlushInterval <= 0 {
		opts.FlushInterval = 10 * time.Second
	}
	if opts.MinFlushSize <= 0 {
		opts.MinFlushSize = 64 << 10
	}
	f := &File{
		path:    path,
		minSize: opts.MinFlushSize,
		file:    fd,
		buf:     make([]byte, 0, opts.MinFlushSize),
		done:    make(chan struct{}),
		stopped: make(chan struct{}),
	}
	if opts.Clock == nil {
		opts.Clock = clock.Real()
	}
	go f.flushLoop(opts.Clock.NewTicker(opts.FlushInterval))
	return f, nil
}

func openLog(path string) (*os.File, error) {
	switch path {
	case StdoutPath:
		return dupStream(path, os.Stdout)
	case StderrPath:
		return dupStream(path, os.Stderr)
	}
	fd, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("access log path %q: %w", path, err)
	}
	return fd, nil
}

// flushLoop writes the buffer on every tick until Close.
func (f *File) flushLoop(ticker clock.Ticker) {
	defer close(f.stopped)
	defer ticker.Stop()
	for {
		select {
		case <-f.done:
			return
		case <-ticker.C():
			f.mu.Lock()
			f.flushLocked()
			f.mu.Unlock()
		}
	}
}

// Write buffers one or more complete log lines. It never splits p between files.
func (f *File) Write(p []byte) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return 0, ErrClosed
	}
	f.buf = append(f.buf, p...)
	if len(f.buf) >= f.minSize {
		f.flushLocked()
	}
	return len(p), nil
}

func (f *File) flushLocked() {
	if len(f.buf) == 0 {
		return
	}
	if _, err := f.file.Write(f.buf); err != nil && f.err == nil {
		f.err = err
	}
	f.buf = f.buf[:0]
}

// Flush writes the buffered lines now and returns the first write error since the last Flush.
func (f *File) Flush() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return ErrClosed
	}
	f.flushLocked()
	err := f.err
	f.err = nil
	return err
}

// Reopen flushes to the current file, closes it and opens the path again, so that lines after
// a logrotate rename go to a new file. On error the old file stays in use.
func (f *File) Reopen() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return ErrClosed
	}
	f.flushLocked()
	fd, err := openLog(f.path)
	if err != nil {
		return err
	}
	old := f.file
	f.file = fd
	return old.Close()
}

// Close stops the flush goroutine, writes what is buffered and closes the file.
func (f *File) Close() error {
	f.mu.Lock()
	if f.closed {
		f.mu.Unlock()
		return ErrClosed
	}
	f.closed = true
	f.mu.Unlock()
	close(f.done)
	<-f.stopped
	f.mu.Lock()
	defer f.mu.Unlock()
	f.flushLocked()
	err := f.err
	if cerr := f.file.Close(); err == nil {
		err = cerr
	}
	return err
}

// dupStream returns a duplicate of std's descriptor. /dev/stdout and /dev/stderr are written to
// the process's own streams rather than opened, as Envoy's stdout and stderr loggers do: opening
// /dev/stdout fails when descriptor 1 is a socket (systemd's journal). The duplicate lets Close
// and Reopen leave the process's stream open.
func dupStream(path string, std *os.File) (*os.File, error) {
	fd, err := syscall.Dup(int(std.Fd()))
	if err != nil {
		return nil, fmt.Errorf("access log path %q: %w", path, err)
	}
	syscall.CloseOnExec(fd)
	return os.NewFile(uintptr(fd), path), nil
}
