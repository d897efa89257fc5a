package admin

import (
	"fmt"
	"net/http"
	"sort"
	"strings"
	"sync"
)

// ParamKind says how a parameter is shown on the home page and in /help.
type ParamKind int

const (
	// ParamBool is a presence flag: true when the key is present at all.
	ParamBool ParamKind = iota
	// ParamString takes free text.
	ParamString
	// ParamEnum takes one of Choices.
	ParamEnum
)

// Param documents one query parameter of an endpoint.
type Param struct {
	Name    string
	Help    string
	Kind    ParamKind
	Choices []string // for ParamEnum, in the order /help lists them
}

// Endpoint is one admin handler. Path is matched exactly against the request
// path up to '?'; there are no prefix or trailing-slash matches.
type Endpoint struct {
	Path    string
	Help    string
	Mutates bool // POST only; any other method gets 400 and no effect
	Params  []Param
	// QueryOnly endpoints never read parameters from a form body (Envoy's
	// /stats and /stats/prometheus).
	QueryOnly bool
	// Handle writes the response. Content-Type defaults to
	// "text/plain; charset=UTF-8". It runs on the request's own goroutine and
	// should stop when r.Context() is done.
	Handle func(w http.ResponseWriter, r *http.Request, q Query)
}

// Registry is the set of endpoints. Safe for concurrent use.
type Registry struct {
	mu        sync.RWMutex // guards endpoints
	endpoints map[string]*Endpoint
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry {
	return &Registry{endpoints: map[string]*Endpoint{}}
}

// Register adds e. A path registered twice is an error: two subsystems
// claiming one endpoint is a wiring bug to fix, not to paper over.
func (r *Registry) Register(e Endpoint) error {
	if !strings.HasPrefix(e.Path, "/") {
		return fmt.Errorf("admin endpoint %q: path must start with '/'", e.Path)
	}
	if e.Handle == nil {
		return fmt.Errorf("admin endpoint %q: no handler", e.Path)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, dup := r.endpoints[e.Path]; dup {
		return fmt.Errorf("admin endpoint %q is already registered", e.Path)
	}
	r.endpoints[e.Path] = &e
	return nil
}

// Remove drops the endpoint at path, if any (for dynamically added handlers
// such as /tap).
func (r *Registry) Remove(path string) {
	r.mu.Lock()
	delete(r.endpoints, path)
	r.mu.Unlock()
}

func (r *Registry) lookup(path string) (*Endpoint, bool) {
	r.mu.RLock()
	e, ok := r.endpoints[path]
	r.mu.RUnlock()
	return e, ok
}

// Sorted returns the endpoints sorted by path (byte order), as /help and the
// home page list them.
func (r *Registry) Sorted() []*Endpoint {
	r.mu.RLock()
	out := make([]*Endpoint, 0, len(r.endpoints))
	for _, e := range r.endpoints {
		out = append(out, e)
	}
	r.mu.RUnlock()
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out
}

// HelpText renders the /help body.
func (r *Registry) HelpText() string {
	var b strings.Builder
	b.WriteString("admin commands are:\n")
	for _, e := range r.Sorted() {
		b.WriteString("  ")
		b.WriteString(e.Path)
		if e.Mutates {
			b.WriteString(" (POST)")
		}
		b.WriteString(": ")
		b.WriteString(e.Help)
		b.WriteByte('\n')
		for _, p := range e.Params {
			b.WriteString("      ")
			b.WriteString(p.Name)
			b.WriteString(": ")
			b.WriteString(p.Help)
			if p.Kind == ParamEnum {
				b.WriteString("; One of (")
				b.WriteString(strings.Join(p.Choices, ", "))
				b.WriteByte(')')
			}
			b.WriteByte('\n')
		}
	}
	return b.String()
}
