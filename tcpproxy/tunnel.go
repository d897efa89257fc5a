package tcpproxy

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/net/http2"

	"github.com/legateproxy/legate/accesslog"
	"github.com/legateproxy/legate/config"
	"github.com/legateproxy/legate/host"
	"github.com/legateproxy/legate/internal/filterstate"
	"github.com/legateproxy/legate/pool"
)

// Tunnels (tunneling_config): the connection's bytes travel in one HTTP request on an
// upstream connection of their own, never pooled: a CONNECT to the formatted hostname, or a
// POST to post_path with use_post. The cluster's protocol options choose the codec: HTTP/2
// when the cluster speaks it (with auto_config, what TLS negotiates), else HTTP/1.1. As in
// Envoy, an HTTP/1.1 answer opens the tunnel with any 2xx, an HTTP/2 one only with 200;
// anything else fails the attempt (and max_connect_attempts may try another). The wait for
// the answer is bounded by the idle_timeout.

// tunnelBufferSize is the read buffer of an HTTP/1.1 tunnel's response head.
const tunnelBufferSize = 16 << 10

// errTunnelRefused is an answer that does not open the tunnel.
var errTunnelRefused = errors.New("upstream refused the tunnel")

// tunnelALPN returns the protocols a tunnel's connection offers in TLS.
func tunnelALPN(m *pool.Manager) []string {
	switch {
	case m.AutoHTTP():
		return []string{"h2", "http/1.1"}
	case m.Protocol(&pool.Request{}) == pool.HTTP2:
		return []string{"h2"}
	}
	return nil
}

// tunnelOverH2 reports whether a tunnel on up speaks HTTP/2.
func tunnelOverH2(m *pool.Manager, up *pool.TCPConn) bool {
	if m.AutoHTTP() {
		tc, ok := up.Conn.(*tls.Conn)
		return ok && tc.ConnectionState().NegotiatedProtocol == "h2"
	}
	return m.Protocol(&pool.Request{}) == pool.HTTP2
}

// tunnelRequest is the tunnel's request for one connection: its authority and added headers
// formatted from what is known of the downstream connection.
type tunnelRequest struct {
	cfg       *config.TCPTunnel
	authority string
	fields    http.Header
	order     []string // field names in the order they were first added
	// state is the downstream connection's filter state, where the answer's headers and
	// trailers go with propagate_response_headers and _trailers.
	state *filterstate.State
}

func newTunnelRequest(cfg *config.TCPTunnel, ci *connInfo) *tunnelRequest {
	e := ci.entry(accesslog.TypeNotSet)
	r := &tunnelRequest{cfg: cfg, authority: string(cfg.Hostname.Format(nil, &e)), fields: http.Header{}, state: ci.state}
	for _, h := range cfg.Headers {
		r.add(h, string(h.Value.Format(nil, &e)))
	}
	return r
}

// add applies one headers_to_add entry with its formatted value v. A value the formatter
// filled with bytes a header may not hold is dropped.
func (r *tunnelRequest) add(h config.TunnelHeader, v string) {
	if (v == "" && !h.KeepEmptyValue) || strings.ContainsAny(v, "\r\n\x00") {
		return
	}
	_, exists := r.fields[h.Key]
	switch h.Action {
	case config.AddIfAbsent:
		if exists {
			return
		}
	case config.OverwriteIfExists:
		if !exists {
			return
		}
		r.fields[h.Key] = nil
	case config.OverwriteIfExistsOrAdd:
		r.fields[h.Key] = nil
	}
	if !exists {
		r.order = append(r.order, h.Key)
	}
	r.fields[h.Key] = append(r.fields[h.Key], v)
}

// open sends the request on up and waits for an answer that opens the tunnel, for at most
// wait (zero: no limit). It returns the tunnel as a connection whose reads and writes are the
// tunnel's payload, or an error wrapping errTunnelRefused (or the transport's failure).
func (r *tunnelRequest) open(up *pool.TCPConn, h2 bool, o *config.HTTP1Options, wait time.Duration) (*tunnelConn, error) {
	if wait > 0 {
		// Real clock: a socket deadline (see internal/clock/direct_test.go's allowedDirect).
		up.SetDeadline(time.Now().Add(wait))
	}
	var t *tunnelConn
	var err error
	if h2 {
		t, err = r.openH2(up)
	} else {
		t, err = r.openH1(up, o)
	}
	if err != nil {
		return nil, err
	}
	up.SetDeadline(time.Time{})
	return t, nil
}

// openH1 sends the request as HTTP/1.1: a CONNECT whose payload follows the answer's head
// raw, or a chunked POST whose answer's body is the payload.
func (r *tunnelRequest) openH1(up *pool.TCPConn, o *config.HTTP1Options) (*tunnelConn, error) {
	if _, err := up.Write(r.h1Head(o.StatelessCase())); err != nil {
		return nil, err
	}
	method := http.MethodConnect
	if r.cfg.UsePost {
		method = http.MethodPost
	}
	br := bufio.NewReaderSize(up, tunnelBufferSize)
	var resp *http.Response
	for {
		var err error
		if resp, err = http.ReadResponse(br, &http.Request{Method: method}); err != nil {
			return nil, err
		}
		if resp.StatusCode >= http.StatusOK {
			break
		}
	}
	r.propagateHeaders(func() filterstate.HeaderMap { return headerMap(resp.StatusCode, resp.Header) })
	if resp.StatusCode/100 != 2 {
		resp.Body.Close()
		return nil, fmt.Errorf("%w: %s", errTunnelRefused, resp.Status)
	}
	if !r.cfg.UsePost {
		// A 2xx to a CONNECT has no body: what follows the head is the tunnel.
		return &tunnelConn{Conn: up, r: br, w: up, closeWrite: up.CloseWrite, close: up.Close}, nil
	}
	cw := &chunkWriter{w: up}
	return &tunnelConn{Conn: up, r: r.trailersAtEnd(resp.Body, func() filterstate.HeaderMap { return headerMap(0, resp.Trailer) }),
		w: cw, closeWrite: cw.end, close: up.Close}, nil
}

// h1Head is the HTTP/1.1 request head, its field names in case c.
func (r *tunnelRequest) h1Head(c config.HeaderCase) []byte {
	b := make([]byte, 0, 256)
	if r.cfg.UsePost {
		b = append(b, "POST "...)
		b = append(b, r.cfg.PostPath...)
	} else {
		b = append(b, "CONNECT "...)
		b = append(b, r.authority...)
	}
	b = append(b, " HTTP/1.1\r\n"...)
	b = appendField(b, "host", r.authority, c)
	for _, k := range r.order {
		for _, v := range r.fields[k] {
			b = appendField(b, k, v, c)
		}
	}
	if r.cfg.UsePost {
		b = appendField(b, "transfer-encoding", "chunked", c)
	}
	return append(b, '\r', '\n')
}

func appendField(b []byte, name, value string, c config.HeaderCase) []byte {
	b = config.AppendName(b, name, c)
	b = append(b, ": "...)
	b = append(b, value...)
	return append(b, '\r', '\n')
}

// openH2 sends the request as a stream of an HTTP/2 connection of its own over up: a CONNECT
// (no :scheme, no :path) or a POST, the payload in DATA frames both ways.
func (r *tunnelRequest) openH2(up *pool.TCPConn) (*tunnelConn, error) {
	if tc, ok := up.Conn.(*tls.Conn); ok && tc.ConnectionState().NegotiatedProtocol != "h2" {
		return nil, errors.New("upstream did not negotiate h2 for the tunnel")
	}
	cc, err := (&http2.Transport{}).NewClientConn(up)
	if err != nil {
		return nil, err
	}
	pr, pw := io.Pipe()
	h := r.fields.Clone()
	if _, ok := h["user-agent"]; !ok {
		h["User-Agent"] = nil // x/net/http2 adds its own unless told not to
	}
	req := &http.Request{Method: http.MethodConnect, URL: &url.URL{Host: r.authority}, Host: r.authority, Header: h,
		Body: pr, ContentLength: -1, Proto: "HTTP/2.0", ProtoMajor: 2}
	if r.cfg.UsePost {
		req.Method = http.MethodPost
		req.URL = &url.URL{Scheme: "http", Host: r.authority, Path: r.cfg.PostPath}
		if _, ok := up.Conn.(*tls.Conn); ok {
			req.URL.Scheme = "https"
		}
	}
	abort := func() error {
		pw.CloseWithError(io.ErrClosedPipe)
		cc.Close()
		return up.Close()
	}
	resp, err := cc.RoundTrip(req)
	if err != nil {
		abort()
		return nil, err
	}
	r.propagateHeaders(func() filterstate.HeaderMap { return headerMap(resp.StatusCode, resp.Header) })
	if resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		abort()
		return nil, fmt.Errorf("%w: %d", errTunnelRefused, resp.StatusCode)
	}
	return &tunnelConn{Conn: up, r: r.trailersAtEnd(resp.Body, func() filterstate.HeaderMap { return headerMap(0, resp.Trailer) }),
		w: pw, closeWrite: pw.Close, close: abort}, nil
}

// openPooled opens the tunnel as a stream of the cluster's HTTP/2 pool (max_concurrent_streams
// per connection, the pool's stats and circuit breakers), so tunnels share connections as
// Envoy's do. It waits for the answer for at most wait (zero: no limit). from is the
// downstream connection, whose original source and PROXY protocol state key the pool's
// connections, which bind to that source and whose header describes it.
func (r *tunnelRequest) openPooled(m *pool.Manager, h *host.Host, wait time.Duration, from pool.Origin) (*tunnelConn, error) {
	ctx, cancel := context.WithCancel(context.Background()) // the stream lives until the tunnel closes
	pr, pw := io.Pipe()
	req := &pool.Request{Method: http.MethodConnect, Host: r.authority, Body: pr, ContentLength: -1, Origin: from, HTTP2Only: true}
	if r.cfg.UsePost {
		req.Method, req.Path = http.MethodPost, r.cfg.PostPath
	}
	for _, k := range r.order {
		for _, v := range r.fields[k] {
			req.Header = append(req.Header, pool.Field{Name: k, Value: v})
		}
	}
	var timer *time.Timer
	if wait > 0 {
		// Real clock: request path; the pool resets the stream when ctx ends.
		timer = time.AfterFunc(wait, cancel)
	}
	resp := &pool.Response{}
	// stop ends the request's body and resets the stream; the exchange then ends at once
	// (closing it first would wait for a body nobody writes).
	stop := func() error {
		pw.CloseWithError(io.ErrClosedPipe)
		cancel()
		return nil
	}
	err := m.RoundTrip(ctx, h, req, resp)
	if err == nil {
		r.propagateHeaders(func() filterstate.HeaderMap { return rawHeaderMap(resp.StatusCode, resp.Header) })
	}
	if timer != nil && !timer.Stop() && err == nil {
		err = fmt.Errorf("no answer within %v", wait)
	} else if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("%w: %d", errTunnelRefused, resp.StatusCode)
	}
	if err != nil {
		stop()
		resp.Close()
		return nil, err
	}
	return &tunnelConn{Conn: resp.Conn(), r: r.trailersAtEnd(resp.Body, func() filterstate.HeaderMap { return rawHeaderMap(0, resp.Trailer) }),
		w: pw, closeWrite: pw.Close, close: stop,
		finish: func() { stop(); resp.Close() }}, nil
}

// tunnelConn is an open tunnel seen as a connection: reads and writes carry the payload,
// CloseWrite ends the request's body, Close tears the tunnel down and then, once, runs
// release. The embedded upstream connection gives the addresses.
type tunnelConn struct {
	net.Conn
	r          io.Reader
	w          io.Writer
	closeWrite func() error
	close      func() error
	release    func() // nil for none
	released   sync.Once
	// finish ends a pooled stream's exchange once no copy uses the tunnel (end); nil for a
	// tunnel with a connection of its own.
	finish func()
}

// end runs finish, after the session's copies have returned: the pool's response may not be
// closed while its body is read.
func (t *tunnelConn) end() {
	if t.finish != nil {
		t.finish()
	}
}

func (t *tunnelConn) Read(p []byte) (int, error)  { return t.r.Read(p) }
func (t *tunnelConn) Write(p []byte) (int, error) { return t.w.Write(p) }
func (t *tunnelConn) CloseWrite() error           { return t.closeWrite() }

func (t *tunnelConn) Close() error {
	err := t.close()
	if t.release != nil {
		t.released.Do(t.release)
	}
	return err
}

// chunkWriter writes a POST tunnel's payload as HTTP/1.1 chunks; end writes the last chunk.
// One goroutine writes (the downstream-to-upstream copy), so buf needs no lock.
type chunkWriter struct {
	w   io.Writer
	buf []byte
}

func (c *chunkWriter) Write(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	c.buf = strconv.AppendInt(c.buf[:0], int64(len(p)), 16)
	c.buf = append(c.buf, '\r', '\n')
	c.buf = append(c.buf, p...)
	c.buf = append(c.buf, '\r', '\n')
	if _, err := c.w.Write(c.buf); err != nil {
		return 0, err
	}
	return len(p), nil
}

func (c *chunkWriter) end() error {
	_, err := c.w.Write([]byte("0\r\n\r\n"))
	return err
}

// The filter state keys of the tunnel's answer (Envoy's TunnelResponseHeaders and
// TunnelResponseTrailers).
const (
	ResponseHeadersKey  = "envoy.tcp_proxy.propagate_response_headers"
	ResponseTrailersKey = "envoy.tcp_proxy.propagate_response_trailers"
)

// propagateHeaders puts the answer's headers in the connection's filter state with
// propagate_response_headers, a refusal's too (access logs then show why); fields builds
// them only then.
func (r *tunnelRequest) propagateHeaders(fields func() filterstate.HeaderMap) {
	if r.cfg.PropagateResponseHeaders {
		// Mutable: a later attempt's answer replaces an earlier one's.
		r.state.Set(ResponseHeadersKey, fields(), filterstate.Options{})
	}
}

// trailersAtEnd returns body, which puts the answer's trailers (fields, read once body has
// ended) in the connection's filter state at its end with propagate_response_trailers.
func (r *tunnelRequest) trailersAtEnd(body io.Reader, fields func() filterstate.HeaderMap) io.Reader {
	if !r.cfg.PropagateResponseTrailers {
		return body
	}
	return &trailerReader{Reader: body, end: func() {
		if t := fields(); len(t) > 0 {
			r.state.Set(ResponseTrailersKey, t, filterstate.Options{})
		}
	}}
}

// trailerReader runs end once, when its reader returns io.EOF (the upstream-to-downstream
// copy is its only reader).
type trailerReader struct {
	io.Reader
	end  func()
	done bool
}

func (t *trailerReader) Read(p []byte) (int, error) {
	n, err := t.Reader.Read(p)
	if err == io.EOF && !t.done {
		t.done = true
		t.end()
	}
	return n, err
}

// headerMap lists a net/http header as Envoy keeps it: ":status" first (when status is not
// 0), then the fields with lower-case names, sorted (net/http does not keep their order).
func headerMap(status int, h http.Header) filterstate.HeaderMap {
	out := make(filterstate.HeaderMap, 0, len(h)+1)
	if status != 0 {
		out = append(out, filterstate.Header{Key: ":status", Value: strconv.Itoa(status)})
	}
	keys := make([]string, 0, len(h))
	for k := range h {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		for _, v := range h[k] {
			out = append(out, filterstate.Header{Key: strings.ToLower(k), Value: v})
		}
	}
	return out
}

// rawHeaderMap lists a pool response's fields in their order, copied out of its storage.
func rawHeaderMap(status int, fields []pool.RawField) filterstate.HeaderMap {
	out := make(filterstate.HeaderMap, 0, len(fields)+1)
	if status != 0 {
		out = append(out, filterstate.Header{Key: ":status", Value: strconv.Itoa(status)})
	}
	for _, f := range fields {
		out = append(out, filterstate.Header{Key: strings.ToLower(string(f.Name)), Value: string(f.Value)})
	}
	return out
}
