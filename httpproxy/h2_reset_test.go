package httpproxy

import (
	"context"
	"net/http"
	"testing"
	"time"

	"golang.org/x/net/http2"
)

// cancelRecorder is an upstream that holds every request until its context ends (or wait
// passes) and reports which happened.
type cancelRecorder struct {
	started   chan struct{}
	cancelled chan bool // true: the request's context ended; false: it was held to the end
}

func newCancelRecorder() *cancelRecorder {
	return &cancelRecorder{started: make(chan struct{}, 8), cancelled: make(chan bool, 8)}
}

func (c *cancelRecorder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.WriteHeader(http.StatusOK)
	w.(http.Flusher).Flush() // the response has started: the proxy streams the body
	c.started <- struct{}{}
	select {
	case <-r.Context().Done():
		c.cancelled <- true
	case <-time.After(wait):
		c.cancelled <- false
	}
}

// waitStat waits until the named stat reaches want.
func waitStat(t *testing.T, e *env, name string, want uint64) {
	t.Helper()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(wait)
	for e.stat(name) < want {
		select {
		case <-tick.C:
		case <-deadline:
			t.Fatalf("%s = %d; want %d", name, e.stat(name), want)
		}
	}
}

// TestH2DownstreamResetCancelsUpstream checks that the upstream request of an HTTP/2 stream
// is cancelled at once when the client resets the stream (RST_STREAM) or closes the
// connection, for HTTP/2 upstreams (stream reset: upstream_rq_tx_reset) and HTTP/1.1 ones
// (connection closed: upstream_cx_destroy_local_with_active_rq), instead of running until
// the upstream finishes.
func TestH2DownstreamResetCancelsUpstream(t *testing.T) {
	rec := newCancelRecorder()
	e := bothProtocolsEnv(t, rec)
	tests := []struct {
		name      string
		path      string
		closeConn bool     // close the connection instead of resetting the stream
		stats     []string // stats that count the cancellation (each + 1)
	}{
		{name: "reset, http2 upstream", path: "/h2", stats: []string{"http.ingress.downstream_rq_rx_reset", "cluster.h2.upstream_rq_tx_reset"}},
		{name: "reset, http1 upstream", path: "/h1", stats: []string{"http.ingress.downstream_rq_rx_reset", "cluster.h1.upstream_cx_destroy_local_with_active_rq"}},
		{name: "close, http2 upstream", path: "/h2", closeConn: true, stats: []string{"http.ingress.downstream_cx_destroy_remote_active_rq", "cluster.h2.upstream_rq_tx_reset"}},
		{name: "close, http1 upstream", path: "/h1", closeConn: true, stats: []string{"cluster.h1.upstream_cx_destroy_local_with_active_rq"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := make(map[string]uint64)
			for _, s := range tc.stats {
				before[s] = e.stat(s)
			}
			fr, conn := frameClient(t, e.addr)
			if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: requestBlock(tc.path), EndHeaders: true, EndStream: true}); err != nil {
				t.Fatal(err)
			}
			select {
			case <-rec.started:
			case <-time.After(wait):
				t.Fatal("the request did not reach the upstream")
			}
			start := time.Now()
			if tc.closeConn {
				conn.Close()
			} else if err := fr.WriteRSTStream(1, http2.ErrCodeCancel); err != nil {
				t.Fatal(err)
			}
			if !<-rec.cancelled {
				t.Fatalf("the upstream request ran to its end after the downstream went away; want it cancelled")
			}
			if d := time.Since(start); d > 2*time.Second {
				t.Errorf("upstream cancelled %v after the downstream went away; want at once", d)
			}
			for _, s := range tc.stats {
				waitStat(t, e, s, before[s]+1)
			}
		})
	}
}

// TestH2ClientCancelCancelsUpstream cancels a request in Go's HTTP/2 client (which resets the
// stream) while the upstream holds it.
func TestH2ClientCancelCancelsUpstream(t *testing.T) {
	rec := newCancelRecorder()
	up := serveBothProtocols(t, rec)
	e := newEnv(t, envOptions{
		clusters: []string{staticCluster("h2", h2ClusterOptions, up.Listener.Addr().String())},
		hcm:      simpleHCM("h2", ""),
	})
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+e.addr+"/", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := h2cClient(t).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	<-rec.started
	cancel()
	resp.Body.Close()
	if !<-rec.cancelled {
		t.Fatal("the upstream request ran to its end after the client cancelled; want it cancelled")
	}
	waitStat(t, e, "cluster.h2.upstream_rq_tx_reset", 1)
}
