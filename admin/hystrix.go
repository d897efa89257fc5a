package admin

import (
	"net/http"

	"github.com/legateproxy/legate/stats/sinks/hystrix"
)

// HystrixEndpoints returns the circuit-breaker dashboard stream under both
// its names: /hystrix_event_stream (Envoy's) and /dashboard_event_stream (the
// spec's). Both serve the same stream from sink.
//
// With a nil sink (no envoy.stat_sinks.hystrix in stats_sinks) it returns
// nothing, so neither path is registered and a request for it gets the
// admin's 404 with the help text. That is Envoy's "unavailable" behaviour:
// Envoy adds /hystrix_event_stream only when it builds the sink.
func HystrixEndpoints(sink *hystrix.Sink) []Endpoint {
	if sink == nil {
		return nil
	}
	handle := func(w http.ResponseWriter, r *http.Request, _ Query) { serveHystrix(w, r, sink) }
	return []Endpoint{
		{Path: "/dashboard_event_stream", Help: "send circuit-breaker dashboard event stream (same as /hystrix_event_stream)", Handle: handle},
		{Path: "/hystrix_event_stream", Help: "send hystrix event stream", Handle: handle},
	}
}

// serveHystrix streams text/event-stream until the client goes away or the
// sink closes. The headers are Envoy's; over HTTP/1 the body is raw and ends
// with the connection (Envoy turns chunking off), which Go does when the
// handler sets "Transfer-Encoding: identity".
func serveHystrix(w http.ResponseWriter, r *http.Request, sink *hystrix.Sink) {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("Access-Control-Allow-Headers", "Accept, Cache-Control, X-Requested-With, Last-Event-ID")
	h.Set("Access-Control-Allow-Origin", "*")
	if r.ProtoMajor == 1 {
		h.Set("Connection", "close")
		h.Set("Transfer-Encoding", "identity")
	}
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	if err := rc.Flush(); err != nil {
		return
	}
	// The only errors are a closed sink (the server is shutting down) and a
	// failed write (the client is gone); both simply end the response.
	_ = sink.Stream(r.Context(), w, rc.Flush)
}
