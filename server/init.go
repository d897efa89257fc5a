package server

import (
	"fmt"
	"sync"
)

// Init is an init manager: named targets that must all become ready before
// the component owning the manager is initialized (Envoy's Init::Manager).
// Targets are added before Start; once started and every target is ready,
// Done is closed. Safe for concurrent use.
type Init struct {
	name string

	mu      sync.Mutex // guards the fields below
	order   []string   // target names in the order added
	pending map[string]bool
	started bool
	closed  bool
	done    chan struct{}
}

// NewInit returns an init manager named name (as /init_dump shows it).
func NewInit(name string) *Init {
	return &Init{name: name, pending: map[string]bool{}, done: make(chan struct{})}
}

// Name is the manager's name.
func (m *Init) Name() string { return m.name }

// Target is one thing an init manager waits for.
type Target struct {
	m    *Init
	name string
	once sync.Once
}

// Add registers a target. Adding after Start, or a name twice, is an error:
// both mean a component was wired in the wrong order.
func (m *Init) Add(name string) (*Target, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.started {
		return nil, fmt.Errorf("init manager %q: target %q added after initialization started", m.name, name)
	}
	if _, dup := m.pending[name]; dup {
		return nil, fmt.Errorf("init manager %q: target %q added twice", m.name, name)
	}
	m.order = append(m.order, name)
	m.pending[name] = true
	return &Target{m: m, name: name}, nil
}

// Ready marks the target ready. Calling it more than once is harmless.
func (t *Target) Ready() {
	t.once.Do(func() {
		t.m.mu.Lock()
		t.m.pending[t.name] = false
		t.m.maybeDoneLocked()
		t.m.mu.Unlock()
	})
}

// Start begins initialization; Done closes once every target is ready
// (at once when there are none).
func (m *Init) Start() {
	m.mu.Lock()
	m.started = true
	m.maybeDoneLocked()
	m.mu.Unlock()
}

func (m *Init) maybeDoneLocked() {
	if !m.started || m.closed {
		return
	}
	for _, p := range m.pending {
		if p {
			return
		}
	}
	m.closed = true
	close(m.done)
}

// Started reports whether Start was called.
func (m *Init) Started() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.started
}

// Done is closed when initialization has finished.
func (m *Init) Done() <-chan struct{} { return m.done }

// Unready lists the targets not yet ready, in the order they were added.
func (m *Init) Unready() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []string
	for _, n := range m.order {
		if m.pending[n] {
			out = append(out, n)
		}
	}
	return out
}
