package tap

import (
	"fmt"
	"math/rand/v2"
	"net/http"
	"sync/atomic"

	tapv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/tap/v3"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/legateproxy/legate/httpproxy/filter"
	"github.com/legateproxy/legate/internal/registry"
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
// The filter is a filter.StreamFilter: the connection manager calls NewStream once per
// stream and feeds the returned Tapper the request body and trailers, the final status and
// response headers, the response body and the stream's end (Envoy's decodeData through
// onDestroy). Its plain filter.Filter methods do nothing.
//
// Safe for concurrent use.
type Filter struct {
	mgr        *Manager
	configID   string // admin_config.config_id; "" with a static_config
	recordTime bool   // record_headers_received_time
	cur        atomic.Pointer[active]
	closed     atomic.Bool
}

// Register registers the filter; a tap filter joins the *Manager of its filter.Context
// (Context.Taps).
func Register(b *registry.Builder) {
	registry.Add(b, filter.HTTPFilters, Name, &tapv3.Tap{}, filter.Extension{
		New: func(cfg *anypb.Any, ctx *filter.Context) (filter.Filter, error) {
			m, _ := ctx.Taps.(*Manager)
			return FromAny(cfg, m)
		},
	})
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
	f := &Filter{mgr: m, recordTime: pb.GetRecordHeadersReceivedTime()}
	common := pb.GetCommonConfig()
	switch {
	case common.GetAdminConfig() != nil && m == nil:
		return nil, fmt.Errorf("%s: common_config.admin_config: this server has no /tap admin endpoint", Name)
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

// NewStream implements filter.StreamFilter: it starts tapping the stream and feeds the tapper
// its request headers, or returns nil when nothing taps the stream (the common case, one
// atomic load).
func (f *Filter) NewStream(x *filter.Exchange) filter.Stream {
	t := f.NewTapper()
	if t == nil {
		return nil
	}
	t.RequestHeaders(x.Request)
	return (*tapStream)(t)
}

// OnRequest implements filter.Filter; the work is done by the Stream NewStream returns.
func (f *Filter) OnRequest(*filter.Exchange) *filter.Reply { return nil }

// OnResponse implements filter.Filter; the work is done by the Stream NewStream returns.
func (f *Filter) OnResponse(*filter.Exchange, http.Header) {}

// tapStream is a Tapper as the connection manager's filter.Stream (whose End reports
// nothing back); a conversion, not a copy.
type tapStream Tapper

func (s *tapStream) RequestBody(p []byte)          { (*Tapper)(s).RequestBody(p) }
func (s *tapStream) RequestTrailers(h http.Header) { (*Tapper)(s).RequestTrailers(h) }
func (s *tapStream) ResponseHeaders(status int, h http.Header) {
	(*Tapper)(s).ResponseHeaders(status, h)
}
func (s *tapStream) ResponseBody(p []byte)          { (*Tapper)(s).ResponseBody(p) }
func (s *tapStream) ResponseTrailers(h http.Header) { (*Tapper)(s).ResponseTrailers(h) }
func (s *tapStream) End()                           { (*Tapper)(s).End() }

var _ filter.StreamFilter = (*Filter)(nil)
