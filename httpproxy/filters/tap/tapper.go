package tap

import (
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	tapdatav3 "github.com/envoyproxy/go-control-plane/envoy/data/tap/v3"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/legateproxy/legate/httpproxy/route"
)

// Tapper taps one stream (Envoy's HttpPerRequestTapper): it is fed the stream's parts as
// they pass, runs the match tree on them, and writes the trace to the tap's sink — one
// buffered HttpBufferedTrace when the stream ends, or, with output_config.streaming, an
// HttpStreamedTraceSegment per part from the moment the stream matches (parts seen before
// that are flushed first).
//
// A Tapper belongs to its stream's goroutine. All methods are safe on a nil *Tapper and do
// nothing, so a caller can feed parts without checking whether a tap is active. The request,
// headers and trailers passed in are kept, not copied, until End: a buffered trace reads
// them then, as Envoy reads its header maps when the stream is logged (so headers that later
// filters or the router add are in the trace). The caller must not recycle them before End.
type Tapper struct {
	a          *active
	ms         *matchState
	id         uint64
	recordTime bool
	now        func() time.Time

	req          *route.Request
	reqTrailers  http.Header
	respHeaders  http.Header
	status       int
	respTrailers http.Header
	reqTime      time.Time
	respTime     time.Time
	reqBody      *tapdatav3.Body // buffered: the body so far; streaming: kept until a match
	respBody     *tapdatav3.Body

	haveReqTrailers  bool
	haveResponse     bool
	haveRespTrailers bool
	started          bool // streaming: segments are being written
	written          bool // a message of this trace went to the sink
}

func (t *Tapper) cfg() *Config { return t.a.cfg }

// ID is the trace id (Envoy's stream id): it names file_per_tap files and is carried by
// every streamed segment.
func (t *Tapper) ID() uint64 {
	if t == nil {
		return 0
	}
	return t.id
}

// RequestHeaders feeds the request's headers (pseudo-headers from its fields).
func (t *Tapper) RequestHeaders(r *route.Request) {
	if t == nil {
		return
	}
	t.req = r
	if t.recordTime {
		t.reqTime = t.now()
	}
	t.ms.onRequestHeaders(r)
	t.afterHeaders(func() {
		t.segment(&tapdatav3.HttpStreamedTraceSegment{MessagePiece: &tapdatav3.HttpStreamedTraceSegment_RequestHeaders{RequestHeaders: t.requestHeaders()}})
	})
}

// RequestBody feeds one chunk of the request body; empty chunks are ignored, as in Envoy.
func (t *Tapper) RequestBody(p []byte) {
	if t == nil || len(p) == 0 {
		return
	}
	t.ms.onBody(evRequestBody, p)
	t.body(p, &t.reqBody, t.cfg().maxRx, true)
}

// RequestTrailers feeds the request trailers.
func (t *Tapper) RequestTrailers(h http.Header) {
	if t == nil {
		return
	}
	t.reqTrailers, t.haveReqTrailers = h, true
	t.ms.onHeaders(evRequestTrailers, h, 0)
	t.afterHeaders(func() {
		t.segment(&tapdatav3.HttpStreamedTraceSegment{MessagePiece: &tapdatav3.HttpStreamedTraceSegment_RequestTrailers{RequestTrailers: &corev3.HeaderMap{Headers: headerList(nil, h)}}})
	})
}

// ResponseHeaders feeds the response status and headers.
func (t *Tapper) ResponseHeaders(status int, h http.Header) {
	if t == nil {
		return
	}
	t.status, t.respHeaders, t.haveResponse = status, h, true
	if t.recordTime {
		t.respTime = t.now()
	}
	t.ms.onHeaders(evResponseHeaders, h, status)
	t.afterHeaders(func() {
		t.segment(&tapdatav3.HttpStreamedTraceSegment{MessagePiece: &tapdatav3.HttpStreamedTraceSegment_ResponseHeaders{ResponseHeaders: t.responseHeaders()}})
	})
}

// ResponseBody feeds one chunk of the response body; empty chunks are ignored.
func (t *Tapper) ResponseBody(p []byte) {
	if t == nil || len(p) == 0 {
		return
	}
	t.ms.onBody(evResponseBody, p)
	t.body(p, &t.respBody, t.cfg().maxTx, false)
}

// ResponseTrailers feeds the response trailers.
func (t *Tapper) ResponseTrailers(h http.Header) {
	if t == nil {
		return
	}
	t.respTrailers, t.haveRespTrailers = h, true
	t.ms.onHeaders(evResponseTrailers, h, 0)
	t.afterHeaders(func() {
		t.segment(&tapdatav3.HttpStreamedTraceSegment{MessagePiece: &tapdatav3.HttpStreamedTraceSegment_ResponseTrailers{ResponseTrailers: &corev3.HeaderMap{Headers: headerList(nil, h)}}})
	})
}

// End closes the stream (Envoy's onDestroyLog) and reports whether it matched (was tapped).
// A buffered trace is written now.
func (t *Tapper) End() bool {
	if t == nil {
		return false
	}
	matched := t.ms.result().matches
	if t.cfg().streaming || !matched {
		return matched
	}
	tr := &tapdatav3.HttpBufferedTrace{}
	if t.req != nil || t.reqBody != nil || t.haveReqTrailers {
		m := &tapdatav3.HttpBufferedTrace_Message{Body: t.reqBody}
		if t.req != nil {
			m.Headers = t.requestHeaders().GetHeaders()
			if t.recordTime {
				m.HeadersReceivedTime = timestamppb.New(t.reqTime)
			}
		}
		if t.haveReqTrailers {
			m.Trailers = headerList(nil, t.reqTrailers)
		}
		tr.Request = m
	}
	if t.haveResponse || t.respBody != nil || t.haveRespTrailers {
		m := &tapdatav3.HttpBufferedTrace_Message{Body: t.respBody}
		if t.haveResponse {
			m.Headers = t.responseHeaders().GetHeaders()
			if t.recordTime {
				m.HeadersReceivedTime = timestamppb.New(t.respTime)
			}
		}
		if t.haveRespTrailers {
			m.Trailers = headerList(nil, t.respTrailers)
		}
		tr.Response = m
	}
	t.submit(&tapdatav3.TraceWrapper{Trace: &tapdatav3.TraceWrapper_HttpBufferedTrace{HttpBufferedTrace: tr}})
	return true
}

// afterHeaders runs after a header-like part: with streaming, the first match flushes
// everything seen so far (this part included); later parts go out one by one.
func (t *Tapper) afterHeaders(emit func()) {
	if !t.cfg().streaming || !t.ms.result().matches {
		return
	}
	if !t.started {
		t.startStreaming()
		return
	}
	emit()
}

// startStreaming writes, in stream order, the parts seen before the stream matched.
func (t *Tapper) startStreaming() {
	t.started = true
	if t.req != nil {
		t.segment(&tapdatav3.HttpStreamedTraceSegment{MessagePiece: &tapdatav3.HttpStreamedTraceSegment_RequestHeaders{RequestHeaders: t.requestHeaders()}})
	}
	if t.reqBody != nil {
		t.segment(&tapdatav3.HttpStreamedTraceSegment{MessagePiece: &tapdatav3.HttpStreamedTraceSegment_RequestBodyChunk{RequestBodyChunk: t.reqBody}})
		t.reqBody = nil
	}
	if t.haveReqTrailers {
		t.segment(&tapdatav3.HttpStreamedTraceSegment{MessagePiece: &tapdatav3.HttpStreamedTraceSegment_RequestTrailers{RequestTrailers: &corev3.HeaderMap{Headers: headerList(nil, t.reqTrailers)}}})
	}
	if t.haveResponse {
		t.segment(&tapdatav3.HttpStreamedTraceSegment{MessagePiece: &tapdatav3.HttpStreamedTraceSegment_ResponseHeaders{ResponseHeaders: t.responseHeaders()}})
	}
	if t.respBody != nil {
		t.segment(&tapdatav3.HttpStreamedTraceSegment{MessagePiece: &tapdatav3.HttpStreamedTraceSegment_ResponseBodyChunk{ResponseBodyChunk: t.respBody}})
		t.respBody = nil
	}
	if t.haveRespTrailers {
		t.segment(&tapdatav3.HttpStreamedTraceSegment{MessagePiece: &tapdatav3.HttpStreamedTraceSegment_ResponseTrailers{ResponseTrailers: &corev3.HeaderMap{Headers: headerList(nil, t.respTrailers)}}})
	}
}

// body handles a body chunk. Buffered: append up to limit bytes in all, then mark the body
// truncated. Streaming after a match: one segment per chunk, each cut at limit bytes.
// Streaming before a match: keep up to limit bytes while the match might still change, to
// be flushed if it does.
func (t *Tapper) body(p []byte, buf **tapdatav3.Body, limit uint32, request bool) {
	c := t.cfg()
	if c.streaming {
		if t.started {
			chunk := &tapdatav3.Body{}
			appendBody(chunk, p, limit)
			if request {
				t.segment(&tapdatav3.HttpStreamedTraceSegment{MessagePiece: &tapdatav3.HttpStreamedTraceSegment_RequestBodyChunk{RequestBodyChunk: chunk}})
			} else {
				t.segment(&tapdatav3.HttpStreamedTraceSegment{MessagePiece: &tapdatav3.HttpStreamedTraceSegment_ResponseBodyChunk{ResponseBodyChunk: chunk}})
			}
			return
		}
		st := t.ms.result()
		if !st.matches && !st.mightChange {
			return
		}
	}
	if *buf == nil {
		*buf = &tapdatav3.Body{BodyType: &tapdatav3.Body_AsBytes{}}
	}
	appendBody(*buf, p, limit)
	if c.streaming && t.ms.result().matches {
		// A body matcher decided the match on this chunk: flush what was kept.
		t.startStreaming()
	}
}

// appendBody adds p to b's bytes, keeping b within limit bytes in all and marking it
// truncated when something was left out.
func appendBody(b *tapdatav3.Body, p []byte, limit uint32) {
	have := b.GetAsBytes()
	room := max(int(limit)-len(have), 0)
	n := min(room, len(p))
	b.BodyType = &tapdatav3.Body_AsBytes{AsBytes: append(have, p[:n]...)}
	if n < len(p) {
		b.Truncated = true
	}
}

// segment writes one streamed segment, stamped with the trace id.
func (t *Tapper) segment(seg *tapdatav3.HttpStreamedTraceSegment) {
	seg.TraceId = t.id
	t.submit(&tapdatav3.TraceWrapper{Trace: &tapdatav3.TraceWrapper_HttpStreamedTraceSegment{HttpStreamedTraceSegment: seg}})
}

// submit hands a message to the sink; the first message of a trace carries
// configured_sample_rate and starts the trace's file.
func (t *Tapper) submit(tw *tapdatav3.TraceWrapper) {
	first := !t.written
	if first {
		tw.ConfiguredSampleRate = t.cfg().sampleRateProto()
	}
	t.written = true
	t.a.submit(t.id, tw, first)
}

// requestHeaders lists the request headers as Envoy's header map holds them: the
// pseudo-headers :authority, :path, :method and :scheme first, then the others in lower
// case (sorted by name, since Go's header map keeps no order), one entry per value.
func (t *Tapper) requestHeaders() *corev3.HeaderMap {
	r := t.req
	list := make([]*corev3.HeaderValue, 0, 4+len(r.Header))
	for _, p := range [...]struct{ k, v string }{{":authority", r.Authority}, {":path", r.Path}, {":method", r.Method}, {":scheme", r.Scheme}} {
		if p.v != "" {
			list = append(list, headerValue(p.k, p.v))
		}
	}
	return &corev3.HeaderMap{Headers: headerList(list, r.Header)}
}

// responseHeaders lists :status (when known) and the response headers.
func (t *Tapper) responseHeaders() *corev3.HeaderMap {
	var list []*corev3.HeaderValue
	if t.status != 0 {
		list = append(list, headerValue(":status", strconv.Itoa(t.status)))
	}
	return &corev3.HeaderMap{Headers: headerList(list, t.respHeaders)}
}

// headerList appends h's entries to list, names in lower case and sorted, one entry per
// value.
func headerList(list []*corev3.HeaderValue, h http.Header) []*corev3.HeaderValue {
	keys := make([]string, 0, len(h))
	for k := range h {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return strings.ToLower(keys[i]) < strings.ToLower(keys[j]) })
	for _, k := range keys {
		lk := strings.ToLower(k)
		for _, v := range h[k] {
			list = append(list, headerValue(lk, v))
		}
	}
	return list
}

// headerValue makes a HeaderValue with the value's invalid UTF-8 bytes replaced by '!', as
// Envoy's sanitizeUtf8String does (a proto string must be UTF-8). Key and value are copied:
// the connection manager's strings may share a buffer it reuses for the next request, and
// the trace outlives the stream (the admin encodes it on its own goroutine).
func headerValue(k, v string) *corev3.HeaderValue {
	k, v = strings.Clone(k), strings.Clone(v)
	if !utf8.ValidString(v) {
		var b strings.Builder
		for i := 0; i < len(v); {
			r, size := utf8.DecodeRuneInString(v[i:])
			if r == utf8.RuneError && size == 1 {
				b.WriteByte('!')
			} else {
				b.WriteString(v[i : i+size])
			}
			i += size
		}
		v = b.String()
	}
	return &corev3.HeaderValue{Key: k, Value: v}
}
