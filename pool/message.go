package pool

import (
	"context"
	"io"
	"net"
	"net/http"

	"github.com/legateproxy/legate/config"
	"github.com/legateproxy/legate/internal/h2client"
	"github.com/legateproxy/legate/internal/http1"
	"github.com/legateproxy/legate/internal/proxyproto"
	"github.com/legateproxy/legate/internal/sockopt"
	"github.com/legateproxy/legate/stats"
)

// Field is one request header line. Names are written as given (HTTP/2 in lower case); the
// codec itself decides Content-Length and Transfer-Encoding, so fields with those names are
// skipped. It is the HTTP/2 client's own type, so that a request's fields go to it as they
// are.
type Field = h2client.Field

// RawField is one response header line. Name and Value point into the Response's own buffer
// and stay valid until the Response is reused. Known is which of the names a proxy treats
// apart Name is (http1.KnownName), found as the head was parsed.
type RawField struct {
	Name, Value []byte
	Known       http1.Known
}

// Request is one upstream request. The caller owns it; the pool only reads it, and may reuse
// it for the next request once RoundTrip has returned.
type Request struct {
	// Method is the request method, for example "GET".
	Method string
	// Path is the request target written on the request line ("/a?b=c").
	Path string
	// Host is the Host header (HTTP/1.1) or :authority (HTTP/2). Empty: the host's address.
	Host string
	// Header holds the other header lines, in order.
	Header []Field
	// Scheme is the request's scheme ("http" when empty), written in an absolute-form
	// target (send_fully_qualified_url).
	Scheme string
	// Spelled is set when the names of Header, and HostName, are spelled as the downstream
	// connection manager's preserve_case formatter recorded them (Envoy's stateful formatter
	// travels with the headers it read): they are written as they are, and the names the
	// codec adds (host without HostName, content-length, transfer-encoding) in OthersCase,
	// whatever the cluster's header_key_format.
	Spelled    bool
	HostName   string
	OthersCase config.HeaderCase
	// Body is the request body; nil means none.
	Body io.Reader
	// ContentLength is the body length; -1 with a non-nil Body sends a chunked body.
	ContentLength int64
	// Priority selects the circuit-breaker priority (route priority DEFAULT or HIGH).
	Priority config.Priority
	// Start is when the caller began the attempt, a stamp of the clock the Manager was
	// configured with (clock.NewStamps of Config.Now); upstream_rq_time counts from it. Zero:
	// RoundTrip reads the clock (a caller that has just read it saves a reading per request).
	Start int64
	// Deadline, when not zero, is the deadline of the context RoundTrip is given, as a stamp
	// of Start's clock: an HTTP/1.1 exchange then takes it instead of asking the context (a
	// lock and a conversion of its time.Time a request).
	Deadline int64
	// Line is the caller's line of the hot stats (stats.ThisLine, taken for its request),
	// on which the exchange counts: the cluster's upstream_rq_total and _active, the host's
	// rq_* and upstream_rq_time. NoLine: RoundTrip takes one.
	Line stats.Line
	// HTTP2 is the downstream protocol, read when the cluster has
	// protocol_selection: USE_DOWNSTREAM_PROTOCOL.
	HTTP2 bool
	// HTTP2Only asks for HTTP/2 on an auto_config cluster: when the host speaks HTTP/1.1,
	// RoundTrip fails with ErrNegotiatedHTTP1 instead of sending the request over it (the
	// TCP proxy's pooled tunnels, which open HTTP/1.1 tunnels on connections of their own).
	HTTP2Only bool
	// Trailer holds the request's trailer fields. It is read once Body has returned io.EOF,
	// so the caller may fill it while the body is read (a downstream body's trailers arrive
	// with its end); nil means none. HTTP/2 connections send the fields (copied) in a
	// trailing HEADERS frame; HTTP/1.1 requests carry them in the chunked trailer section
	// only with the cluster's enable_trailers, as in Envoy.
	Trailer http.Header
	// Downstream, when set, is the downstream request's context: when it ends before the
	// exchange does (the client reset its stream or went away), an HTTP/1.1 exchange is
	// abandoned and its connection closed, as Envoy resets the upstream request of a reset
	// downstream stream. HTTP/2 exchanges are reset through ctx, which should end with it.
	// It may be the exchange's ctx itself, whose deadline is then set late (when the request
	// body ends): an exchange it abandons past that deadline fails as a timeout. One that
	// implements EndWatcher is watched through it, else with context.AfterFunc.
	Downstream context.Context
	// Origin is the downstream connection the request came on; nil for a request of
	// Legate's own. With the original_src listener filter, the request's upstream connection
	// binds to its client's address; with a proxy_protocol transport socket, its header
	// describes the downstream connection. Either keeps such connections apart by that
	// downstream, as Envoy hashes the socket options and the PROXY protocol state into its
	// pool key.
	Origin Origin
	// InterruptBody, when set, ends a Body.Read that waits for the client. The pool calls it,
	// from another goroutine, when an HTTP/1.1 upstream answers before the body was sent
	// whole (so that the answer is not held until the client sends more), and when an HTTP/2
	// exchange ends with the body unfinished (so that the HTTP/2 body sender's read of it ends before
	// Response.Close returns). Body is not read after that. It may also come just after the
	// body's last read.
	InterruptBody func()
}

// Origin is what the pool reads of a request's downstream connection (a *listener.Conn).
type Origin interface {
	// UpstreamSource returns where the connection's upstream connections bind (the
	// original_src listener filter's choice); nil for the cluster's own binding.
	UpstreamSource() *sockopt.Source
	// RemoteAddr and LocalAddr are the connection's client and the address it reached (a
	// PROXY protocol header's when the listener read one), ProxyProtocolTLVs the TLVs the
	// listener's pass_through_tlvs kept: Envoy's PROXY protocol state of the connection.
	RemoteAddr() net.Addr
	LocalAddr() net.Addr
	ProxyProtocolTLVs() []proxyproto.TLV
}

func (r *Request) scheme() string {
	if r.Scheme == "" {
		return "http"
	}
	return r.Scheme
}

// AppendHTTPHeader flattens h into dst without copying strings; with enough capacity in dst it
// does not allocate. Map order is random; callers that need a stable order sort dst.
func AppendHTTPHeader(dst []Field, h http.Header) []Field {
	for k, vs := range h {
		for _, v := range vs {
			dst = append(dst, Field{Name: k, Value: v})
		}
	}
	return dst
}

// Response is one upstream response. Callers keep a Response per downstream stream and reuse
// it: header storage is kept between uses. After a successful RoundTrip the caller reads Body
// and must call Close exactly once, which ends the exchange and returns the connection to the
// pool (when the body was read to its end and the connection may be reused).
//
// A Response is not safe for concurrent use.
type Response struct {
	// StatusCode is the response status.
	StatusCode int
	// ProtoMinor is 0 for an HTTP/1.0 response, 1 for HTTP/1.1; HTTP2 marks an HTTP/2 one.
	ProtoMinor int
	HTTP2      bool
	// Header holds the header lines in order; see RawField.
	Header []RawField
	// ContentLength is the announced body length, or -1 when unknown (chunked, until close,
	// HTTP/2 without content-length).
	ContentLength int64
	// Trailer holds the trailer fields (an HTTP/2 trailing HEADERS frame, an HTTP/1.1 chunked
	// trailer section) once Body has returned io.EOF, names in lower case. Like Header, the
	// fields point into the Response's storage.
	Trailer []RawField
	// Body streams the response body; it returns io.EOF at the end. It implements io.WriterTo
	// so io.Copy moves buffered bytes without a copy buffer. It reads from the connection
	// itself and must not be used after Close.
	Body io.Reader

	raw  []byte     // header storage: each field's name then value
	traw []byte     // trailer storage, laid out as raw
	lens [][2]int32 // name and value lengths of the fields being parsed
	ex   exchange
	// An HTTP/2 exchange's request and body, kept here so that they allocate nothing.
	h2req h2client.Request
	h2b   h2body
}

// An EndWatcher is a Request.Downstream context that runs a function when it ends without
// the allocations context.AfterFunc makes on every call (an HTTP/2 stream's context).
type EndWatcher interface {
	// WatchEnd has f run, on a goroutine of its own, once the context is done (at once if
	// it is). UnwatchEnd, given the id WatchEnd returned, stops that and reports whether it
	// did: false once f runs or ran.
	WatchEnd(f func()) (id uint64)
	UnwatchEnd(id uint64) bool
}

// Get returns the first value of the header named name (ASCII case-insensitive), or nil.
func (r *Response) Get(name string) []byte {
	for i := range r.Header {
		if equalFold(r.Header[i].Name, name) {
			return r.Header[i].Value
		}
	}
	return nil
}

// BodyEnded reports whether Body was read to its end without error, so that its next read
// returns io.EOF: known only of an HTTP/1.1 body (false otherwise).
func (r *Response) BodyEnded() bool {
	c := r.ex.h1
	return c != nil && r.Body != nil && c.body.complete()
}

// BodyReady reports whether Body can be read without waiting for the upstream: the body has
// ended, or bytes of it are buffered. It is false when that is not known (HTTP/2), so a
// caller that forwards a response as it arrives flushes what it has before reading on.
func (r *Response) BodyReady() bool {
	c := r.ex.h1
	if c == nil || r.Body == nil {
		return r.Body == nil
	}
	return c.body.ready()
}

// Close ends the exchange. The connection goes back to the pool when the body was read to
// its end; otherwise it is closed (a reset of the upstream stream). Close is safe to call on
// a Response whose RoundTrip failed.
func (r *Response) Close() error { return r.CloseAt(0, false) }

// CloseAt is Close at end, a stamp the caller took at the response's end on the clock it took
// Request.Start on (clock.Stamps of Config.Now), which the exchange's upstream_rq_time takes
// instead of a reading of the pool's own clock (zero: the pool reads it); system says end is a
// stamp of the system clock (clock.Mono's), which then also stamps the connection's idle start
// (the idle timer's clock). The caller knows which clock it read at no cost.
func (r *Response) CloseAt(end int64, system bool) error {
	r.Body = nil
	ex := &r.ex
	if ex.hp == nil {
		return nil
	}
	// Ended in place and zeroed after, not copied out first (a copy and two more for the
	// calls by value were about 60 instructions a request): nothing in finish reads r.
	err := ex.finish(end, system)
	*ex = exchange{}
	return err
}

// Conn returns the upstream connection the response came on (a TCP proxy tunnel reports its
// addresses); nil when the response is closed.
func (r *Response) Conn() net.Conn {
	switch {
	case r.ex.h2 != nil:
		return r.ex.h2.c.uc
	case r.ex.h1 != nil:
		return r.ex.h1.uc
	}
	return nil
}

// reset clears r for a new response, keeping its storage.
func (r *Response) reset() {
	r.StatusCode, r.ProtoMinor, r.HTTP2 = 0, 0, false
	r.Header = r.Header[:0]
	r.Trailer = r.Trailer[:0]
	r.raw = r.raw[:0]
	r.traw = r.traw[:0]
	r.lens = r.lens[:0]
	r.ContentLength = -1
	r.Body = nil
}

// addField copies one header into the response's storage; finishHeader points Header at it.
func (r *Response) addField(name, value []byte) {
	r.raw = append(r.raw, name...)
	r.raw = append(r.raw, value...)
	r.lens = append(r.lens, [2]int32{int32(len(name)), int32(len(value))})
}

// finishHeader builds Header from the stored fields once r.raw no longer grows.
func (r *Response) finishHeader() {
	r.Header = appendFields(r.Header, r.raw, r.lens)
	r.lens = r.lens[:0]
}

// addTrailer copies one trailer field into the trailer storage, the name in lower case;
// finishTrailer points Trailer at it.
func (r *Response) addTrailer(name, value []byte) {
	r.traw = append(r.traw, name...)
	lower(r.traw[len(r.traw)-len(name):])
	r.traw = append(r.traw, value...)
	r.lens = append(r.lens, [2]int32{int32(len(name)), int32(len(value))})
}

// finishTrailer builds Trailer from the stored trailer fields.
func (r *Response) finishTrailer() {
	r.Trailer = appendFields(r.Trailer[:0], r.traw, r.lens)
	r.lens = r.lens[:0]
}

// appendFields appends the fields laid out in raw with the given name and value lengths.
func appendFields(dst []RawField, raw []byte, lens [][2]int32) []RawField {
	off := 0
	for _, l := range lens {
		n, v := int(l[0]), int(l[1])
		name := raw[off : off+n : off+n]
		dst = append(dst, RawField{
			Name:  name,
			Value: raw[off+n : off+n+v : off+n+v],
			Known: http1.KnownName(name),
		})
		off += n + v
	}
	return dst
}

// equalFold compares an ASCII header name with a lower- or mixed-case string.
func equalFold(b []byte, s string) bool {
	if len(b) != len(s) {
		return false
	}
	for i := range len(b) {
		x, y := b[i], s[i]
		if x == y {
			continue
		}
		if x|0x20 != y|0x20 || (x|0x20) < 'a' || (x|0x20) > 'z' {
			return false
		}
	}
	return true
}
