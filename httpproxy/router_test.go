package httpproxy

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cespare/xxhash/v2"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/retry/host/previous_hosts/v3"
)

// flaky is an upstream that answers the first fail requests with status and the others with
// 200; it counts requests.
type flaky struct {
	srv    *httptest.Server
	n      atomic.Int64
	fail   int64
	status int
}

func newFlaky(t testing.TB, fail int64, status int) *flaky {
	f := &flaky{fail: fail, status: status}
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if f.n.Add(1) <= f.fail {
			w.WriteHeader(f.status)
			fmt.Fprint(w, "failed")
			return
		}
		fmt.Fprint(w, "ok")
	}))
	t.Cleanup(f.srv.Close)
	return f
}

// deadAddrs numbers the addresses deadAddr returns.
var deadAddrs atomic.Uint32

// deadAddr returns a loopback address nothing listens on, a different one each call: port 1
// of 127.0.0.2, 127.0.0.3, …, which unprivileged processes cannot bind. A closed ephemeral
// port could be taken by another test, or let the kernel connect a socket to itself.
func deadAddr(testing.TB) string {
	n := deadAddrs.Add(1)
	return fmt.Sprintf("127.0.%d.%d:1", (n+1)/254, (n+1)%254+1)
}

func TestRetries(t *testing.T) {
	const backoff = `retry_back_off: {base_interval: 0.001s}`
	tests := []struct {
		name     string
		policy   string
		fail     int64
		status   int
		want     int
		attempts int64
		retries  uint64
		exceeded uint64
		hdr      []string
	}{
		{name: "5xx retried to success", policy: `retry_on: 5xx, num_retries: 2`, fail: 2, status: 503, want: 200, attempts: 3, retries: 2},
		{name: "5xx out of retries", policy: `retry_on: 5xx, num_retries: 1`, fail: 2, status: 503, want: 503, attempts: 2, retries: 1, exceeded: 1},
		{name: "gateway-error ignores 500", policy: `retry_on: gateway-error, num_retries: 2`, fail: 1, status: 500, want: 500, attempts: 1},
		{name: "gateway-error retries 502", policy: `retry_on: gateway-error, num_retries: 2`, fail: 1, status: 502, want: 200, attempts: 2, retries: 1},
		{name: "retriable status code", policy: `retry_on: retriable-status-codes, retriable_status_codes: [409], num_retries: 1`, fail: 1, status: 409, want: 200, attempts: 2, retries: 1},
		{name: "other status not retried", policy: `retry_on: retriable-status-codes, retriable_status_codes: [409], num_retries: 1`, fail: 1, status: 410, want: 410, attempts: 1},
		{name: "no policy", fail: 1, status: 503, want: 503, attempts: 1},
		{name: "retry by header", hdr: []string{"x-envoy-retry-on", "5xx", "x-envoy-max-retries", "2"}, fail: 2, status: 503, want: 200, attempts: 3, retries: 2},
		{name: "header adds to route policy", policy: `retry_on: gateway-error, num_retries: 1`, hdr: []string{"x-envoy-retry-on", "retriable-4xx"}, fail: 1, status: 409, want: 200, attempts: 2, retries: 1},
		{name: "max retries header overrides", policy: `retry_on: 5xx, num_retries: 3`, hdr: []string{"x-envoy-max-retries", "0"}, fail: 1, status: 503, want: 503, attempts: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			up := newFlaky(t, tt.fail, tt.status)
			action := ""
			if tt.policy != "" {
				action = fmt.Sprintf(", retry_policy: {%s, %s}", tt.policy, backoff)
			}
			e := newEnv(t, envOptions{
				clusters: []string{staticCluster("web", "", up.srv.Listener.Addr().String())},
				hcm:      simpleHCM("web", action),
			})
			resp, _ := e.get(e.client(), "/", tt.hdr...)
			if resp.StatusCode != tt.want {
				t.Errorf("status = %d; want %d", resp.StatusCode, tt.want)
			}
			if got := up.n.Load(); got != tt.attempts {
				t.Errorf("upstream requests = %d; want %d", got, tt.attempts)
			}
			if got := e.stat("cluster.web.upstream_rq_retry"); got != tt.retries {
				t.Errorf("upstream_rq_retry = %d; want %d", got, tt.retries)
			}
			if got := e.stat("cluster.web.upstream_rq_retry_limit_exceeded"); got != tt.exceeded {
				t.Errorf("upstream_rq_retry_limit_exceeded = %d; want %d", got, tt.exceeded)
			}
			hs := e.hostStats("web", up.srv.Listener.Addr().String())
			if got := hs.Rq().Total; got != uint64(tt.attempts) {
				t.Errorf("host rq_total = %d; want %d", got, tt.attempts)
			}
		})
	}
}

func TestConnectFailure(t *testing.T) {
	up := echo(t, "live")
	dead := deadAddr(t)
	t.Run("no retry", func(t *testing.T) {
		e := newEnv(t, envOptions{clusters: []string{staticCluster("web", "", dead)}, hcm: simpleHCM("web", "")})
		resp, body := e.get(e.client(), "/")
		want := "upstream connect error or disconnect/reset before headers. reset reason: connection failure"
		if resp.StatusCode != 503 || body != want {
			t.Errorf("got %d %q; want 503 %q", resp.StatusCode, body, want)
		}
		if got := e.hostStats("web", dead).CxConnectFail.Load(); got != 1 {
			t.Errorf("cx_connect_fail = %d; want 1", got)
		}
	})
	t.Run("retried on another host", func(t *testing.T) {
		e := newEnv(t, envOptions{
			clusters: []string{staticCluster("web", "", dead, up.Listener.Addr().String())},
			hcm: simpleHCM("web", `, retry_policy: {retry_on: connect-failure, num_retries: 3, retry_back_off: {base_interval: 0.001s},
            retry_host_predicate: [{name: envoy.retry_host_predicates.previous_hosts, typed_config: {"@type": type.googleapis.com/envoy.extensions.retry.host.previous_hosts.v3.PreviousHostsPredicate}}],
            host_selection_retry_max_attempts: 3}`),
		})
		c := e.client()
		for i := range 6 {
			resp, body := e.get(c, "/")
			if resp.StatusCode != 200 || body != "live /" {
				t.Fatalf("request %d: got %d %q; want 200 %q", i, resp.StatusCode, body, "live /")
			}
		}
		if got := e.hostStats("web", up.Listener.Addr().String()).Rq().Success; got != 6 {
			t.Errorf("live rq_success = %d; want 6", got)
		}
	})
}

// blocking is an upstream whose requests wait until released (or the test ends); started
// receives each request's path once it arrived.
type blocking struct {
	srv     *httptest.Server
	started chan string
	release chan struct{}
	once    sync.Once
	n       atomic.Int64
	block   int64  // how many first requests block; 0 means all
	path    string // when set, only requests for this path block
}

func newBlocking(t testing.TB, block int64) *blocking { return newBlockingPath(t, block, "") }

// newBlockingPath is newBlocking for requests of one path only ("" means all).
func newBlockingPath(t testing.TB, block int64, path string) *blocking {
	b := &blocking{started: make(chan string, 100), release: make(chan struct{}), block: block, path: path}
	b.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := b.n.Add(1)
		b.started <- r.URL.Path
		if (b.path == "" || b.path == r.URL.Path) && (b.block == 0 || n <= b.block) {
			select {
			case <-b.release:
			case <-r.Context().Done():
				return
			}
		}
		fmt.Fprint(w, "done")
	}))
	t.Cleanup(func() { b.unblock(); b.srv.Close() })
	return b
}

func (b *blocking) unblock() { b.once.Do(func() { close(b.release) }) }

// waitStarted waits for n requests to reach the upstream.
func (b *blocking) waitStarted(t testing.TB, n int) {
	t.Helper()
	for range n {
		select {
		case <-b.started:
		case <-time.After(wait):
			t.Fatal("request did not reach the upstream")
		}
	}
}

func TestTimeouts(t *testing.T) {
	t.Run("route timeout", func(t *testing.T) {
		up := newBlocking(t, 0)
		e := newEnv(t, envOptions{clusters: []string{staticCluster("web", "", up.srv.Listener.Addr().String())}, hcm: simpleHCM("web", ", timeout: 0.2s")})
		start := time.Now()
		resp, body := e.get(e.client(), "/")
		if resp.StatusCode != 504 || body != "upstream request timeout" {
			t.Errorf("got %d %q; want 504 %q", resp.StatusCode, body, "upstream request timeout")
		}
		if d := time.Since(start); d < 200*time.Millisecond {
			t.Errorf("answered after %v; want >= 200ms", d)
		}
		for name, want := range map[string]uint64{"cluster.web.upstream_rq_timeout": 1, "cluster.web.upstream_rq_504": 1} {
			if got := e.stat(name); got != want {
				t.Errorf("%s = %d; want %d", name, got, want)
			}
		}
		if got := e.hostStats("web", up.srv.Listener.Addr().String()).Rq().Timeout; got != 1 {
			t.Errorf("host rq_timeout = %d; want 1", got)
		}
	})
	t.Run("per try timeout retried", func(t *testing.T) {
		up := newBlocking(t, 1)
		e := newEnv(t, envOptions{
			clusters: []string{staticCluster("web", "", up.srv.Listener.Addr().String())},
			hcm:      simpleHCM("web", ", timeout: 5s, retry_policy: {retry_on: 5xx, num_retries: 1, per_try_timeout: 0.1s, retry_back_off: {base_interval: 0.001s}}"),
		})
		resp, body := e.get(e.client(), "/")
		if resp.StatusCode != 200 || body != "done" {
			t.Errorf("got %d %q; want 200 done", resp.StatusCode, body)
		}
		if got := e.stat("cluster.web.upstream_rq_per_try_timeout"); got != 1 {
			t.Errorf("upstream_rq_per_try_timeout = %d; want 1", got)
		}
	})
}

func TestCircuitBreakerOverflow(t *testing.T) {
	up := newBlocking(t, 0)
	e := newEnv(t, envOptions{
		clusters: []string{staticCluster("web", "circuit_breakers: {thresholds: [{max_requests: 1}]}", up.srv.Listener.Addr().String())},
		hcm:      simpleHCM("web", ""),
	})
	c := e.client()
	first := make(chan int, 1)
	go func() {
		resp, err := c.Get("http://" + e.addr + "/first")
		if err != nil {
			first <- 0
			return
		}
		resp.Body.Close()
		first <- resp.StatusCode
	}()
	up.waitStarted(t, 1)
	resp, body := e.get(c, "/second")
	want := "upstream connect error or disconnect/reset before headers. reset reason: overflow"
	if resp.StatusCode != 503 || body != want {
		t.Errorf("got %d %q; want 503 %q", resp.StatusCode, body, want)
	}
	if got := resp.Header.Get("X-Envoy-Overloaded"); got != "true" {
		t.Errorf("x-envoy-overloaded = %q; want true", got)
	}
	up.unblock()
	if got := <-first; got != 200 {
		t.Errorf("first request status = %d; want 200", got)
	}
	if got := e.stat("cluster.web.upstream_rq_pending_overflow"); got != 1 {
		t.Errorf("upstream_rq_pending_overflow = %d; want 1", got)
	}
}

func TestWeightedClusters(t *testing.T) {
	a, b := echo(t, "a"), echo(t, "b")
	hcm := `stat_prefix: ingress
route_config:
  virtual_hosts:
  - name: all
    domains: ["*"]
    routes:
    - match: {prefix: "/"}
      route:
        weighted_clusters:
          clusters: [{name: a, weight: 80}, {name: b, weight: 20}]
`
	e := newEnv(t, envOptions{
		clusters: []string{staticCluster("a", "", a.Listener.Addr().String()), staticCluster("b", "", b.Listener.Addr().String())},
		hcm:      hcm,
	})
	c := e.client()
	const n = 500
	got := map[string]int{}
	for range n {
		resp, _ := e.get(c, "/")
		got[resp.Header.Get("X-Upstream")]++
	}
	if share := float64(got["a"]) / n; share < 0.7 || share > 0.9 {
		t.Errorf("share of a = %.2f (%v); want 0.8 ± 0.1", share, got)
	}
	if got["a"]+got["b"] != n {
		t.Errorf("responses = %v; want %d from a and b", got, n)
	}
}

func TestHashPolicyRingHash(t *testing.T) {
	var addrs []string
	for _, name := range []string{"h1", "h2", "h3"} {
		addrs = append(addrs, echo(t, name).Listener.Addr().String())
	}
	e := newEnv(t, envOptions{
		clusters: []string{staticCluster("web", "lb_policy: RING_HASH", addrs...)},
		hcm:      simpleHCM("web", ", hash_policy: [{header: {header_name: x-user}}]"),
	})
	c := e.client()
	seen := map[string]bool{}
	for u := range 12 {
		user := fmt.Sprint("user-", u)
		var first string
		for i := range 5 {
			resp, _ := e.get(c, "/", "x-user", user)
			up := resp.Header.Get("X-Upstream")
			if i == 0 {
				first = up
				seen[up] = true
			} else if up != first {
				t.Errorf("%s: request %d went to %s; want %s as before", user, i, up, first)
			}
		}
	}
	if len(seen) < 2 {
		t.Errorf("12 users went to %v; want at least 2 hosts", seen)
	}
}

func TestSubsetRouting(t *testing.T) {
	v1, v2 := echo(t, "v1"), echo(t, "v2")
	ep := func(addr, version string) string {
		h, p, _ := net.SplitHostPort(addr)
		return fmt.Sprintf(`    - endpoint: {address: {socket_address: {address: %s, port_value: %s}}}
      metadata: {filter_metadata: {envoy.lb: {version: %s}}}
`, h, p, version)
	}
	cl := `name: web
type: STATIC
connect_timeout: 1s
lb_subset_config:
  fallback_policy: NO_FALLBACK
  subset_selectors: [{keys: [version]}]
load_assignment:
  cluster_name: web
  endpoints:
  - lb_endpoints:
` + ep(v1.Listener.Addr().String(), "v1") + ep(v2.Listener.Addr().String(), "v2")
	hcm := `stat_prefix: ingress
route_config:
  virtual_hosts:
  - name: all
    domains: ["*"]
    routes:
    - match: {prefix: "/v2"}
      route: {cluster: web, metadata_match: {filter_metadata: {envoy.lb: {version: v2}}}}
    - match: {prefix: "/v3"}
      route: {cluster: web, metadata_match: {filter_metadata: {envoy.lb: {version: v3}}}}
`
	e := newEnv(t, envOptions{clusters: []string{cl}, hcm: hcm})
	c := e.client()
	for i := range 10 {
		resp, _ := e.get(c, "/v2")
		if got := resp.Header.Get("X-Upstream"); got != "v2" {
			t.Fatalf("request %d went to %q; want v2", i, got)
		}
	}
	resp, body := e.get(c, "/v3")
	if resp.StatusCode != 503 || body != "no healthy upstream" {
		t.Errorf("unknown subset: got %d %q; want 503 %q", resp.StatusCode, body, "no healthy upstream")
	}
}

func TestHashPolicyGeneratedCookie(t *testing.T) {
	var addrs []string
	for _, name := range []string{"h1", "h2", "h3"} {
		addrs = append(addrs, echo(t, name).Listener.Addr().String())
	}
	e := newEnv(t, envOptions{
		clusters: []string{staticCluster("web", "lb_policy: RING_HASH", addrs...)},
		hcm:      simpleHCM("web", ", hash_policy: [{cookie: {name: sticky, ttl: 60s, path: /}}]"),
	})
	conn, err := net.Dial("tcp", e.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(wait))
	br := bufio.NewReader(conn)
	get := func(cookie string) *http.Response {
		t.Helper()
		req := "GET / HTTP/1.1\r\nHost: x\r\n"
		if cookie != "" {
			req += "Cookie: sticky=" + cookie + "\r\n"
		}
		if _, err := io.WriteString(conn, req+"\r\n"); err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp
	}
	first := get("")
	value := fmt.Sprintf("%016x", xxhash.Sum64String(conn.LocalAddr().String()+conn.RemoteAddr().String()))
	want := `sticky="` + value + `"; Max-Age=60; Path=/; HttpOnly`
	if got := first.Header.Get("Set-Cookie"); got != want {
		t.Fatalf("set-cookie = %q; want %q", got, want)
	}
	host := first.Header.Get("X-Upstream")
	for i := range 5 {
		resp := get(value)
		if got := resp.Header.Get("X-Upstream"); got != host {
			t.Errorf("request %d with the cookie went to %s; want %s", i, got, host)
		}
		if got := resp.Header.Get("Set-Cookie"); got != "" {
			t.Errorf("request %d: set-cookie = %q; want none", i, got)
		}
	}
}
