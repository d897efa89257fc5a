package httpinspector

import (
	"bytes"

	"github.com/legateproxy/legate/internal/http1"

	"github.com/legateproxy/legate/stats"
)

// Name is the filter's Envoy name; TypeURL its typed_config type.
const (
	Name    = "envoy.filters.listener.http_inspector"
	TypeURL = "type.googleapis.com/envoy.extensions.filters.listener.http_inspector.v3.HttpInspector"
)

// maxInspect is how much of the connection the inspector reads at most (Envoy's 8 KiB).
const maxInspect = 8 << 10

var h2Preface = []byte("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")

// Inspector is the filter of one listener; it is immutable and safe for concurrent use.
type Inspector struct {
	readError, http10, http11, http2, notFound *stats.Counter
}

// New returns the inspector, its stats in store: every listener's inspector counts in the
// same http_inspector.* stats, as in Envoy.
func New(store *stats.Store) *Inspector {
	c := func(name string) *stats.Counter { return store.Counter("http_inspector." + name) }
	return &Inspector{readError: c("read_error"), http10: c("http10_found"), http11: c("http11_found"), http2: c("http2_found"), notFound: c("http_not_found")}
}

// Inspect looks at the bytes read so far. done is false while more bytes could decide; once
// done, protocol is "h2c", "http/1.1", "http/1.0" or "" (not HTTP), and counted.
func (in *Inspector) Inspect(b []byte) (protocol string, done bool) {
	protocol, done = classify(b)
	if !done {
		return "", false
	}
	switch protocol {
	case "h2c":
		in.http2.Inc()
	case "http/1.1":
		in.http11.Inc()
	case "http/1.0":
		in.http10.Inc()
	default:
		in.notFound.Inc()
	}
	return protocol, true
}

// ReadError counts a connection that ended, or failed, before Inspect was done.
func (in *Inspector) ReadError() { in.readError.Inc() }

// classify tells the HTTP version of a connection from its first bytes.
func classify(b []byte) (string, bool) {
	n := min(len(b), len(h2Preface))
	if bytes.Equal(b[:n], h2Preface[:n]) {
		if n == len(h2Preface) {
			return "h2c", true
		}
		return "", false
	}
	end := bytes.IndexByte(b, '\n')
	if end < 0 {
		if len(b) >= maxInspect || !plausibleStart(b) {
			return "", true
		}
		return "", false
	}
	if end == 0 || b[end-1] != '\r' {
		return "", true
	}
	return requestLineVersion(b[:end-1]), true
}

// plausibleStart reports whether an incomplete first line can still become a request line:
// it starts with a method token.
func plausibleStart(b []byte) bool {
	for i, c := range b {
		if c == ' ' {
			return i > 0
		}
		if !http1.IsTokenChar(c) {
			return false
		}
	}
	return true
}

// requestLineVersion returns the protocol of "METHOD target HTTP/1.x", "" for anything else.
func requestLineVersion(line []byte) string {
	sp1 := bytes.IndexByte(line, ' ')
	sp2 := bytes.LastIndexByte(line, ' ')
	if sp1 <= 0 || sp2 <= sp1+1 {
		return ""
	}
	for _, c := range line[:sp1] {
		if !http1.IsTokenChar(c) {
			return ""
		}
	}
	for _, c := range line[sp1+1 : sp2] {
		if c <= ' ' || c == 0x7f {
			return ""
		}
	}
	switch string(line[sp2+1:]) {
	case "HTTP/1.1":
		return "http/1.1"
	case "HTTP/1.0":
		return "http/1.0"
	}
	return ""
}
