package tracing

import (
	"encoding/hex"
	"net/http"
	"strings"
)

// Format is how a provider carries the trace context in request headers.
type Format uint8

const (
	W3C Format = iota // traceparent (OpenTelemetry)
	B3                // x-b3-* headers, or the single b3 header (Zipkin)
)

// Header names as the connection manager keeps them (canonical).
const (
	hdrTraceparent = "Traceparent"
	hdrB3          = "B3"
	hdrB3TraceID   = "X-B3-Traceid"
	hdrB3SpanID    = "X-B3-Spanid"
	hdrB3Parent    = "X-B3-Parentspanid"
	hdrB3Sampled   = "X-B3-Sampled"
	hdrB3Flags     = "X-B3-Flags"
)

// Incoming is the trace context a request carries.
type Incoming struct {
	Context
	Parent     [8]byte // the incoming span's own parent (B3), zero when none
	SampledSet bool    // the request says whether it is sampled
}

// Extract reads the request's trace context in the provider's format; ok is false when there
// is none (or it is malformed: the request then starts a new trace).
func (c *Config) Extract(h http.Header) (in Incoming, ok bool) {
	if c.Format == W3C {
		v := h[hdrTraceparent]
		if len(v) == 0 {
			return in, false
		}
		in.Context, ok = ParseTraceparent(v[0])
		in.SampledSet = ok
		return in, ok
	}
	if v := h[hdrB3]; len(v) > 0 {
		return parseB3Single(v[0])
	}
	tid, sid := first(h[hdrB3TraceID]), first(h[hdrB3SpanID])
	if tid == "" || sid == "" || !parseTraceID(&in.TraceID, tid) || !parseSpanID(&in.SpanID, sid) {
		return in, false
	}
	if p := first(h[hdrB3Parent]); p != "" && !parseSpanID(&in.Parent, p) {
		return in, false
	}
	switch s := first(h[hdrB3Sampled]); {
	case first(h[hdrB3Flags]) == "1":
		in.Sampled, in.SampledSet = true, true
	case s == "1" || s == "true":
		in.Sampled, in.SampledSet = true, true
	case s == "0" || s == "false":
		in.SampledSet = true
	}
	return in, true
}

// parseB3Single reads b3: {traceid}-{spanid}[-{sampled}[-{parentspanid}]], or a bare sampling
// state, which carries no context.
func parseB3Single(v string) (in Incoming, ok bool) {
	parts := strings.Split(v, "-")
	if len(parts) < 2 || !parseTraceID(&in.TraceID, parts[0]) || !parseSpanID(&in.SpanID, parts[1]) {
		return in, false
	}
	if len(parts) > 2 {
		switch parts[2] {
		case "1", "d":
			in.Sampled, in.SampledSet = true, true
		case "0":
			in.SampledSet = true
		default:
			return in, false
		}
	}
	if len(parts) > 3 && !parseSpanID(&in.Parent, parts[3]) {
		return in, false
	}
	return in, len(parts) <= 4
}

func first(v []string) string {
	if len(v) == 0 {
		return ""
	}
	return v[0]
}

// parseTraceID reads 16 (64-bit, kept in the low half) or 32 hex digits.
func parseTraceID(dst *[16]byte, s string) bool {
	switch len(s) {
	case 16:
		_, err := hex.Decode(dst[8:], []byte(s))
		return err == nil && *dst != [16]byte{}
	case 32:
		_, err := hex.Decode(dst[:], []byte(s))
		return err == nil && *dst != [16]byte{}
	}
	return false
}

func parseSpanID(dst *[8]byte, s string) bool {
	if len(s) != 16 {
		return false
	}
	_, err := hex.Decode(dst[:], []byte(s))
	return err == nil && *dst != [8]byte{}
}

// Begin makes the context of the request's span from what it carries (in, when ok) and the
// sampling decision: the W3C and B3 sampled flags win over the decision, as Envoy's tracers
// let them, and a configured sampler over both; Zipkin with shared_span_context keeps the incoming span id (the client's span is
// shared), otherwise the incoming span becomes the parent.
func (c *Config) Begin(in Incoming, ok, sampled bool) (ctx Context, parent [8]byte) {
	if ok && in.SampledSet {
		sampled = in.Sampled
	}
	ctx.Sampled = sampled
	switch {
	case !ok:
		ctx.SpanID = NewSpanID()
		ctx.TraceID = NewTraceID()
		if c.Format == B3 && !c.TraceID128 {
			clear(ctx.TraceID[:8])
		}
	case c.Format == B3 && c.SharedContext:
		ctx.TraceID, ctx.SpanID, parent = in.TraceID, in.SpanID, in.Parent
	default:
		ctx.TraceID, ctx.SpanID, parent = in.TraceID, NewSpanID(), in.SpanID
	}
	if c.Sample != nil {
		ctx.Sampled = c.Sample(ctx.TraceID, in.Context, ok)
	}
	return ctx, parent
}

// Inject writes the span's context for the upstream through set; buf is scratch space.
func (c *Config) Inject(ctx Context, parent [8]byte, buf []byte, set func(key string, value []byte)) {
	if c.Format == W3C {
		set(hdrTraceparent, ctx.AppendTraceparent(buf[:0]))
		return
	}
	set(hdrB3TraceID, appendTraceID(buf[:0], ctx.TraceID))
	set(hdrB3SpanID, hex.AppendEncode(buf[:0], ctx.SpanID[:]))
	if parent != [8]byte{} {
		set(hdrB3Parent, hex.AppendEncode(buf[:0], parent[:]))
	}
	if ctx.Sampled {
		set(hdrB3Sampled, append(buf[:0], '1'))
	} else {
		set(hdrB3Sampled, append(buf[:0], '0'))
	}
}

// appendTraceID writes a trace id in 16 hex digits when its high half is zero (64-bit), else 32.
func appendTraceID(b []byte, id [16]byte) []byte {
	if [8]byte(id[:8]) == [8]byte{} {
		return hex.AppendEncode(b, id[8:])
	}
	return hex.AppendEncode(b, id[:])
}
