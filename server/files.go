package server

import (
	"os"
	"sync"
)

// reopenableFile is an append-only log file that can be reopened after
// logrotate renames it (SIGUSR1, /reopen_logs). Safe for concurrent use.
type reopenableFile struct {
	path string
	mu   sync.Mutex // guards f
	f    *os.File
}

func openReopenable(path string) (*reopenableFile, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	return &reopenableFile{path: path, f: f}, nil
}

func (r *reopenableFile) Write(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.f.Write(p)
}

// Reopen opens the path afresh and closes the old handle, so writes go to a
// new file after a rename.
func (r *reopenableFile) Reopen() error {
	f, err := os.OpenFile(r.path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	r.mu.Lock()
	old := r.f
	r.f = f
	r.mu.Unlock()
	return old.Close()
}

func (r *reopenableFile) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.f.Close()
}
