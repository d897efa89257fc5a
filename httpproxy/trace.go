package httpproxy

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	routerv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"

	"github.com/legateproxy/legate/config"
	"github.com/legateproxy/legate/stats"
	"github.com/legateproxy/legate/tracing"
)

const (
	hdrClientTraceID  = "X-Client-Trace-Id"
	hdrForceTrace     = "X-Envoy-Force-Trace"
	hdrDownstreamName = "X-Envoy-Downstream-Service-Cluster"
)

// tracer is a connection manager's tracing: its configuration, its exporter and its
// http.<prefix>.tracing.* counters.
type tracer struct {
	cfg   *tracing.Config
	stats tracing.HCMStats
	reg   *stats.Registration
}

// startTracing builds h's tracer from the HCM tracing block.
func (sh *shared) startTracing(h *Handler, pb *hcmv3.HttpConnectionManager_Tracing) error {
	d := sh.deps.Tracing
	if d.Dial == nil {
		return fmt.Errorf("http_connection_manager %q: tracing: no cluster dialer; not implemented by Legate here", h.cfg.StatPrefix)
	}
	if d.Stats == nil {
		d.Stats = sh.deps.Stats
	}
	if d.Runtime == nil {
		d.Runtime = sh.deps.Runtime
	}
	if d.ClusterExists == nil {
		d.ClusterExists = sh.deps.Clusters.Has
	}
	cfg, err := tracing.FromProto("tracing", pb, d)
	if err != nil {
		return fmt.Errorf("http_connection_manager %q: %w", h.cfg.StatPrefix, err)
	}
	cfg.Spawn = cfg.Spawn || routerStartsChildSpan(h.cfg)
	t := &tracer{cfg: cfg}
	if d.Stats != nil {
		t.reg = d.Stats.Register(h.hcmPrefix+"tracing.", &t.stats)
	}
	h.trace = t
	return nil
}

// routerStartsChildSpan reads the router's start_child_span, which asks for the same upstream
// span as spawn_upstream_span.
func routerStartsChildSpan(cfg *config.HTTPConnectionManager) bool {
	for _, f := range cfg.HTTPFilters {
		var r routerv3.Router
		if f.IsRouter() && f.TypedConfig != nil && f.TypedConfig.UnmarshalTo(&r) == nil {
			return r.GetStartChildSpan()
		}
	}
	return false
}

func (h *Handler) stopTracing() {
	if t := h.trace; t != nil {
		t.cfg.Exporter.Close()
		if t.reg != nil {
			t.reg.Unregister()
		}
	}
}

// startTrace decides whether the request is traced and, when it is (or carries a parent),
// starts its span and sends its context to the upstream in the provider's headers. A request
// neither sampled nor with a parent allocates nothing.
func (s *stream) startTrace() {
	t := s.h.trace
	hd := s.req.Header
	s.traced = false
	reason, changed := t.cfg.Decide(tracing.Request{
		RequestID:     s.requestID,
		ClientTraceID: len(hd[hdrClientTraceID]) > 0,
		ForceTrace:    !s.edge && len(hd[hdrForceTrace]) > 0, // honoured on internal requests only
	}, &t.stats)
	if changed {
		var b [36]byte
		copy(b[:], s.requestID)
		b[14] = reason.Nibble()
		s.requestID = s.arenaString(b[:])
		s.setReqHeader(hdrRequestID, s.requestID)
	}
	in, hasParent := t.cfg.Extract(hd)
	if reason == tracing.NotTraceable && !hasParent {
		return
	}
	s.tctx, s.tparent = t.cfg.Begin(in, hasParent, reason != tracing.NotTraceable)
	s.tshared = hasParent && t.cfg.Format == tracing.B3 && t.cfg.SharedContext
	s.traced = s.tctx.Sampled
	var b [64]byte
	s.traceDst = s.req.Header
	t.cfg.Inject(s.tctx, s.tparent, b[:0], s.setTraceHeader)
}

// setTraceHeader sets a trace context header in s.traceDst.
func (s *stream) setTraceHeader(key string, value []byte) {
	s.setHeader(s.traceDst, key, s.arenaString(value))
}

// startUpstreamSpan (spawn_upstream_span) starts the router's span, child of the downstream
// one, and gives the upstream request hd its context instead.
func (s *stream) startUpstreamSpan(hd http.Header) {
	s.tchild = tracing.NewSpanID()
	s.tchildStart = s.h.sh.deps.Now()
	child := s.tctx
	child.SpanID = s.tchild
	var b [64]byte
	s.traceDst = hd
	s.h.trace.cfg.Inject(child, s.tctx.SpanID, b[:0], s.setTraceHeader)
}

// finishUpstreamSpan hands the router's span to the exporter.
func (s *stream) finishUpstreamSpan(end time.Time) {
	ctx := s.tctx
	ctx.SpanID = s.tchild
	sp := &tracing.Span{Context: ctx, Parent: s.tctx.SpanID, Client: true, Name: "router " + s.cluster + " egress", Start: s.tchildStart, End: end}
	sp.Tags = append(make([]tracing.Tag, 0, 8),
		tracing.Tag{Key: "component", Value: "proxy"},
		tracing.Tag{Key: "http.protocol", Value: s.proto},
		tracing.Tag{Key: "upstream_cluster", Value: s.cluster},
		tracing.Tag{Key: "upstream_cluster.name", Value: s.cluster},
		tracing.Tag{Key: "upstream_address", Value: s.upstream},
		tracing.Tag{Key: "http.status_code", Value: strconv.Itoa(s.status)},
	)
	if s.status == 0 || s.status >= 500 {
		sp.Error = true
		sp.Tags = append(sp.Tags, tracing.Tag{Key: "error", Value: "true"})
	}
	ownTagValues(sp.Tags)
	sp.Name = strings.Clone(sp.Name)
	s.h.trace.cfg.Exporter.Export(sp)
}

// finishTrace hands the downstream span, with Envoy's tags, to the exporter (after the
// router's span, if any).
func (s *stream) finishTrace(end time.Time) {
	if s.tchild != [8]byte{} {
		s.finishUpstreamSpan(end)
		s.tchild = [8]byte{}
	}
	cfg := s.h.trace.cfg
	hd := s.req.Header
	or := func(v string) string {
		if v == "" {
			return "-"
		}
		return v
	}
	path := s.req.Path
	if len(path) > cfg.MaxPathTagLength {
		path = path[:cfg.MaxPathTagLength]
	}
	sp := &tracing.Span{Context: s.tctx, Parent: s.tparent, Shared: s.tshared, Name: "ingress", Start: s.start, End: end}
	sp.Tags = append(make([]tracing.Tag, 0, 20),
		tracing.Tag{Key: "component", Value: "proxy"},
		tracing.Tag{Key: "node_id", Value: cfg.NodeID},
		tracing.Tag{Key: "zone", Value: cfg.Zone},
		tracing.Tag{Key: "guid:x-request-id", Value: s.requestID},
		tracing.Tag{Key: "http.url", Value: s.req.Scheme + "://" + s.req.Authority + path},
		tracing.Tag{Key: "http.method", Value: s.req.Method},
		tracing.Tag{Key: "downstream_cluster", Value: or(http.Header(hd).Get(hdrDownstreamName))},
		tracing.Tag{Key: "user_agent", Value: or(http.Header(hd).Get("User-Agent"))},
		tracing.Tag{Key: "http.protocol", Value: s.proto},
		tracing.Tag{Key: "peer.address", Value: s.remote},
	)
	if v := http.Header(hd).Get(hdrClientTraceID); v != "" {
		sp.Tags = append(sp.Tags, tracing.Tag{Key: "guid:x-client-trace-id", Value: v})
	}
	sp.Tags = append(sp.Tags,
		tracing.Tag{Key: "request_size", Value: strconv.FormatInt(s.bytesIn, 10)},
		tracing.Tag{Key: "response_size", Value: strconv.FormatInt(s.bytesOut, 10)},
	)
	if s.cluster != "" {
		sp.Tags = append(sp.Tags,
			tracing.Tag{Key: "upstream_cluster", Value: s.cluster},
			tracing.Tag{Key: "upstream_cluster.name", Value: s.cluster},
		)
	}
	if s.upstream != "" {
		sp.Tags = append(sp.Tags, tracing.Tag{Key: "upstream_address", Value: s.upstream})
	}
	sp.Tags = append(sp.Tags,
		tracing.Tag{Key: "http.status_code", Value: strconv.Itoa(s.status)},
		tracing.Tag{Key: "response_flags", Value: s.flags.String()},
	)
	if s.status == 0 || s.status >= 500 {
		sp.Error = true
		sp.Tags = append(sp.Tags, tracing.Tag{Key: "error", Value: "true"})
	}
	for _, ct := range cfg.Tags {
		v := ct.Value
		if ct.Header != "" {
			if hv := http.Header(hd).Get(ct.Header); hv != "" {
				v = hv
			}
		}
		sp.Tags = append(sp.Tags, tracing.Tag{Key: ct.Name, Value: v})
	}
	ownTagValues(sp.Tags)
	cfg.Exporter.Export(sp)
}

// ownTagValues copies the tag values into one string of their own: many are the stream's
// arena or header strings, which the next request on the stream overwrites while the exporter
// still holds the span.
func ownTagValues(tags []tracing.Tag) {
	n := 0
	for _, t := range tags {
		n += len(t.Value)
	}
	var b strings.Builder
	b.Grow(n)
	for _, t := range tags {
		b.WriteString(t.Value)
	}
	all, off := b.String(), 0
	for i := range tags {
		l := len(tags[i].Value)
		tags[i].Value = all[off : off+l]
		off += l
	}
}
