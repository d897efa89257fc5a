package httpproxy

import (
	"fmt"
	"io"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"google.golang.org/protobuf/proto"

	"github.com/legateproxy/legate/accesslog"
	"github.com/legateproxy/legate/config"
	"github.com/legateproxy/legate/httpproxy/filter"
)

// ExtensionConfigProvider serves the configurations of HTTP filters discovered over ECDS
// (http_filters[].config_discovery); ECDS (ecds_watch.go) implements it over the xDS client.
//
// WatchExtensionConfig subscribes to the TypedExtensionConfig called name from
// cd.config_source and returns the current one (nil until it arrives, and nil when it does
// not suit this filter: its type is not in cd.type_urls or check refuses it), its generation
// and cancel (which may be called more than once). Every later configuration must pass
// cd.type_urls and check — of every filter sharing the subscription — before any update
// sees it; one that does not is rejected (NACKed) and the previous one stays. check may keep
// what it built for the update that follows and return discard (nil: nothing), which the
// provider calls instead of update when the configuration is rejected after check accepted
// it (another filter refused it). update is called with each accepted configuration (gen
// grows) and with nil when the initial fetch times out or fails or the resource is removed.
// check, discard and update run on another goroutine, without locks the caller could hold,
// and must not block.
type ExtensionConfigProvider interface {
	WatchExtensionConfig(name string, cd *corev3.ExtensionConfigSource,
		check func(tc *corev3.TypedExtensionConfig) (discard func(), err error),
		update func(gen uint64, tc *corev3.TypedExtensionConfig)) (*corev3.TypedExtensionConfig, uint64, func(), error)
}

// ecdsFilter is a filter whose configuration ECDS delivers and replaces (Envoy's dynamic
// filter config provider). A stream uses the instance current when it starts for all of its
// calls, stream hooks included (stream.pinFilters); a replaced instance holding resources is
// closed at once. Without a configuration (none arrived, or none suits this filter, and no
// default_config) requests get 500 with the NFCF response flag, as in Envoy.
//
// The provider's check builds the instance a new configuration would serve (so a
// configuration the filter's factory refuses is NACKed) and keeps it for the update that
// follows. If another filter sharing the subscription rejects that configuration, the
// provider calls the check's discard and the instance is closed at once.
//
// Safe for concurrent use: streams load cur; check, update and Close hold mu.
type ecdsFilter struct {
	cur atomic.Pointer[filterBox]
	// build makes an instance of a configuration (its type is checked again, for updates
	// that did not pass check).
	build func(tc *corev3.TypedExtensionConfig) (filter.Filter, error)
	// def is the default_config's instance; nil without one. It is never closed here: it may
	// serve again after a removal.
	def filter.Filter
	// warn logs a configuration update refuses.
	warn func(err error)

	mu      sync.Mutex // guards gen, pending, closed and cancel; serialises swaps so an older configuration never wins
	gen     uint64
	pending *builtConfig // built by check, waiting for its update
	closed  bool
	cancel  func()
}

type filterBox struct{ f filter.Filter }

// builtConfig is an instance built by check for the configuration tc.
type builtConfig struct {
	tc *corev3.TypedExtensionConfig
	f  filter.Filter
}

// noConfigFilter stands in for an ECDS filter without a configuration.
type noConfigFilter struct{}

func (noConfigFilter) OnRequest(*filter.Exchange) *filter.Reply {
	return &filter.Reply{Status: http.StatusInternalServerError, Flags: accesslog.NoFilterConfigFound, Details: "filter_config_not_found"}
}

func (noConfigFilter) OnResponse(*filter.Exchange, http.Header) {}

// current returns the instance serving now: the configured one or noConfigFilter.
func (e *ecdsFilter) current() filter.Filter {
	if b := e.cur.Load(); b != nil {
		return b.f
	}
	return noConfigFilter{}
}

// OnRequest and OnResponse serve calls made outside a pinned stream (a response sent before
// the stream reached its filters); streams call the pinned instance directly.
func (e *ecdsFilter) OnRequest(x *filter.Exchange) *filter.Reply { return e.current().OnRequest(x) }

func (e *ecdsFilter) OnResponse(x *filter.Exchange, h http.Header) { e.current().OnResponse(x, h) }

// pinFilters returns h's filters for one stream: each ECDS filter replaced by its instance
// current now, so that a configuration arriving mid-stream does not mix instances within the
// stream (its OnRequest, OnResponse and filter.Stream all come from one instance). The slice
// is the stream's own, reused from stream to stream.
func (s *stream) pinFilters(fs []filter.Filter) []filter.Filter {
	s.chain = s.chain[:0]
	for _, f := range fs {
		if e, ok := f.(*ecdsFilter); ok {
			f = e.current()
		}
		s.chain = append(s.chain, f)
	}
	return s.chain
}

// check builds the instance tc would serve and keeps it for update; an error rejects tc.
// discard closes that instance if it is still waiting (tc was rejected after all).
func (e *ecdsFilter) check(tc *corev3.TypedExtensionConfig) (discard func(), err error) {
	f, err := e.build(tc)
	if err != nil {
		return nil, err
	}
	p := &builtConfig{tc: tc, f: f}
	e.mu.Lock()
	old := e.pending
	if e.closed {
		old, e.pending = p, nil
	} else {
		e.pending = p
	}
	e.mu.Unlock()
	if old != nil {
		e.closeInstance(old.f)
	}
	return func() { e.discard(p) }, nil
}

// discard closes p, built by check, unless update took it or another replaced it.
func (e *ecdsFilter) discard(p *builtConfig) {
	e.mu.Lock()
	mine := e.pending == p
	if mine {
		e.pending = nil
	}
	e.mu.Unlock()
	if mine {
		e.closeInstance(p.f)
	}
}

// update installs configuration gen: tc's instance (the one check built, or a new one), or
// the default (nil when there is none) when tc is nil.
func (e *ecdsFilter) update(gen uint64, tc *corev3.TypedExtensionConfig) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed || gen < e.gen {
		return
	}
	e.gen = gen
	next := e.def
	if tc != nil {
		if p := e.pending; p != nil && proto.Equal(p.tc, tc) {
			next, e.pending = p.f, nil
		} else {
			f, err := e.build(tc)
			if err != nil {
				e.warn(err)
				return
			}
			next = f
		}
	}
	var box *filterBox
	if next != nil {
		box = &filterBox{next}
	}
	if old := e.cur.Swap(box); old != nil {
		e.closeInstance(old.f)
	}
}

// Close ends the filter: its subscription, and the instances holding resources (io.Closer),
// as the connection manager closes its filters when their configuration goes away. Streams
// already running keep their instance.
func (e *ecdsFilter) Close() error {
	e.stop()
	e.mu.Lock()
	e.closed = true
	p := e.pending
	e.pending = nil
	old := e.cur.Swap(nil)
	e.mu.Unlock()
	if p != nil {
		e.closeInstance(p.f)
	}
	if old != nil {
		e.closeInstance(old.f)
	}
	return nil
}

// stop ends the subscription; later calls do nothing.
func (e *ecdsFilter) stop() {
	e.mu.Lock()
	cancel := e.cancel
	e.cancel = nil
	e.mu.Unlock()
	if cancel != nil {
		cancel()
	}
}

// closeInstance closes an instance that holds resources, unless it is the default_config's.
func (e *ecdsFilter) closeInstance(f filter.Filter) {
	if f == e.def {
		return
	}
	if c, ok := f.(io.Closer); ok {
		c.Close()
	}
}

// startECDS subscribes the discovered filters of h and inserts them at their positions. A
// default_config must have one of config_discovery.type_urls and build, or the connection
// manager fails to load; it serves until the first configuration arrives (the listener waits
// for that unless apply_default_config_without_warming, see xds), and again after an
// initial fetch timeout or failure, a removal, or when the subscription's configuration does
// not suit this filter. Later configurations that do not suit it are rejected by the
// provider.
func (sh *shared) startECDS(h *Handler, list []config.DiscoveredFilter) error {
	d := &sh.deps
	if d.ExtensionConfigs == nil {
		return fmt.Errorf("http_connection_manager %q: http_filters %q: config_discovery needs the xDS client", h.cfg.StatPrefix, list[0].Name)
	}
	for _, df := range list {
		fctx := sh.filterContext(h.hcmPrefix, df.Name)
		e := &ecdsFilter{
			build: func(tc *corev3.TypedExtensionConfig) (filter.Filter, error) {
				f, err := buildDiscovered(d.Filters, fctx, df.Source.GetTypeUrls(), tc)
				if err != nil {
					return nil, fmt.Errorf("http_connection_manager %q: http_filters %q: %w", h.cfg.StatPrefix, df.Name, err)
				}
				return f, nil
			},
			warn: func(err error) {
				d.Logger.Warnf("extension config %q: %v; the previous configuration stays", df.Name, err)
			},
		}
		if dc := df.Source.GetDefaultConfig(); dc != nil {
			f, err := buildDiscovered(d.Filters, fctx, df.Source.GetTypeUrls(), &corev3.TypedExtensionConfig{Name: df.Name, TypedConfig: dc})
			if err != nil {
				h.stopECDS()
				return fmt.Errorf("http_connection_manager %q: http_filters %q: config_discovery.default_config: %w", h.cfg.StatPrefix, df.Name, err)
			}
			e.def = f
			e.cur.Store(&filterBox{f})
		}
		cur, gen, cancel, err := d.ExtensionConfigs.WatchExtensionConfig(df.Name, df.Source, e.check, e.update)
		if err != nil {
			if c, ok := e.def.(io.Closer); ok {
				c.Close()
			}
			h.stopECDS()
			return fmt.Errorf("http_connection_manager %q: http_filters %q: %w", h.cfg.StatPrefix, df.Name, err)
		}
		e.cancel = cancel
		if cur != nil {
			e.update(gen, cur)
		}
		h.filters = append(h.filters, nil)
		copy(h.filters[df.Pos+1:], h.filters[df.Pos:])
		h.filters[df.Pos] = e
		h.filterNames = slices.Insert(h.filterNames, df.Pos, df.Name)
		h.ecds = append(h.ecds, e)
	}
	return nil
}

// CheckDiscoveredFilter returns a check of HTTP filter configurations discovered over ECDS
// as the connection managers' filters make them: the type must have a factory in filters,
// which must accept the configuration (the instance it builds is closed at once). The server
// hands it to the xDS client (xds.Config.ExtensionCheck), so that the configuration a
// warming listener waits for is NACKed when its filter would refuse it. type_urls are the
// caller's to check. Safe for concurrent use once filters is filled.
func CheckDiscoveredFilter(filters *filter.Registry, fctx *filter.Context) func(tc *corev3.TypedExtensionConfig) error {
	return func(tc *corev3.TypedExtensionConfig) error {
		f, err := buildDiscovered(filters, fctx, nil, tc)
		if err != nil {
			return err
		}
		if c, ok := f.(io.Closer); ok {
			c.Close()
		}
		return nil
	}
}

// buildDiscovered builds the filter of a discovered configuration: its type must be one of
// typeURLs (none: any) and have a registered factory, which must accept it.
func buildDiscovered(filters *filter.Registry, fctx *filter.Context, typeURLs []string, tc *corev3.TypedExtensionConfig) (filter.Filter, error) {
	if err := checkType(typeURLs, tc.GetTypedConfig().GetTypeUrl()); err != nil {
		return nil, err
	}
	factory, ok := filters.Lookup(tc.GetName(), tc.GetTypedConfig())
	if !ok {
		return nil, fmt.Errorf("typed_config type %q: unknown HTTP filter", tc.GetTypedConfig().GetTypeUrl())
	}
	return factory(tc.GetTypedConfig(), fctx)
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

// stopECDS ends h's ECDS subscriptions. h.ecds itself stays: streams read it.
func (h *Handler) stopECDS() {
	for _, e := range h.ecds {
		e.stop()
	}
}
