package tap

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	adminv3 "github.com/envoyproxy/go-control-plane/envoy/admin/v3"
	tapdatav3 "github.com/envoyproxy/go-control-plane/envoy/data/tap/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"sigs.k8s.io/yaml"

	"github.com/legateproxy/legate/internal/clock"
)

// ErrAttached is returned by Manager.Attach while another admin session is attached; Envoy
// allows one /tap stream at a time. Its text is Envoy's response body, hence the capital
// letter and the full stop (as for the other errors that become /tap's 400 bodies).
var ErrAttached = errors.New("An attached /tap admin stream already exists. Detach it.")

// sessionQueue is how many traces wait for a slow admin client before new ones are dropped
// (the request path never blocks on the admin).
const sessionQueue = 1024

// Manager joins the tap filters configured with common_config.admin_config to the admin's
// POST /tap (Envoy's tap AdminHandler): filters register under their config_id, and an
// attached admin session installs its tap_config on every filter with that id until it
// detaches. One Manager serves the whole server; the filter factory and the admin endpoint
// are given the same one.
//
// Safe for concurrent use. The zero value is not usable; call NewManager.
type Manager struct {
	now func() time.Time

	mu      sync.Mutex // guards the fields below
	byID    map[string]map[*Filter]struct{}
	session *Session             // the attached admin session, if any
	watch   func(available bool) // told when the first admin filter appears and the last goes
}

// NewManager returns a Manager with no filters.
func NewManager() *Manager {
	return &Manager{now: clock.Real().Now, byID: map[string]map[*Filter]struct{}{}}
}

// Watch sets fn, called with true when the first filter with an admin_config registers and
// with false when the last one closes (and at once with true if one already exists): the
// admin adds and removes /tap with it, so the endpoint exists only while something can be
// tapped, as in Envoy. fn is called with the Manager's lock held and must not call back
// into the Manager.
func (m *Manager) Watch(fn func(available bool)) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.watch = fn
	if fn != nil && len(m.byID) > 0 {
		fn(true)
	}
}

// ParseRequest decodes a POST /tap body, YAML or JSON, into an envoy.admin.v3.TapRequest
// strictly (unknown fields are errors) and checks its constraints, as Envoy's
// loadFromYamlAndValidate does. The error is one line, fit for the 400 response.
func ParseRequest(body []byte) (*adminv3.TapRequest, error) {
	if len(strings.TrimSpace(string(body))) == 0 {
		return nil, errors.New("/tap requires a JSON/YAML body")
	}
	j, err := yaml.YAMLToJSONStrict(body)
	if err != nil {
		return nil, fmt.Errorf("Unable to convert YAML as JSON: %s", oneLine(err.Error()))
	}
	req := &adminv3.TapRequest{}
	if err := (protojson.UnmarshalOptions{}).Unmarshal(j, req); err != nil {
		return nil, fmt.Errorf("Unable to parse JSON as proto (%s)", oneLine(err.Error()))
	}
	if err := req.Validate(); err != nil {
		return nil, fmt.Errorf("Proto constraint validation failed (%s)", oneLine(err.Error()))
	}
	return req, nil
}

func oneLine(s string) string {
	s = strings.ReplaceAll(s, "\u00a0", " ") // protojson's error texts use non-breaking spaces
	return strings.Join(strings.Fields(s), " ")
}

// Attach starts an admin session for req: the tap_config is installed on every filter
// registered under req.config_id until the session is closed. Errors are Envoy's: another
// session attached (ErrAttached), an unknown config_id, or a tap_config Legate cannot run.
func (m *Manager) Attach(req *adminv3.TapRequest) (*Session, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.session != nil {
		return nil, ErrAttached
	}
	id := req.GetConfigId()
	if len(m.byID[id]) == 0 {
		return nil, fmt.Errorf("Unknown config id '%s'. No extension has registered with this id.", id)
	}
	cfg, err := Compile(req.GetTapConfig(), "tap_config")
	if err != nil {
		return nil, err
	}
	if cfg.sink == sinkStreamingAdmin {
		if err := checkAdminFormat(cfg.format, "tap_config.output_config.sinks[0]"); err != nil {
			return nil, err
		}
	}
	s := &Session{
		m:      m,
		id:     id,
		format: cfg.format,
		traces: make(chan *tapdatav3.TraceWrapper, sessionQueue),
		done:   make(chan struct{}),
	}
	s.act = &active{cfg: cfg}
	if cfg.sink == sinkStreamingAdmin {
		s.act.session = s
	}
	m.session = s
	for f := range m.byID[id] {
		f.cur.Store(s.act)
	}
	return s, nil
}

// register adds an admin-configured filter; it picks up the attached session's
// configuration when the ids agree (Envoy's registerConfig).
func (m *Manager) register(f *Filter) {
	m.mu.Lock()
	defer m.mu.Unlock()
	first := len(m.byID) == 0
	set := m.byID[f.configID]
	if set == nil {
		set = map[*Filter]struct{}{}
		m.byID[f.configID] = set
	}
	set[f] = struct{}{}
	if s := m.session; s != nil && s.id == f.configID {
		f.cur.Store(s.act)
	}
	if first && m.watch != nil {
		m.watch(true)
	}
}

// unregister removes a closed filter.
func (m *Manager) unregister(f *Filter) {
	m.mu.Lock()
	defer m.mu.Unlock()
	set := m.byID[f.configID]
	if _, ok := set[f]; !ok {
		return
	}
	delete(set, f)
	if len(set) == 0 {
		delete(m.byID, f.configID)
		if len(m.byID) == 0 && m.watch != nil {
			m.watch(false)
		}
	}
}

// detach ends s: its filters lose their tap configuration (Envoy's clearTapConfig).
func (m *Manager) detach(s *Session) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.session != s {
		return
	}
	m.session = nil
	for f := range m.byID[s.id] {
		f.cur.CompareAndSwap(s.act, nil)
	}
}

// Session is one attached POST /tap request. Traces of a streaming_admin sink arrive on
// Traces in the order their streams produced them (each stream's own messages in order);
// with a file_per_tap sink the files are written and Traces stays empty. The session holds
// until Close. Safe for concurrent use.
type Session struct {
	m      *Manager
	id     string
	act    *active
	format Format

	traces  chan *tapdatav3.TraceWrapper
	done    chan struct{}
	once    sync.Once
	dropped atomic.Uint64
}

// Format is the sink's output format, for encoding the traces (see Encode).
func (s *Session) Format() Format { return s.format }

// Traces delivers the session's messages.
func (s *Session) Traces() <-chan *tapdatav3.TraceWrapper { return s.traces }

// Dropped counts messages lost because the admin client read too slowly.
func (s *Session) Dropped() uint64 { return s.dropped.Load() }

// Close detaches the session: the tap configuration is removed from its filters and
// messages still in flight are dropped. Closing twice is harmless.
func (s *Session) Close() {
	s.once.Do(func() {
		close(s.done)
		s.m.detach(s)
	})
}

// push queues a message without blocking the stream that produced it.
func (s *Session) push(tw *tapdatav3.TraceWrapper) {
	select {
	case <-s.done:
		return
	default:
	}
	select {
	case s.traces <- tw:
	default:
		s.dropped.Add(1)
	}
}
