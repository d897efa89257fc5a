package httpproxy

import (
	"testing"
	"time"
)

// TestH2IdleTimeoutCountsFromLastStream: an HTTP/2 connection's idle timeout runs from the end
// of its last stream, not from the connection's start. The idle timer armed at the start is
// left pending by a stream that ends after it was armed (h2Lifetime.streamEnded) and sleeps
// on for what is left when it fires: a stream that ends 700 ms into the 1 s idle timeout
// leaves the connection open until about a second after it ended, not 300 ms.
func TestH2IdleTimeoutCountsFromLastStream(t *testing.T) {
	up := slowUpstream(t)
	e := newEnv(t, envOptions{
		clusters: []string{staticCluster("web", "", up.Listener.Addr().String())},
		hcm:      simpleHCM("web", "") + "stream_idle_timeout: 0s\ncommon_http_protocol_options: {idle_timeout: 1s}\n",
	})
	c, fr := idleH2(t, e.addr, [2]string{"x-delay", "700ms"})
	ended := time.Now()
	if got := awaitGoAway(t, c, fr, ended); got < 800*time.Millisecond {
		t.Errorf("GOAWAY %v after the last stream ended; want about the 1s idle_timeout", got)
	}
	if got := e.stat("http.ingress.downstream_cx_idle_timeout"); got != 1 {
		t.Errorf("downstream_cx_idle_timeout = %d; want 1", got)
	}
}
