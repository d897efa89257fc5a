package tracing

import (
	"encoding/hex"
	"math/rand/v2"
	"time"
)

// Context is a W3C trace context: the trace, the span and its sampled flag.
type Context struct {
	TraceID [16]byte
	SpanID  [8]byte
	Sampled bool
}

// ParseTraceparent reads a version 00 W3C traceparent header; ok is false for a malformed or
// all-zero one (then the request starts a new trace, as in Envoy).
func ParseTraceparent(v string) (c Context, ok bool) {
	if len(v) != 55 || v[0:3] != "00-" || v[35] != '-' || v[52] != '-' {
		return c, false
	}
	var flags [1]byte
	if _, err := hex.Decode(c.TraceID[:], []byte(v[3:35])); err != nil {
		return c, false
	}
	if _, err := hex.Decode(c.SpanID[:], []byte(v[36:52])); err != nil {
		return c, false
	}
	if _, err := hex.Decode(flags[:], []byte(v[53:55])); err != nil {
		return c, false
	}
	if c.TraceID == [16]byte{} || c.SpanID == [8]byte{} {
		return c, false
	}
	c.Sampled = flags[0]&1 == 1
	return c, true
}

// AppendTraceparent appends c as a traceparent header value.
func (c Context) AppendTraceparent(b []byte) []byte {
	b = append(b, "00-"...)
	b = hex.AppendEncode(b, c.TraceID[:])
	b = append(b, '-')
	b = hex.AppendEncode(b, c.SpanID[:])
	if c.Sampled {
		return append(b, "-01"...)
	}
	return append(b, "-00"...)
}

// NewSpanID returns a random non-zero span id.
func NewSpanID() (id [8]byte) {
	for id == [8]byte{} {
		v := rand.Uint64()
		for i := range id {
			id[i] = byte(v >> (8 * i))
		}
	}
	return id
}

// NewTraceID returns a random non-zero trace id.
func NewTraceID() (id [16]byte) {
	for id == [16]byte{} {
		a, b := rand.Uint64(), rand.Uint64()
		for i := range 8 {
			id[i], id[8+i] = byte(a>>(8*i)), byte(b>>(8*i))
		}
	}
	return id
}

// Tag is one span attribute.
type Tag struct{ Key, Value string }

// Span is a finished span, handed to the exporter.
type Span struct {
	Context
	Parent     [8]byte // zero for a root span
	Name       string
	Start, End time.Time
	Tags       []Tag
	Error      bool // the request failed (Envoy's error tag): the span's status is an error
	Shared     bool // the span id is the client's (Zipkin's shared_span_context)
	Client     bool // an upstream (CLIENT) span; the downstream span is a SERVER span
	// Events are timing events of a verbose span (Envoy's span logs), in time order.
	Events []Event
}

// Event is a timestamped span event.
type Event struct {
	Time time.Time
	Name string
}

// The timing events of verbose spans, under Envoy's names.
const (
	EventLastDownstreamRx = "last_downstream_rx_byte_received"
	EventFirstUpstreamTx  = "first_upstream_tx_byte_sent"
	EventFirstUpstreamRx  = "first_upstream_rx_byte_received"
	EventLastDownstreamTx = "last_downstream_tx_byte_sent"
)
