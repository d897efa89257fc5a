package pool

import (
	"context"
	"errors"
	"net/http"
	"testing"
)

// TestNoDialForEndedRequest checks that a request whose context has already ended (its
// downstream stream was reset) opens no upstream connection, HTTP/1.1 or HTTP/2, and counts
// no connection attempt.
func TestNoDialForEndedRequest(t *testing.T) {
	for _, extra := range []string{"", "http2_protocol_options: {}"} {
		t.Run("options "+extra, func(t *testing.T) {
			srv, cc := newCountedServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
			srv.Config.Protocols = new(http.Protocols)
			srv.Config.Protocols.SetHTTP1(true)
			srv.Config.Protocols.SetUnencryptedHTTP2(true)
			srv.Start()
			t.Cleanup(srv.Close)
			cm, store := newClusterManager(t, staticCluster(extra, srv.Listener.Addr().String()))
			m := newManager(t, cm, store, nil)
			h := onlyHost(t, m)
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			var resp Response
			err := m.RoundTrip(ctx, h, &Request{Method: "GET", Path: "/"}, &resp)
			if !errors.Is(err, context.Canceled) {
				t.Errorf("RoundTrip = %v; want context.Canceled", err)
			}
			if got := m.st.UpstreamCxTotal.Value(); got != 0 {
				t.Errorf("upstream_cx_total = %d; want 0", got)
			}
			// A request that goes through dials after any earlier dial, and the server accepts
			// connections in order: once it answered, it has seen every connection made.
			get(t, m, h, "/")
			if got := cc.opened.Load(); got != 1 {
				t.Errorf("the upstream saw %d connections; want 1 (the later request's)", got)
			}
		})
	}
}
