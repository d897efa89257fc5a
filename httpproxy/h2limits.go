package httpproxy

import (
	"net/http"

	"github.com/legateproxy/legate/config"
	"github.com/legateproxy/legate/stats"
)

// What one HTTP/2 downstream connection may hold is bounded by the listener's
// per_connection_buffer_limit_bytes, whatever http2_protocol_options allow (Envoy's defaults,
// 2^31-1 streams and 256 MiB windows, let one client hold gigabytes):
//
//   - Every stream admitted runs a handler goroutine with its request, response writer
//     and proxy stream, about 12 KiB in all even when the client reads nothing (measured by
//     TestH2StreamFloodBounded). A connection is granted one stream per h2StreamBudget bytes
//     of its buffer limit, never fewer than minH2Streams. http2 advertises that number and
//     refuses streams beyond it with RST_STREAM: advertising more than is granted would have
//     conforming clients' streams reset as protocol errors.
//   - Request body bytes buffered for handlers are bounded by the connection's flow
//     control window, which is capped at h2WindowFactor buffer limits (at least 1 MiB).
const (
	h2StreamBudget = 4 << 10
	// minH2Streams is the fewest streams a connection is granted: RFC 9113 §6.5.2
	// recommends no fewer than 100, and Envoy's edge guidance uses 100.
	minH2Streams   = 100
	h2WindowFactor = 4
	minH2ConnWin   = 1 << 20
)

// h2StreamCap is the number of concurrent streams granted to a connection whose buffer limit
// is bufferLimit bytes.
func h2StreamCap(bufferLimit uint32) int {
	return max(minH2Streams, int(bufferLimit/h2StreamBudget))
}

// newH2Settings are the HTTP/2 settings of a connection manager whose listener's connections
// have the buffer limit bufferLimit (0: the default).
func newH2Settings(cfg *config.HTTPConnectionManager, bufferLimit uint32) h2Settings {
	if bufferLimit == 0 {
		bufferLimit = config.DefaultPerConnectionBufferLimit
	}
	connWin := max(uint64(bufferLimit)*h2WindowFactor, minH2ConnWin)
	return h2Settings{
		maxStreams:  min(cfg.HTTP2MaxConcurrentStreams, uint32(h2StreamCap(bufferLimit))),
		streamWin:   uint32(min(cfg.HTTP2InitialStreamWindowSize, 1<<30)),
		connWin:     uint32(max(min(uint64(cfg.HTTP2InitialConnectionWindowSize), connWin, 1<<30), h2DefaultWindow)),
		headerList:  uint32(h2HeaderListBytes(cfg)),
		connectProt: cfg.HTTP2AllowConnect,
	}
}

// h2HeaderListBytes is the header list size http2 decodes for a request
// (SETTINGS_MAX_HEADER_LIST_SIZE, which also tells clients the limit). Beyond it http2 refuses
// the request on its own: 431 for a list too long, a connection error (COMPRESSION_ERROR) for
// a single field longer than the whole limit. It is twice max_request_headers_kb plus the 32
// bytes per field http2 adds for max_headers_count fields (RFC 9113 §6.5.2), so that a list
// within both limits, or moderately over them, reaches tooManyHeaders, which applies them
// exactly, while the memory decoding takes stays bounded.
func h2HeaderListBytes(cfg *config.HTTPConnectionManager) int {
	return 2*int(cfg.MaxRequestHeadersKB)<<10 + 32*int(cfg.MaxHeadersCount)
}

// tooManyHeaders reports whether a request's header list exceeds max_request_headers_kb or
// max_headers_count. As Envoy's HTTP/2 codec does, it counts the pseudo-header fields and
// sizes fields by their names and values: r.Header holds fields values, whose names and
// values are size bytes long (h2conn.newRequest counts them as it fills the map).
func tooManyHeaders(cfg *config.HTTPConnectionManager, r *http.Request, fields, size int) bool {
	n := 2 + fields // :method and :authority; other requests than CONNECT add :scheme and :path
	size += len(":method") + len(r.Method) + len(":authority") + len(r.Host)
	if r.Method != http.MethodConnect {
		scheme := "http"
		if r.TLS != nil {
			scheme = "https"
		}
		n += 2
		size += len(":scheme") + len(scheme) + len(":path") + len(r.RequestURI)
	}
	return n > int(cfg.MaxHeadersCount) || size > int(cfg.MaxRequestHeadersKB)<<10
}

// refuse answers a request the connection will not serve with status and no body: 431 for a
// header list over the limits (as http2 answers one too large for it to decode, and as the
// HTTP/1 codec answers either), 400 for a malformed head (h2Malformed).
func (c *h2conn) refuse(w *h2stream, status int) {
	st := c.h.stats
	st.DownstreamRqTotal.Inc()
	st.DownstreamRqHTTP2Total.Inc()
	l := stats.ThisLine()
	st.responseCode(status, l)
	c.h.lstats.responseCode(status, l)
	w.Header()["Content-Length"] = []string{"0"}
	w.WriteHeader(status)
}
