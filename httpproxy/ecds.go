package httpproxy

import (
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"

	"github.com/legateproxy/legate/accesslog"
	"github.com/legateproxy/legate/httpproxy/filter"
)

// ExtensionConfigProvider serves the configurations of HTTP filters discovered over ECDS
// (http_filters[].config_discovery); the xDS client implements it. WatchExtensionConfig
// subscribes to the TypedExtensionConfig called name and returns the current one (nil until
// it arrives), its generation and cancel. update is called with each later accepted
// configuration (gen grows) and with nil when the initial fetch times out or the resource is
// removed, on another goroutine, without locks the caller could hold; it must not block.
type ExtensionConfigProvider interface {
	WatchExtensionConfig(name string, source *corev3.ConfigSource,
		update func(gen uint64, tc *corev3.TypedExtensionConfig)) (*corev3.TypedExtensionConfig, uint64, func(), error)
}

// discoveredFilter is an HTTP filter whose configuration comes from ECDS: its position among
// the connection manager's filters (the router excluded) and its config_discovery.
type discoveredFilter struct {
	pos  int
	name string
	cd   *corev3.ExtensionConfigSource
}

// takeECDS removes the HTTP filters with config_discovery from pb, so that the rest converts
// as usual, and returns them with the position each takes among the built filters.
func takeECDS(pb *hcmv3.HttpConnectionManager) []discoveredFilter {
	var out []discoveredFilter
	kept := pb.HttpFilters[:0:0]
	for _, f := range pb.GetHttpFilters() {
		if cd := f.GetConfigDiscovery(); cd != nil {
			out = append(out, discoveredFilter{pos: len(kept) + len(out), name: f.GetName(), cd: cd})
			continue
		}
		kept = append(kept, f)
	}
	if out != nil {
		pb.HttpFilters = kept
	}
	return out
}

// ecdsFilter is a filter whose configuration ECDS delivers and replaces: each stream uses the
// instance current when it starts (a replaced instance holding resources is closed at once). Without a configuration (none arrived and no
// default_config) requests get 500 with the NFCF response flag, as in Envoy.
type ecdsFilter struct {
	cur atomic.Pointer[filterBox]

	mu     sync.Mutex // guards gen; serialises builds so an older configuration never wins
	gen    uint64
	cancel func()
	// def is the default_config's instance; nil without one.
	def filter.Filter
}

type filterBox struct{ f filter.Filter }

func (e *ecdsFilter) OnRequest(x *filter.Exchange) *filter.Reply {
	b := e.cur.Load()
	if b == nil {
		return &filter.Reply{Status: http.StatusInternalServerError, Flags: accesslog.NoFilterConfigFound, Details: "filter_config_not_found"}
	}
	return b.f.OnRequest(x)
}

func (e *ecdsFilter) OnResponse(x *filter.Exchange, h http.Header) {
	if b := e.cur.Load(); b != nil {
		b.f.OnResponse(x, h)
	}
}

// Close closes the current instance when it holds resources (io.Closer), as the connection
// manager closes its filters when their configuration goes away.
func (e *ecdsFilter) Close() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	old := e.cur.Swap(nil)
	e.closeLocked(old)
	return nil
}

// closeLocked closes a replaced instance that holds resources, unless it is the
// default_config's, which may serve again.
func (e *ecdsFilter) closeLocked(old *filterBox) {
	if old == nil || old.f == e.def {
		return
	}
	if c, ok := old.f.(io.Closer); ok {
		c.Close()
	}
}

// startECDS subscribes the discovered filters of h and inserts them at their positions. A
// configuration whose type is not in config_discovery.type_urls, or that the filter refuses,
// is logged and the previous one keeps serving. default_config serves before the first
// configuration with apply_default_config_without_warming, after an initial fetch timeout
// and after a removal.
func (sh *shared) startECDS(h *Handler, list []discoveredFilter) error {
	d := &sh.deps
	if d.ExtensionConfigs == nil {
		return fmt.Errorf("http_connection_manager %q: http_filters %q: config_discovery needs the xDS client", h.cfg.StatPrefix, list[0].name)
	}
	fctx := &filter.Context{Clusters: d.Clusters, HealthCheckFailed: d.HealthCheckFailed, LocalClusterName: d.LocalClusterName}
	build := func(df discoveredFilter, tc *corev3.TypedExtensionConfig) (filter.Filter, error) {
		if err := checkType(df.cd.GetTypeUrls(), tc.GetTypedConfig().GetTypeUrl()); err != nil {
			return nil, err
		}
		factory, ok := d.Filters.Lookup(tc.GetName(), tc.GetTypedConfig())
		if !ok {
			return nil, fmt.Errorf("type %q: unknown HTTP filter", tc.GetTypedConfig().GetTypeUrl())
		}
		return factory(tc.GetTypedConfig(), fctx)
	}
	for _, df := range list {
		e := &ecdsFilter{}
		var def filter.Filter
		if dc := df.cd.GetDefaultConfig(); dc != nil {
			f, err := build(df, &corev3.TypedExtensionConfig{Name: df.name, TypedConfig: dc})
			if err != nil {
				h.stopECDS()
				return fmt.Errorf("http_connection_manager %q: http_filters %q: config_discovery.default_config: %w", h.cfg.StatPrefix, df.name, err)
			}
			def, e.def = f, f
			if df.cd.GetApplyDefaultConfigWithoutWarming() {
				e.cur.Store(&filterBox{def})
			}
		}
		update := func(gen uint64, tc *corev3.TypedExtensionConfig) {
			e.mu.Lock()
			defer e.mu.Unlock()
			if gen < e.gen {
				return
			}
			e.gen = gen
			if tc == nil {
				var next *filterBox
				if def != nil {
					next = &filterBox{def}
				}
				e.closeLocked(e.cur.Swap(next))
				return
			}
			f, err := build(df, tc)
			if err != nil {
				d.Logger.Warnf("http_connection_manager %q: extension config %q: %v; the previous configuration stays", h.cfg.StatPrefix, df.name, err)
				return
			}
			e.closeLocked(e.cur.Swap(&filterBox{f}))
		}
		cur, gen, cancel, err := d.ExtensionConfigs.WatchExtensionConfig(df.name, df.cd.GetConfigSource(), update)
		if err != nil {
			h.stopECDS()
			return fmt.Errorf("http_connection_manager %q: http_filters %q: %w", h.cfg.StatPrefix, df.name, err)
		}
		e.cancel = cancel
		if cur != nil {
			update(gen, cur)
		}
		h.filters = append(h.filters, nil)
		copy(h.filters[df.pos+1:], h.filters[df.pos:])
		h.filters[df.pos] = e
		h.ecds = append(h.ecds, e)
	}
	return nil
}

func checkType(allowed []string, u string) error {
	if len(allowed) == 0 {
		return nil
	}
	for _, a := range allowed {
		if a == u {
			return nil
		}
	}
	return fmt.Errorf("typed_config type %q is not one of config_discovery.type_urls %q", u, allowed)
}

// stopECDS ends h's ECDS subscriptions.
func (h *Handler) stopECDS() {
	for _, e := range h.ecds {
		if e.cancel != nil {
			e.cancel()
		}
	}
	h.ecds = nil
}
