package httpproxy

import (
	"fmt"
	"net/http"

	"github.com/legateproxy/legate/host"
	"github.com/legateproxy/legate/httpproxy/filter"
	"github.com/legateproxy/legate/httpproxy/route"
	"github.com/legateproxy/legate/pool"
)

// attemptFilters is a stream's state for the router's upstream filters
// (upstream_http_filters): what each upstream attempt's filters see and change. A stream
// makes it on its first attempt through a chain and keeps it for its next streams.
type attemptFilters struct {
	x      filter.Exchange
	req    route.Request
	header http.Header  // the attempt's request header, as the filters change it
	fields []pool.Field // header flattened for the pool
	base   []pool.Field // the request's fields before the filters, restored after the attempt
	up     filter.Upstream
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

// runUpstreamFilters runs the upstream filters for the attempt about to go to hst (Envoy's
// upstream filter chain, made per attempt after the host is picked): they see the request
// as the router built it, and the header changes they make go to this attempt only, its
// fields standing in for the request's until endUpstreamFilters. A filter's local reply ends
// the request (replied true).
func (s *stream) runUpstreamFilters(hst *host.Host, m *route.Match) (replied bool) {
	a := s.attempt
	if a == nil {
		a = &attemptFilters{header: http.Header{}}
		s.attempt = a
	}
	clear(a.header)
	for _, f := range s.up.Header {
		k := http.CanonicalHeaderKey(f.Name)
		a.header[k] = append(a.header[k], f.Value)
	}
	a.req = s.req
	a.req.Header = a.header
	a.req.Path, a.req.Authority = s.outPath, s.outAuthority
	a.up = filter.Upstream{Host: hst.Address(), Cluster: m.Cluster, Attempt: int(s.attempts)}
	a.x = filter.Exchange{Request: &a.req, Downstream: s, ClientIP: s.clientIP, Upstream: &a.up}
	for _, f := range s.h.upFilters {
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
	for i := len(s.h.upFilters) - 1; i >= 0; i-- {
		s.h.upFilters[i].OnResponse(&a.x, s.resp)
	}
}
