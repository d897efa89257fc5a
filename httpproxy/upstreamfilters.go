package httpproxy

import (
	"fmt"
	"net/http"

	"github.com/legateproxy/legate/config"
	"github.com/legateproxy/legate/host"
	"github.com/legateproxy/legate/httpproxy/filter"
	"github.com/legateproxy/legate/httpproxy/route"
	"github.com/legateproxy/legate/pool"
)

// attemptFilters is a stream's state for the router's upstream filters
// (upstream_http_filters): what each upstream attempt's filters see and change. A stream
// makes it on its first attempt through a chain and keeps it for its next streams.
type attemptFilters struct {
	// filters are the chain the stream's attempts run (the cluster's or the router's); nil
	// when they run none.
	filters []filter.Filter
	x       filter.Exchange
	req     route.Request
	header  http.Header  // the attempt's request header, as the filters change it
	fields  []pool.Field // header flattened for the pool
	base    []pool.Field // the request's fields before the filters, restored after the attempt
	up      filter.Upstream
}

// buildUpstreamFilters makes the filters of the router's upstream_http_filters with the
// registry's factories, as the connection manager's own.
func (sh *shared) buildUpstreamFilters(h *Handler) error {
	for i, f := range h.cfg.Router.UpstreamFilters {
		factory, ok := sh.deps.Filters.Lookup(f.Name, f.TypedConfig)
		if !ok {
			return fmt.Errorf("http_connection_manager %q: router upstream_http_filters[%d] = %q: unknown HTTP filter", h.cfg.StatPrefix, i, f.Name)
		}
		inst, err := factory(f.TypedConfig, sh.filterContext(h.hcmPrefix, f.Name))
		if err != nil {
			return fmt.Errorf("http_connection_manager %q: router upstream_http_filters[%d]: %w", h.cfg.StatPrefix, i, err)
		}
		h.upFilters = append(h.upFilters, inst)
	}
	return nil
}

// clusterFilters are the upstream filters of one cluster configuration (its
// HttpProtocolOptions.http_filters), built with the connection manager's filter context on the
// first request that needs them.
type clusterFilters struct {
	cfg     *config.Cluster
	filters []filter.Filter
	err     error
}

// upstreamChain returns the upstream filters the request's attempts to cluster cfg run: the
// cluster's http_filters when it has any (they replace the router's, as in Envoy), else the
// router's upstream_http_filters. A cluster's chain is built once per cluster configuration
// and connection manager; the map keeps one per cluster name, so a cluster's updates replace
// their chain rather than pile up.
func (h *Handler) upstreamChain(cfg *config.Cluster) ([]filter.Filter, error) {
	if len(cfg.UpstreamHTTPFilters) == 0 {
		return h.upFilters, nil
	}
	h.clusterMu.Lock()
	defer h.clusterMu.Unlock()
	if cf := h.clusterChains[cfg.Name]; cf != nil && cf.cfg == cfg {
		return cf.filters, cf.err
	}
	cf := &clusterFilters{cfg: cfg}
	for i, f := range cfg.UpstreamHTTPFilters {
		factory, ok := h.sh.deps.Filters.Lookup(f.Name, f.TypedConfig)
		if !ok {
			cf.err = fmt.Errorf("cluster %q: http_filters[%d] = %q: unknown HTTP filter", cfg.Name, i, f.Name)
			break
		}
		inst, err := factory(f.TypedConfig, h.sh.filterContext(h.hcmPrefix, f.Name))
		if err != nil {
			cf.err = fmt.Errorf("cluster %q: http_filters[%d]: %w", cfg.Name, i, err)
			break
		}
		cf.filters = append(cf.filters, inst)
	}
	if h.clusterChains == nil {
		h.clusterChains = map[string]*clusterFilters{}
	}
	h.clusterChains[cfg.Name] = cf
	return cf.filters, cf.err
}

// startUpstreamFilters decides the upstream filters of the request's attempts to cluster cfg.
// A cluster chain that fails to build answers the request 500 (replied true): its filters'
// configuration is only built on use.
func (s *stream) startUpstreamFilters(cfg *config.Cluster, m *route.Match) (replied bool) {
	fs, err := s.h.upstreamChain(cfg)
	if err != nil {
		s.details = "upstream_filter_config_error"
		s.localReply(http.StatusInternalServerError, []byte(err.Error()), m)
		return true
	}
	if len(fs) == 0 {
		return false
	}
	if s.attempt == nil {
		s.attempt = &attemptFilters{header: http.Header{}}
	}
	s.attempt.filters = fs
	return false
}

// runUpstreamFilters runs the upstream filters for the attempt about to go to hst (Envoy's
// upstream filter chain, made per attempt after the host is picked): they see the request
// as the router built it, and the header changes they make go to this attempt only, its
// fields standing in for the request's until endUpstreamFilters. A filter's local reply ends
// the request (replied true).
func (s *stream) runUpstreamFilters(hst *host.Host, m *route.Match) (replied bool) {
	a := s.attempt
	clear(a.header)
	for _, f := range s.up.Header {
		k := http.CanonicalHeaderKey(f.Name)
		a.header[k] = append(a.header[k], f.Value)
	}
	a.req = s.req
	a.req.Header, a.req.Fill = a.header, nil
	a.req.Path, a.req.Authority = s.outPath, s.outAuthority
	a.up = filter.Upstream{Host: hst.Address(), Cluster: m.Cluster, Attempt: int(s.attempts)}
	a.x = filter.Exchange{Request: &a.req, Downstream: s, ClientIP: s.clientIP, Upstream: &a.up}
	for _, f := range a.filters {
		if r := f.OnRequest(&a.x); r != nil {
			s.flags |= r.Flags
			s.details = r.Details
			s.replyHeader = r.Header
			s.localReply(r.Status, []byte(r.Body), m)
			return true
		}
	}
	a.base = s.up.Header
	a.fields = pool.AppendHTTPHeader(a.fields[:0], a.header)
	s.up.Header = a.fields
	s.spellRequest()
	return false
}

// endUpstreamFilters gives the request back its own fields once an attempt is sent.
func (s *stream) endUpstreamFilters() {
	if s.attempt != nil && s.attempt.base != nil {
		s.up.Header, s.attempt.base = s.attempt.base, nil
	}
}

// upstreamFiltersOnResponse runs the upstream filters over the response headers of the
// attempt that answered, the last filter first, before the connection manager's filters.
func (s *stream) upstreamFiltersOnResponse() {
	a := s.attempt
	a.x.Status, a.x.ResponseLength = s.upResp.StatusCode, s.upResp.ContentLength
	for i := len(a.filters) - 1; i >= 0; i-- {
		a.filters[i].OnResponse(&a.x, s.resp)
	}
}
