package pool

import (
	"context"
	"crypto/tls"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/legateproxy/legate/host"
	"github.com/legateproxy/legate/internal/clock"
	"github.com/legateproxy/legate/internal/nettest"
	"github.com/legateproxy/legate/tlsutil/tlstest"
)

// smuggled is a whole response an upstream sends where none was asked for. A pool that
// reuses the connection hands it to the next request.
const smuggled = "HTTP/1.1 200 OK\r\nContent-Length: 8\r\n\r\nsmuggled"

// scriptedUpstream is an HTTP/1.1 upstream that misbehaves on purpose (nettest.ServeHTTP1).
type scriptedUpstream struct {
	addr     string
	accepted *atomic.Int64
}

// newScriptedUpstream serves on 127.0.0.1, over TLS when cfg is not nil.
func newScriptedUpstream(t *testing.T, cfg *tls.Config, answer func(c net.Conn, method, path string)) *scriptedUpstream {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &scriptedUpstream{addr: ln.Addr().String()}
	if cfg != nil {
		ln = tls.NewListener(ln, cfg)
	}
	s.accepted = nettest.ServeHTTP1(t, ln, answer)
	return s
}

// upstreamTLS is a server configuration with a fresh self-signed certificate.
func upstreamTLS(t *testing.T) *tls.Config {
	leaf := tlstest.SelfSigned(t, tlstest.Options{CommonName: "upstream", IPs: []string{"127.0.0.1"}})
	return &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{leaf.Cert.Raw}, PrivateKey: leaf.Key}}}
}

// TestNoReuseWithUnreadBytes sends a first request whose response leaves bytes behind it (or
// is followed by bytes on the idle connection), then a second one: the second must get its
// own response on a new connection, never the bytes, and the bytes count as a protocol error.
func TestNoReuseWithUnreadBytes(t *testing.T) {
	tests := []struct {
		name   string
		method string
		first  string // the answer to the first request
		later  string // written once the first answer was, on the then idle connection
	}{
		{name: "bytes past content-length", method: "GET", first: "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nfirst" + smuggled},
		{name: "body with HEAD", method: "HEAD", first: "HTTP/1.1 200 OK\r\nContent-Length: 44\r\n\r\n" + smuggled},
		{name: "body with 204", method: "GET", first: "HTTP/1.1 204 No Content\r\n\r\n" + smuggled},
		{name: "body with 304", method: "GET", first: "HTTP/1.1 304 Not Modified\r\n\r\n" + smuggled},
		{name: "bytes on the idle connection", method: "GET", first: "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nfirst", later: smuggled},
	}
	for _, tt := range tests {
		for _, useTLS := range []bool{false, true} {
			name := tt.name
			if useTLS {
				name += " over TLS"
			}
			t.Run(name, func(t *testing.T) {
				var srvTLS, cliTLS *tls.Config
				if useTLS {
					srvTLS, cliTLS = upstreamTLS(t), &tls.Config{InsecureSkipVerify: true}
				}
				script := &nettest.StrayBytes{First: tt.first, Later: tt.later, LaterSent: make(chan struct{}, 1),
					Other: "HTTP/1.1 200 OK\r\nContent-Length: 6\r\n\r\nsecond"}
				s := newScriptedUpstream(t, srvTLS, script.Answer)
				cm, store := newClusterManager(t, staticCluster("", s.addr))
				m := newManager(t, cm, store, func(c *ManagerConfig) {
					if cliTLS != nil {
						c.TLS = func(*host.Host) *tls.Config { return cliTLS }
					}
				})
				h := onlyHost(t, m)
				var resp Response
				if err := m.RoundTrip(context.Background(), h, &Request{Method: tt.method, Path: "/first"}, &resp); err != nil {
					t.Fatalf("first RoundTrip = %v; want nil", err)
				}
				io.Copy(io.Discard, resp.Body)
				resp.Close()
				if tt.later != "" {
					select {
					case <-script.LaterSent:
					case <-time.After(10 * time.Second):
						t.Fatal("upstream did not write on the idle connection")
					}
				}
				if code, body := get(t, m, h, "/second"); code != 200 || body != "second" {
					t.Errorf("second request = %d %q; want 200 \"second\"", code, body)
				}
				if got := m.st.UpstreamCxProtocolError.Value(); got != 1 {
					t.Errorf("upstream_cx_protocol_error = %d; want 1", got)
				}
				if got := s.accepted.Load(); got != 2 {
					t.Errorf("upstream connections = %d; want 2", got)
				}
			})
		}
	}
}

// TestIdleCloseNoticed: an upstream that closed an idle connection is noticed when the
// connection is taken, so even a request with a body (which is not retried blindly) goes to
// a new connection.
func TestIdleCloseNoticed(t *testing.T) {
	closed := make(chan struct{}, 1)
	s := newScriptedUpstream(t, nil, func(c net.Conn, method, path string) {
		io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
		if path == "/first" {
			c.Close()
			closed <- struct{}{}
		}
	})
	cm, store := newClusterManager(t, staticCluster("", s.addr))
	m := newManager(t, cm, store, nil)
	h := onlyHost(t, m)
	get(t, m, h, "/first")
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		t.Fatal("upstream did not close the connection")
	}
	var resp Response
	req := Request{Method: "POST", Path: "/second", Body: strings.NewReader("hello"), ContentLength: 5}
	if err := m.RoundTrip(context.Background(), h, &req, &resp); err != nil {
		t.Fatalf("POST after the idle close = %v; want nil", err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Close()
	if resp.StatusCode != 200 || string(body) != "ok" {
		t.Errorf("POST = %d %q; want 200 \"ok\"", resp.StatusCode, body)
	}
	if got := m.st.UpstreamCxDestroyRemote.Value(); got != 1 {
		t.Errorf("upstream_cx_destroy_remote = %d; want 1", got)
	}
	if got := m.st.UpstreamCxProtocolError.Value(); got != 0 {
		t.Errorf("upstream_cx_protocol_error = %d; want 0", got)
	}
}

// TestCloseAfterRequestWakesWait: an upstream that reads a request on a kept-alive connection
// and closes it unanswered wakes the exchange waiting for the answer (send's wait after the
// write); the request, with no response byte received, goes again on a new connection. A
// third request, answered after a delay, shows the wait also ends when the answer comes late.
func TestCloseAfterRequestWakesWait(t *testing.T) {
	var dropped atomic.Bool
	s := newScriptedUpstream(t, nil, func(c net.Conn, method, path string) {
		switch {
		case path == "/drop" && !dropped.Swap(true):
			c.Close()
			return
		case path == "/late":
			time.Sleep(50 * time.Millisecond) // a slow upstream: the answer comes after the wait began
		}
		io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
	})
	cm, store := newClusterManager(t, staticCluster("", s.addr))
	m := newManager(t, cm, store, nil)
	h := onlyHost(t, m)
	for _, path := range []string{"/first", "/drop", "/late"} {
		// The bound turns a missed wake-up into a failure instead of a hung test.
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		var resp Response
		err := m.RoundTrip(ctx, h, &Request{Method: "GET", Path: path, Host: "example.com"}, &resp)
		cancel()
		if err != nil {
			t.Fatalf("GET %s = %v; want nil", path, err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Close()
		if resp.StatusCode != 200 || string(body) != "ok" {
			t.Errorf("GET %s = %d %q; want 200 \"ok\"", path, resp.StatusCode, body)
		}
	}
	if got := s.accepted.Load(); got != 2 {
		t.Errorf("upstream connections = %d; want 2 (the dropped request went again on a new one)", got)
	}
}

// TestDeadlineAcrossReuse: a kept-alive connection carries each request's own deadline,
// whatever the previous request left on it. The idle check clears a deadline that passed
// while the connection was idle, and leaves one well ahead for the next exchange, which sets
// its own (an earlier one fires in time) or clears it (a request without one is not cut).
func TestDeadlineAcrossReuse(t *testing.T) {
	release := make(chan struct{})
	s := newScriptedUpstream(t, nil, func(c net.Conn, method, path string) {
		switch path {
		case "/slow":
			<-release
		case "/late":
			time.Sleep(2500 * time.Millisecond) // longer than the deadline the previous request left
		}
		io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
	})
	t.Cleanup(func() { close(release) })
	cm, store := newClusterManager(t, staticCluster("", s.addr))
	m := newManager(t, cm, store, nil)
	h := onlyHost(t, m)
	do := func(ctx context.Context, path string) error {
		var resp Response
		if err := m.RoundTrip(ctx, h, &Request{Method: "GET", Path: path, Host: "example.com"}, &resp); err != nil {
			return err
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Close()
		if resp.StatusCode != 200 || string(body) != "ok" {
			t.Errorf("GET %s = %d %q; want 200 \"ok\"", path, resp.StatusCode, body)
		}
		return nil
	}
	get := func(d time.Duration, path string) error {
		ctx := context.Background()
		if d > 0 {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, d)
			defer cancel()
		}
		return do(ctx, path)
	}

	// A deadline that passes while the connection is idle. It leaves the exchange (a dial
	// too) a second: 150 ms ran out under load (-race, load 28); the test then waits for the
	// socket's deadline itself (set 1/deadlineLateness of the timeout later than the
	// context's) rather than sleeping past a guess of it.
	short, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if err := do(short, "/short"); err != nil {
		t.Fatalf("GET /short = %v", err)
	}
	dl, _ := short.Deadline()
	<-time.After(time.Until(dl.Add(time.Second/deadlineLateness + time.Millisecond))) // it passes on the idle connection
	if err := get(0, "/after-expiry"); err != nil {
		t.Fatalf("GET after the previous deadline passed = %v; want nil", err)
	}
	// A deadline a minute ahead, then a request with an earlier one: the earlier one fires.
	if err := get(time.Minute, "/minute"); err != nil {
		t.Fatalf("GET /minute = %v", err)
	}
	start := time.Now()
	if err := get(time.Second, "/slow"); err == nil {
		t.Fatal("GET /slow with a 1s deadline, never answered = nil; want an error")
	}
	if took := time.Since(start); took > 30*time.Second {
		t.Errorf("GET /slow took %v; want about 1s (its own deadline, not the minute the previous one had)", took)
	}
	// A deadline left ahead (1.5s), then a request without one, answered after it.
	if err := get(1500*time.Millisecond, "/quick"); err != nil {
		t.Fatalf("GET /quick = %v", err)
	}
	if err := get(0, "/late"); err != nil {
		t.Fatalf("GET /late without a deadline, answered after the previous deadline = %v; want nil", err)
	}
}

// TestDeadlineKeptWithinMargin: an exchange keeps the socket deadline an earlier exchange on
// the connection set when that one is no earlier than its own and later by at most its margin
// (1/64 of its timeout); otherwise it sets its own, that margin late, or clears it.
func TestDeadlineKeptWithinMargin(t *testing.T) {
	s := newScriptedUpstream(t, nil, func(c net.Conn, method, path string) {
		io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
	})
	cm, store := newClusterManager(t, staticCluster("", s.addr))
	m := newManager(t, cm, store, nil)
	h := onlyHost(t, m)
	hp := hostPoolOf(t, m)
	start := time.Now()
	// send runs one exchange started at start+at with the deadline start+dl (none when 0),
	// and returns the deadline left on the connection (zero when none).
	send := func(at, dl time.Duration) time.Time {
		ctx := context.Background()
		if dl > 0 {
			var cancel context.CancelFunc
			ctx, cancel = context.WithDeadline(ctx, start.Add(dl))
			defer cancel()
		}
		var resp Response
		req := Request{Method: "GET", Path: "/", Host: "example.com", Start: clock.MonoAt(start.Add(at))}
		if err := m.RoundTrip(ctx, h, &req, &resp); err != nil {
			t.Fatalf("RoundTrip = %v", err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Close()
		c := hp.popIdle()
		if c == nil {
			t.Fatal("no idle connection after the exchange")
		}
		defer hp.putIdle(c, clock.Mono())
		if !c.deadline {
			return time.Time{}
		}
		return c.deadlineAt
	}
	steps := []struct {
		name    string
		at, dl  time.Duration
		want    time.Duration // the deadline left, from start
		wantNil bool
	}{
		{name: "first: its deadline and a margin of timeout/64", at: 0, dl: 32 * time.Second, want: 32*time.Second + 500*time.Millisecond},
		{name: "later by less than the margin: kept", at: 100 * time.Millisecond, dl: 32*time.Second + 100*time.Millisecond, want: 32*time.Second + 500*time.Millisecond},
		{name: "later than the one set: set anew", at: 600 * time.Millisecond, dl: 32*time.Second + 600*time.Millisecond, want: 33*time.Second + 100*time.Millisecond},
		{name: "earlier by more than its margin: set anew", at: 600 * time.Millisecond, dl: 6*time.Second + 600*time.Millisecond, want: 6*time.Second + 600*time.Millisecond + 93750*time.Microsecond},
		{name: "a long timeout's margin is at most a second", at: 0, dl: time.Hour, want: time.Hour + time.Second},
		{name: "no deadline: cleared", wantNil: true},
	}
	for _, st := range steps {
		got := send(st.at, st.dl)
		switch {
		case st.wantNil && !got.IsZero():
			t.Errorf("%s: deadline %v after start; want none", st.name, got.Sub(start))
		case !st.wantNil && !got.Equal(start.Add(st.want)):
			t.Errorf("%s: deadline %v after start; want %v", st.name, got.Sub(start), st.want)
		}
	}
	if got := s.accepted.Load(); got != 1 {
		t.Errorf("upstream connections = %d; want 1", got)
	}
}

// TestUncleanIdleRefusedAtSend: a request without a body checks the idle connection it takes
// in the raw read that writes it (send). Idle connections on which the upstream sent bytes
// or which it closed are refused there, before the request is written on them: the request
// goes on a new connection, the bytes count upstream_cx_protocol_error and the close
// upstream_cx_destroy_remote, and the upstream never receives the request on a refused one.
func TestUncleanIdleRefusedAtSend(t *testing.T) {
	for _, tt := range []struct {
		name             string
		stray            bool // the upstream sends bytes on its idle connections, else closes them
		protocol, remote uint64
	}{
		{name: "bytes", stray: true, protocol: 2},
		{name: "close", remote: 2},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var mu sync.Mutex
			seen := map[net.Conn][]string{} // the targets each connection received
			both, spoil := make(chan struct{}), make(chan struct{})
			var firsts atomic.Int32
			idled := make(chan struct{}, 2)
			s := newScriptedUpstream(t, nil, func(c net.Conn, method, path string) {
				mu.Lock()
				seen[c] = append(seen[c], path)
				mu.Unlock()
				if path != "/first" {
					io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 6\r\n\r\nsecond")
					return
				}
				if firsts.Add(1) == 2 { // both first requests are in: two connections
					close(both)
				}
				<-both
				io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
				<-spoil // the connection is idle in the pool
				if tt.stray {
					io.WriteString(c, smuggled)
				} else {
					c.Close()
				}
				idled <- struct{}{}
			})
			cm, store := newClusterManager(t, staticCluster("", s.addr))
			m := newManager(t, cm, store, nil)
			h := onlyHost(t, m)
			errc := make(chan error, 2)
			for range 2 {
				go func() {
					var resp Response
					err := m.RoundTrip(context.Background(), h, &Request{Method: "GET", Path: "/first", Host: "example.com"}, &resp)
					if err == nil {
						_, err = io.Copy(io.Discard, resp.Body)
						resp.Close()
					}
					errc <- err
				}()
			}
			for range 2 {
				if err := <-errc; err != nil {
					t.Fatalf("first requests: %v", err)
				}
			}
			close(spoil)
			for range 2 {
				select {
				case <-idled:
				case <-time.After(10 * time.Second):
					t.Fatal("upstream did not spoil its idle connections")
				}
			}
			waitFor(t, "the stray bytes or the close to reach the pool's sockets", func() bool {
				// Both idle connections' sockets hold the bytes or the end of stream.
				hp := hostPoolOf(t, m)
				n := 0
				for {
					c := hp.popIdle()
					if c == nil {
						break
					}
					defer hp.putIdle(c, clock.Mono())
					raw, _ := rawSocket(c.uc.Conn)
					var st idleState
					raw.Read(func(fd uintptr) bool { st = peekFD(fd); return true })
					if st != idleClean {
						n++
					}
				}
				return n == 2
			})
			// Both are left for send to check.
			hp := hostPoolOf(t, m)
			var idle []*h1conn
			for c := hp.popIdle(); c != nil; c = hp.popIdle() {
				idle = append(idle, c)
			}
			for _, c := range idle {
				second := &Request{Method: "GET", Path: "/second", Host: "example.com"}
				if !c.unchecked || !c.checkAtSend(second, headSize(second, "")) {
					t.Errorf("idle connection unchecked %v, checked at send %v; want both", c.unchecked, c.checkAtSend(second, headSize(second, "")))
				}
				hp.putIdle(c, clock.Mono())
			}
			if code, body := get(t, m, h, "/second"); code != 200 || body != "second" {
				t.Errorf("GET /second = %d %q; want 200 \"second\"", code, body)
			}
			if got := m.st.UpstreamCxProtocolError.Value(); got != tt.protocol {
				t.Errorf("upstream_cx_protocol_error = %d; want %d", got, tt.protocol)
			}
			if got := m.st.UpstreamCxDestroyRemote.Value(); got != tt.remote {
				t.Errorf("upstream_cx_destroy_remote = %d; want %d", got, tt.remote)
			}
			if got := s.accepted.Load(); got != 3 {
				t.Errorf("upstream connections = %d; want 3", got)
			}
			mu.Lock()
			defer mu.Unlock()
			for c, paths := range seen {
				if len(paths) > 1 && paths[0] == "/first" {
					t.Errorf("connection %v received %v; want nothing after /first", c.RemoteAddr(), paths)
				}
			}
		})
	}
}
