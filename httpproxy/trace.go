package httpproxy

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"

	"github.com/legateproxy/legate/accesslog"
	"github.com/legateproxy/legate/httpproxy/route"
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
	cfg *tracing.Config
	// egress: the listener's traffic_direction is OUTBOUND (Envoy's egress operation): the
	// downstream span is a client span named "egress <host>" and decorators propagate on
	// requests rather than responses.
	egress bool
	stats  tracing.HCMStats
	reg    *stats.Registration
}

// startTracing builds h's tracer from the HCM tracing block.
func (sh *shared) startTracing(h *Handler, pb *hcmv3.HttpConnectionManager_Tracing, egress bool) error {
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
	cfg.Spawn = cfg.Spawn || h.cfg.Router.StartChildSpan
	t := &tracer{cfg: cfg, egress: egress}
	if d.Stats != nil {
		t.reg = d.Stats.Register(h.hcmPrefix+"tracing.", &t.stats)
	}
	h.trace = t
	return nil
}

func (h *Handler) stopTracing() {
	if t := h.trace; t != nil {
		t.cfg.Exporter.Close()
		if t.reg != nil {
			t.reg.Unregister()
		}
	}
}

// streamTrace is a stream's span. Every request of a connection manager with tracing has one,
// sampled or not, whose context goes to the upstream (as Envoy's tracers do: an unsampled
// context tells the next hop not to sample either); only a sampled span is exported.
type streamTrace struct {
	active  bool // the request has a span
	sampled bool // it is exported
	ctx     tracing.Context
	parent  [8]byte // the propagated parent span, zero for a root
	shared  bool    // the span shares the client's span id (Zipkin's shared_span_context)
	// route is the request's route when the table has decorators or route tracing (looked up
	// when the span starts, as Envoy has the route then); nil otherwise.
	route *route.Route
	// operation names the span instead of the default when set: the route's decorator, or
	// the x-envoy-decorator-operation header (an ingress request's, an egress response's).
	// propagate says it is the decorator's and goes out in x-envoy-decorator-operation.
	operation string
	propagate bool
	// child is the current upstream attempt's span (spawn_upstream_span), zero for none,
	// started at childStart; dst is where setTraceHeader writes.
	child      [8]byte
	childStart time.Time
	dst        http.Header
	// scratch formats context headers: a local array would escape through Inject's callback.
	scratch [64]byte
}

const hdrDecoratorOperation = "X-Envoy-Decorator-Operation"

// startTrace decides whether the request is sampled, starts its span and sends the span's
// context to the upstream in the provider's headers. A request with no span exported
// allocates nothing.
func (s *stream) startTrace() {
	t := s.h.trace
	hd := s.header()
	tr := &s.tr
	if s.h.routesTrace() {
		if m := s.h.route(&s.req); m != nil {
			tr.route = m.Route
		}
	}
	var sampling *tracing.Sampling
	if tr.route != nil && tr.route.Tracing != nil {
		sampling = &tr.route.Tracing.Sampling
	}
	reason, changed := t.cfg.Decide(tracing.Request{
		RequestID:     s.requestID,
		ClientTraceID: len(hd[hdrClientTraceID]) > 0,
		ForceTrace:    !s.edge && len(hd[hdrForceTrace]) > 0, // honoured on internal requests only
		Route:         sampling,
	}, &t.stats)
	if changed {
		var b [36]byte
		copy(b[:], s.requestID)
		b[14] = reason.Nibble()
		s.requestID = s.arenaString(b[:])
		s.setReqHeader(hdrRequestID, s.requestID)
	}
	in, hasParent := t.cfg.Extract(hd)
	tr.ctx, tr.parent = t.cfg.Begin(in, hasParent, reason != tracing.NotTraceable)
	tr.shared = hasParent && t.cfg.Format == tracing.B3 && t.cfg.SharedContext
	tr.active, tr.sampled = true, tr.ctx.Sampled
	tr.dst = s.req.Header
	t.cfg.Inject(tr.ctx, tr.parent, tr.scratch[:0], s.setTraceHeader)
	s.decorateRequest()
}

// routesTrace reports whether the current route table has decorators or route tracing.
func (h *Handler) routesTrace() bool {
	if t := h.table.Load(); t != nil {
		return t.Traces()
	}
	return h.scopes.Load() != nil // scoped routes: look the route up
}

// decorateRequest applies the route's decorator (Envoy's traceRequest): an egress request
// carries the decorator's operation to the next hop in x-envoy-decorator-operation when it
// propagates; on an ingress request that header, sent by the previous hop, names the span
// instead and is not forwarded.
func (s *stream) decorateRequest() {
	tr := &s.tr
	if d := tr.route; d != nil && d.Decorator != nil {
		tr.operation, tr.propagate = d.Decorator.Operation, d.Decorator.Propagate
	}
	hd := s.req.Header
	if s.h.trace.egress {
		if tr.operation != "" && tr.propagate {
			s.setReqHeader(hdrDecoratorOperation, tr.operation)
		}
		return
	}
	if v, ok := hd[hdrDecoratorOperation]; ok {
		if len(v) > 0 && v[0] != "" {
			tr.operation, tr.propagate = v[0], false
		}
		delete(hd, hdrDecoratorOperation)
	}
}

// decorateResponse is decorateRequest's other half, on the response headers: an ingress
// response tells the previous hop the decorator's operation (when it propagates and no
// request header overrode it); an egress response's x-envoy-decorator-operation, from the
// upstream, names the span instead and is not forwarded.
func (s *stream) decorateResponse() {
	tr := &s.tr
	if !s.h.trace.egress {
		if tr.operation != "" && tr.propagate {
			s.setRespHeader(hdrDecoratorOperation, tr.operation)
		}
		return
	}
	if v, ok := s.resp[hdrDecoratorOperation]; ok {
		if len(v) > 0 && v[0] != "" {
			tr.operation, tr.propagate = strings.Clone(v[0]), false
		}
		delete(s.resp, hdrDecoratorOperation)
	}
}

// setTraceHeader sets a trace context header in s.tr.dst.
func (s *stream) setTraceHeader(key string, value []byte) {
	s.setHeader(s.tr.dst, key, s.arenaString(value))
}

// startUpstreamSpan (spawn_upstream_span) starts the router's span for the first attempt,
// child of the downstream one, and gives the upstream request hd its context instead.
func (s *stream) startUpstreamSpan(hd http.Header) {
	tr := &s.tr
	tr.child, tr.childStart = tracing.NewSpanID(), s.h.sh.deps.Now()
	tr.dst = hd
	s.h.trace.cfg.Inject(tr.childContext(), tr.ctx.SpanID, tr.scratch[:0], s.setTraceHeader)
}

func (tr *streamTrace) childContext() tracing.Context {
	c := tr.ctx
	c.SpanID = tr.child
	return c
}

// retryUpstreamSpan ends the span of an attempt that is retried (status 0 when it got no
// response) and starts the next attempt's, rewriting the context the upstream request
// carries: Envoy gives each attempt a span of its own.
func (s *stream) retryUpstreamSpan(status int) {
	tr := &s.tr
	if tr.child == [8]byte{} {
		return
	}
	now := s.h.sh.deps.Now()
	s.finishUpstreamSpan(now, status, s.flags)
	tr.child, tr.childStart = tracing.NewSpanID(), now
	s.h.trace.cfg.Inject(tr.childContext(), tr.ctx.SpanID, tr.scratch[:0], s.replaceUpstreamField)
}

// replaceUpstreamField sets the value of the upstream request's field key, already flattened
// into s.up.Header (its name may have been respelled).
func (s *stream) replaceUpstreamField(key string, value []byte) {
	for i := range s.up.Header {
		if f := &s.up.Header[i]; strings.EqualFold(f.Name, key) {
			f.Value = s.arenaString(value)
			return
		}
	}
}

// finishUpstreamSpan hands the current attempt's span, which ended at end with status (0:
// no response), to the exporter.
func (s *stream) finishUpstreamSpan(end time.Time, status int, flags accesslog.ResponseFlags) {
	tr := &s.tr
	sp := &tracing.Span{Context: tr.childContext(), Parent: tr.ctx.SpanID, Client: true, Name: "router " + s.cluster + " egress", Start: tr.childStart, End: end}
	sp.Tags = append(make([]tracing.Tag, 0, 12),
		tracing.Tag{Key: "component", Value: "proxy"},
		tracing.Tag{Key: "http.protocol", Value: s.proto},
		tracing.Tag{Key: "upstream_cluster", Value: s.cluster},
		tracing.Tag{Key: "upstream_cluster.name", Value: s.cluster},
		tracing.Tag{Key: "upstream_address", Value: s.upstream},
		tracing.Tag{Key: "peer.address", Value: s.upstream},
		tracing.Tag{Key: "http.status_code", Value: strconv.Itoa(status)},
		tracing.Tag{Key: "response_flags", Value: flags.String()},
	)
	if status == 0 || status >= 500 {
		sp.Error = true
		sp.Tags = append(sp.Tags, tracing.Tag{Key: "error", Value: "true"})
	}
	sp.Tags = s.appendCustomTags(sp.Tags)
	ownTagValues(sp.Tags)
	sp.Name = strings.Clone(sp.Name)
	s.h.trace.cfg.Exporter.Export(sp)
}

// spanName is the downstream span's name: the decorator's (or x-envoy-decorator-operation's)
// operation; otherwise, as Envoy names it, the request's host for Zipkin, and "ingress" or
// "egress <host>" (by the listener's traffic_direction) for OpenTelemetry.
func (s *stream) spanName() string {
	switch {
	case s.tr.operation != "":
		return strings.Clone(s.tr.operation)
	case s.h.trace.cfg.Format == tracing.B3:
		return strings.Clone(s.req.Authority)
	case s.h.trace.egress:
		return "egress " + s.req.Authority
	}
	return "ingress"
}

// finishTrace hands the downstream span, with Envoy's tags, to the exporter (after the
// router's span, if any). An unsampled span is dropped.
func (s *stream) finishTrace(end time.Time) {
	tr := &s.tr
	tr.active = false
	if !tr.sampled {
		return
	}
	if tr.child != [8]byte{} {
		s.finishUpstreamSpan(end, s.status, s.flags)
		tr.child = [8]byte{}
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
	sp := &tracing.Span{Context: tr.ctx, Parent: tr.parent, Shared: tr.shared, Client: s.h.trace.egress, Name: s.spanName(), Start: s.start, End: end}
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
	sp.Tags = s.appendCustomTags(sp.Tags)
	ownTagValues(sp.Tags)
	if cfg.Verbose {
		sp.Events = s.timingEvents(end)
	}
	cfg.Exporter.Export(sp)
}

// timingEvents are a verbose span's events: the times Legate records, in order.
func (s *stream) timingEvents(end time.Time) []tracing.Event {
	ev := make([]tracing.Event, 0, 4)
	if d := s.requestDuration(); d > 0 {
		ev = append(ev, tracing.Event{Time: s.start.Add(d), Name: tracing.EventLastDownstreamRx})
	}
	if s.upTx != 0 {
		t := s.timeAt(s.upTx)
		// A request without a body is sent upstream at the reading of its head's arrival
		// (stream.startIsNow), which recorded's 1 ns of request duration would put first.
		if len(ev) > 0 && t.Before(ev[0].Time) {
			t = ev[0].Time
		}
		ev = append(ev, tracing.Event{Time: t, Name: tracing.EventFirstUpstreamTx})
	}
	if s.upRx != 0 {
		ev = append(ev, tracing.Event{Time: s.timeAt(s.upRx), Name: tracing.EventFirstUpstreamRx})
	}
	return append(ev, tracing.Event{Time: end, Name: tracing.EventLastDownstreamTx})
}

// appendCustomTags adds the connection manager's custom tags, then the route's (which win
// over a connection manager tag of the same name, as Envoy merges them).
func (s *stream) appendCustomTags(tags []tracing.Tag) []tracing.Tag {
	var routeTags []tracing.CustomTag
	if r := s.tr.route; r != nil && r.Tracing != nil {
		routeTags = r.Tracing.Tags
	}
	for _, ct := range s.h.trace.cfg.Tags {
		if !hasTag(routeTags, ct.Name) {
			tags = append(tags, tracing.Tag{Key: ct.Name, Value: s.customTagValue(&ct)})
		}
	}
	for _, ct := range routeTags {
		tags = append(tags, tracing.Tag{Key: ct.Name, Value: s.customTagValue(&ct)})
	}
	return tags
}

// metadataTag reads a metadata tag from the request's, route's, cluster's or host's metadata.
func (s *stream) metadataTag(m *tracing.MetadataTag) (string, bool) {
	switch m.Kind {
	case tracing.RouteMetadata:
		if r := s.traceRouteForTags(); r != nil {
			return m.Lookup(r.Metadata)
		}
		return "", false
	case tracing.ClusterMetadata:
		if c := s.h.sh.deps.Clusters.Get(s.cluster); c != nil {
			return m.Lookup(c.Config().Metadata.GetFilterMetadata())
		}
		return "", false
	case tracing.HostMetadata:
		if s.upHost != nil {
			return s.upHost.Metadata(m.Path[0])
		}
		return "", false
	}
	return m.Lookup(s.fx.Metadata)
}

// traceRouteForTags is the request's route for route metadata tags: the one the span started
// with, else the one the request was routed by.
func (s *stream) traceRouteForTags() *route.Route {
	if s.tr.route != nil {
		return s.tr.route
	}
	if s.match != nil {
		return s.match.Route
	}
	return nil
}

func hasTag(tags []tracing.CustomTag, name string) bool {
	for _, t := range tags {
		if t.Name == name {
			return true
		}
	}
	return false
}

// customTagValue is a custom tag's value for this request.
func (s *stream) customTagValue(ct *tracing.CustomTag) string {
	if m := ct.Metadata; m != nil {
		if v, ok := s.metadataTag(m); ok {
			return v
		}
		return ct.Value
	}
	if ct.Header != "" {
		if hv := http.Header(s.req.Header).Get(ct.Header); hv != "" {
			return hv
		}
	}
	return ct.Value
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
