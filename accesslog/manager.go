package accesslog

import (
	"errors"
	"sync"
)

// Manager shares one File per path among all access logs, as Envoy's access log manager does,
// and reopens them all at once (SIGUSR1, admin /reopen_logs). It is safe for concurrent use;
// mu guards files and closed. Files returned by Open belong to the Manager: close the Manager,
// not the files.
type Manager struct {
	opts FileOptions

	mu     sync.Mutex
	files  map[string]*File
	closed bool
}

// NewManager returns a Manager whose files use opts.
func NewManager(opts FileOptions) *Manager {
	return &Manager{opts: opts, files: map[string]*File{}}
}

// Open returns the File for path, opening it on first use.
func (m *Manager) Open(path string) (*File, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil, ErrClosed
	}
	if f, ok := m.files[path]; ok {
		return f, nil
	}
	f, err := OpenFile(path, m.opts)
	if err != nil {
		return nil, err
	}
	m.files[path] = f
	return f, nil
}

// Reopen reopens every file; it returns the errors of those that failed (they keep writing
// to their old file).
func (m *Manager) Reopen() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	var errs []error
	for _, f := range m.files {
		if err := f.Reopen(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Close flushes and closes every file and stops their goroutines.
func (m *Manager) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return ErrClosed
	}
	m.closed = true
	var errs []error
	for _, f := range m.files {
		if err := f.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	m.files = nil
	return errors.Join(errs...)
}
