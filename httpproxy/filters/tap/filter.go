package tap

import (
	"fmt"
	"math/rand/v2"
	"net/http"
	"sync"
	"sync/atomic"

	tapv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/tap/v3"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/legateproxy/legate/httpproxy/filter"
)

// Name and TypeURL select the filter in http_filters.
const (
	Name    = "envoy.filters.http.tap"
	TypeURL = "type.googleapis.com/envoy.extensions.filters.http.tap.v3.Tap"
)

// Filter is one configured envoy.filters.http.tap. Its tap configuration is either static
// (common_config.static_config, in force for the filter's life) or given by the admin
// (common_config.admin_config: in force while a POST /tap session for its config_id is
// attached). Streams that start while no configuration is in force are not tapped and cost
// one atomic load.
//
// The filter sees a stream in one of two ways. A connection manager that can report bodies,
// trailers and the stream's end calls NewTapper once per stream and feeds the Tapper (the
// full Envoy behaviour). Through the plain filter.Filter interface, OnRequest and OnResponse,
// the filter sees request headers and response headers only, and the trace is complete when
// the response headers pass: no bodies, no trailers, and no :status, which that interface
// does not carry.
//
// Safe for concurrent use.
type Filter struct {
	mgr        *Manager
	configID   string // admin_config.config_id; "" with a static_config
	recordTime bool   // record_headers_received_time
	cur        atomic.Pointer[active]
	closed     atomic.Bool

	openN atomic.Int64                 // len(open), read without the lock
	mu    sync.Mutex                   // guards open
	open  map[*filter.Exchange]*Tapper // OnRequest to OnResponse
}

// Register adds the filter's factory to r; every tap filter built through it shares m.
func Register(r *filter.Registry, m *Manager) error {
	return r.Register(Name, func(cfg *anypb.Any, _ *filter.Context) (filter.Filter, error) {
		return FromAny(cfg, m)
	}, TypeURL)
}

// FromAny builds the filter from its typed_config.
func FromAny(cfg *anypb.Any, m *Manager) (*Filter, error) {
	if cfg == nil {
		return nil, fmt.Errorf("%s: typed_config is required (common_config)", Name)
	}
	var pb tapv3.Tap
	if err := cfg.UnmarshalTo(&pb); err != nil {
		return nil, fmt.Errorf("%s: typed_config: %w", Name, err)
	}
	return New(&pb, m)
}

// New builds the filter. With an admin_config it registers with m (so /tap can reach it)
// until Close.
func New(pb *tapv3.Tap, m *Manager) (*Filter, error) {
	if err := pb.Validate(); err != nil {
		return nil, fmt.Errorf("%s: %w", Name, err)
	}
	if pb.GetRecordDownstreamConnection() {
		return nil, fmt.Errorf("%s: record_downstream_connection = true: not implemented by Legate (the HTTP filter interface carries no connection addresses)", Name)
	}
	if pb.GetRecordUpstreamConnection() {
		return nil, fmt.Errorf("%s: record_upstream_connection = true: not implemented by Legate (the HTTP filter interface carries no upstream connection)", Name)
	}
	f := &Filter{mgr: m, recordTime: pb.GetRecordHeadersReceivedTime(), open: map[*filter.Exchange]*Tapper{}}
	common := pb.GetCommonConfig()
	switch {
	case common.GetAdminConfig() != nil:
		f.configID = common.GetAdminConfig().GetConfigId()
		m.register(f)
	case common.GetStaticConfig() != nil:
		cfg, err := Compile(common.GetStaticConfig(), "common_config.static_config")
		if err != nil {
			return nil, fmt.Errorf("%s: %w", Name, err)
		}
		if cfg.sink == sinkStreamingAdmin {
			return nil, fmt.Errorf("%s: common_config.static_config.output_config.sinks[0].streaming_admin: the admin sink needs an admin_config (a POST /tap session)", Name)
		}
		f.cur.Store(&active{cfg: cfg})
	default:
		return nil, fmt.Errorf("%s: common_config: neither admin_config nor static_config is set; one is required", Name)
	}
	return f, nil
}

// Close unregisters an admin-configured filter from its Manager (when the connection
// manager configuration that built it goes away); /tap disappears with the last one.
func (f *Filter) Close() error {
	if f.closed.Swap(true) {
		return nil
	}
	if f.configID != "" {
		f.mgr.unregister(f)
	}
	return nil
}

// NewTapper starts tapping one stream, or returns nil (a valid, inert Tapper) when no tap
// configuration is in force or tap_enabled leaves the stream out.
func (f *Filter) NewTapper() *Tapper {
	a := f.cur.Load()
	if a == nil || !a.cfg.admit() {
		return nil
	}
	return &Tapper{a: a, ms: a.cfg.match.newState(), id: rand.Uint64(), recordTime: f.recordTime, now: f.mgr.now}
}

// OnRequest implements filter.Filter: it starts a tapper for the stream and feeds it the
// request headers. It never answers the request.
func (f *Filter) OnRequest(x *filter.Exchange) *filter.Reply {
	t := f.NewTapper()
	if t == nil {
		return nil
	}
	t.RequestHeaders(x.Request)
	f.mu.Lock()
	f.open[x] = t
	f.openN.Store(int64(len(f.open)))
	f.mu.Unlock()
	return nil
}

// OnResponse implements filter.Filter: it feeds the response headers and ends the trace,
// since the plain filter interface reports nothing later.
func (f *Filter) OnResponse(x *filter.Exchange, h http.Header) {
	if f.openN.Load() == 0 {
		return
	}
	f.mu.Lock()
	t, ok := f.open[x]
	delete(f.open, x)
	f.openN.Store(int64(len(f.open)))
	f.mu.Unlock()
	if !ok {
		return
	}
	t.ResponseHeaders(0, h)
	t.End()
}

var _ filter.Filter = (*Filter)(nil)
