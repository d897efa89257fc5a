package hotrestart

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// testPath is an abstract socket path private to this test process, so
// parallel runs on one host never meet.
func testPath(t *testing.T) string {
	return fmt.Sprintf("@legate_test_%d_%s", os.Getpid(), strings.ReplaceAll(t.Name(), "/", "_"))
}

// startParent listens and serves until the test ends.
func startParent(t *testing.T, cfg ParentConfig) *Parent {
	t.Helper()
	p, err := Listen(cfg)
	if err != nil {
		t.Fatalf("Listen: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		p.Serve(ctx)
		close(done)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
		p.Close()
	})
	return p
}

func connect(t *testing.T, cfg ChildConfig) (*Child, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := Connect(ctx, cfg)
	if err == nil {
		t.Cleanup(func() { c.Close() })
	}
	return c, err
}

func TestVersionEncodesProtocol(t *testing.T) {
	if want := "legate." + strconv.Itoa(Protocol); Version != want {
		t.Errorf("Version = %q; want %q", Version, want)
	}
}

func TestSocketName(t *testing.T) {
	tests := []struct {
		name          string
		path          string
		baseID, epoch uint32
		want          string
	}{
		{name: "default path", path: "@envoy_domain_socket", baseID: 0, epoch: 0, want: "@envoy_domain_socket_legate_0_0"},
		{name: "file path", path: "/run/legate/hr", baseID: 7, epoch: 3, want: "/run/legate/hr_legate_7_3"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := SocketName(tc.path, tc.baseID, tc.epoch); got != tc.want {
				t.Errorf("SocketName(%q, %d, %d) = %q; want %q", tc.path, tc.baseID, tc.epoch, got, tc.want)
			}
		})
	}
	// envoy#11310: base id + epoch collided. Every (base id, epoch) pair in
	// a small square has its own name.
	seen := map[string]string{}
	for b := uint32(0); b < 30; b++ {
		for e := uint32(0); e < 30; e++ {
			n := SocketName("@x", b, e)
			if prev, dup := seen[n]; dup {
				t.Fatalf("base %d epoch %d and %s share %q", b, e, prev, n)
			}
			seen[n] = fmt.Sprintf("base %d epoch %d", b, e)
		}
	}
}

func TestHandshake(t *testing.T) {
	tests := []struct {
		name        string
		parent      ParentConfig
		child       ChildConfig
		wantErr     []string // substrings of the error; nil for success
		wantNoParen bool
	}{
		{
			name:   "same version",
			parent: ParentConfig{Epoch: 0, Build: "p"},
			child:  ChildConfig{Epoch: 1, Build: "c"},
		},
		{
			name:    "child speaks a newer protocol",
			parent:  ParentConfig{Epoch: 0},
			child:   ChildConfig{Epoch: 1, Version: "legate.2", Protocol: 2, Features: append(Features(), "udp_forwarding")},
			wantErr: []string{"hot restart version mismatch", `"legate.1"`, `"legate.2"`, "only the child has udp_forwarding"},
		},
		{
			name:    "parent speaks an older protocol",
			parent:  ParentConfig{Epoch: 0, Version: "legate.0", Protocol: 99, Features: []string{"listen_socket"}},
			child:   ChildConfig{Epoch: 1},
			wantErr: []string{"hot restart version mismatch", `"legate.0"`, "the parent (pid", "only the child has admin_socket, drain, stats, status, terminate"},
		},
		{
			name:        "no parent",
			parent:      ParentConfig{Epoch: 0, BaseID: 1},
			child:       ChildConfig{Epoch: 1, BaseID: 2},
			wantErr:     []string{"no hot-restart parent", "--restart-epoch 1", "_legate_2_0"},
			wantNoParen: true,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := testPath(t)
			tc.parent.SocketPath, tc.child.SocketPath = path, path
			startParent(t, tc.parent)
			c, err := connect(t, tc.child)
			if tc.wantErr == nil {
				if err != nil {
					t.Fatalf("Connect: %v", err)
				}
				if got := c.Parent(); got.Epoch != tc.parent.Epoch || got.PID != os.Getpid() || got.StartUnixNano == 0 {
					t.Errorf("Parent() = %+v; want epoch %d, pid %d, a start time", got, tc.parent.Epoch, os.Getpid())
				}
				return
			}
			if err == nil {
				t.Fatalf("Connect succeeded; want an error with %q", tc.wantErr)
			}
			for _, w := range tc.wantErr {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Connect error %q; want it to contain %q", err, w)
				}
			}
			var ve *VersionError
			if got := errors.As(err, &ve); got == tc.wantNoParen {
				t.Errorf("errors.As(%v, *VersionError) = %v; want %v", err, got, !tc.wantNoParen)
			}
			if got := errors.Is(err, ErrNoParent); got != tc.wantNoParen {
				t.Errorf("errors.Is(%v, ErrNoParent) = %v; want %v", err, got, tc.wantNoParen)
			}
		})
	}
}

func TestSecondChildRefused(t *testing.T) {
	path := testPath(t)
	startParent(t, ParentConfig{SocketPath: path, Epoch: 2})
	if _, err := connect(t, ChildConfig{SocketPath: path, Epoch: 3}); err != nil {
		t.Fatalf("first child: %v", err)
	}
	_, err := connect(t, ChildConfig{SocketPath: path, Epoch: 3})
	if err == nil || !strings.Contains(err.Error(), "already handing over") {
		t.Errorf("second child: error %v; want \"already handing over\"", err)
	}
}

func TestCheckHelloEpoch(t *testing.T) {
	mine := newHello("", 0, nil, "b", 4, 2)
	tests := []struct {
		name string
		peer *Hello
		want string
	}{
		{name: "epoch", peer: newHello("", 0, nil, "b", 4, 5), want: "epoch mismatch: the child has --restart-epoch 5; want 3"},
		{name: "base id", peer: newHello("", 0, nil, "b", 9, 3), want: "base id mismatch: this process has --base-id 4, the child 9"},
		{name: "match", peer: newHello("", 0, nil, "other build", 4, 3), want: ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := checkHello(mine, tc.peer, "child", 3)
			if tc.want == "" && got != "" || !strings.Contains(got, tc.want) {
				t.Errorf("checkHello = %q; want %q", got, tc.want)
			}
		})
	}
}

func TestListenInUse(t *testing.T) {
	tests := []struct {
		name string
		path func(t *testing.T) string
	}{
		{name: "abstract", path: testPath},
		{name: "file", path: func(t *testing.T) string { return filepath.Join(t.TempDir(), "hr") }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := tc.path(t)
			startParent(t, ParentConfig{SocketPath: path, BaseID: 3, SocketMode: 0o640})
			_, err := Listen(ParentConfig{SocketPath: path, BaseID: 3})
			if !errors.Is(err, ErrInUse) {
				t.Errorf("second Listen: %v; want ErrInUse", err)
			}
			// Another base id is free.
			p, err := Listen(ParentConfig{SocketPath: path, BaseID: 4})
			if err != nil {
				t.Fatalf("Listen with another base id: %v", err)
			}
			p.Close()
			if !strings.HasPrefix(path, "@") {
				fi, err := os.Stat(SocketName(path, 3, 0))
				if err != nil {
					t.Fatal(err)
				}
				if got := fi.Mode().Perm(); got != 0o640 {
					t.Errorf("socket file mode = %o; want 640", got)
				}
			}
		})
	}
}

func TestStaleSocketFileReplaced(t *testing.T) {
	path := filepath.Join(t.TempDir(), "hr")
	name := SocketName(path, 0, 0)
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: name, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	ln.SetUnlinkOnClose(false)
	ln.Close() // leaves the file, as a crashed process does
	p, err := Listen(ParentConfig{SocketPath: path})
	if err != nil {
		t.Fatalf("Listen over a stale file: %v", err)
	}
	p.Close()
}

// fakeServer is a parent's server: one TCP listener, an admin listener and
// counters.
type fakeServer struct {
	mu          sync.Mutex
	ln, adminLn net.Listener
	drained     atomic.Bool
	adminPassed chan struct{} // closed by the AdminPassed hook
	terminated  atomic.Bool
	exited      chan struct{}
}

func (f *fakeServer) hooks() Hooks {
	return Hooks{
		ListenSocket: func(a string) net.Listener {
			if a == "127.0.0.1:0" {
				return f.ln
			}
			return nil
		},
		AdminSocket: func(a string) net.Listener {
			if a == "127.0.0.1:0" {
				return f.adminLn
			}
			return nil
		},
		AdminPassed: func() { close(f.adminPassed) },
		Stats: func() Stats {
			return Stats{Counters: map[string]uint64{"c": 7}, Gauges: map[string]uint64{"g": 2}, ActiveConnections: 3, Draining: f.drained.Load()}
		},
		Status: func() Stats { return Stats{ActiveConnections: 3, Draining: f.drained.Load()} },
		Drain: func() {
			f.drained.Store(true)
			f.ln.Close()
		},
		Terminate: func() Stats {
			f.terminated.Store(true)
			return Stats{Counters: map[string]uint64{"c": 9}}
		},
		Exit: func() { close(f.exited) },
	}
}

func TestHandover(t *testing.T) {
	path := testPath(t)
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	adminLn, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer adminLn.Close()
	f := &fakeServer{ln: ln, adminLn: adminLn, exited: make(chan struct{}), adminPassed: make(chan struct{})}
	startParent(t, ParentConfig{SocketPath: path, BaseID: 5, Hooks: f.hooks()})
	c, err := connect(t, ChildConfig{SocketPath: path, BaseID: 5, Epoch: 1})
	if err != nil {
		t.Fatal(err)
	}

	got, err := c.ListenSocket(KindListener, "127.0.0.1:0")
	if err != nil || got == nil {
		t.Fatalf("ListenSocket = %v, %v; want the parent's socket", got, err)
	}
	defer got.Close()
	if got.Addr().String() != ln.Addr().String() {
		t.Errorf("inherited socket address = %s; want %s", got.Addr(), ln.Addr())
	}
	none, err := c.ListenSocket(KindListener, "127.0.0.1:1")
	if err != nil || none != nil {
		t.Errorf("ListenSocket(unknown) = %v, %v; want nil, nil", none, err)
	}
	admin, err := c.ListenSocket(KindAdmin, "127.0.0.1:0")
	if err != nil || admin == nil {
		t.Fatalf("admin socket = %v, %v", admin, err)
	}
	admin.Close()
	// The parent runs the hook after sending the socket, so the child may have it first.
	select {
	case <-f.adminPassed:
	case <-time.After(5 * time.Second):
		t.Error("AdminPassed hook not called within 5 s of the admin socket's handover")
	}

	// A connection made before the parent stops accepting, one queued
	// while nobody accepts, and one after the parent closed its copy all
	// reach the child: the socket is shared, not re-bound.
	dialed := make(chan net.Conn, 3)
	dial := func() {
		nc, err := net.Dial("tcp4", ln.Addr().String())
		if err != nil {
			t.Errorf("dial: %v", err)
			return
		}
		dialed <- nc
	}
	dial()
	st, err := c.Stats()
	if err != nil {
		t.Fatal(err)
	}
	want := Stats{Counters: map[string]uint64{"c": 7}, Gauges: map[string]uint64{"g": 2}, ActiveConnections: 3}
	if d := cmp.Diff(want, st); d != "" {
		t.Errorf("Stats() (-want +got):\n%s", d)
	}
	if err := c.Drain(); err != nil {
		t.Fatal(err)
	}
	dial()
	dial()
	for range 3 {
		nc, err := got.Accept()
		if err != nil {
			t.Fatalf("child accept: %v", err)
		}
		peer := <-dialed
		peer.Write([]byte("x"))
		b := make([]byte, 1)
		if _, err := io.ReadFull(nc, b); err != nil {
			t.Errorf("reading from an accepted connection: %v", err)
		}
		nc.Close()
		peer.Close()
	}
	st, err = c.Status()
	if d := cmp.Diff(Stats{ActiveConnections: 3, Draining: true}, st); err != nil || d != "" {
		t.Errorf("Status() after Drain: %v (-want +got):\n%s", err, d)
	}
	final, err := c.Terminate()
	if err != nil {
		t.Fatal(err)
	}
	if got := final.Counters["c"]; got != 9 {
		t.Errorf("final counter c = %d; want 9", got)
	}
	select {
	case <-f.exited:
	case <-time.After(10 * time.Second):
		t.Fatal("Exit hook not called after Terminate")
	}
	if _, err := c.Stats(); err == nil {
		t.Error("Stats after Terminate succeeded; want an error (connection closed)")
	}
}

func TestUnixListenerHandover(t *testing.T) {
	path := testPath(t)
	sockPath := filepath.Join(t.TempDir(), "pipe")
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: sockPath, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	ln.SetUnlinkOnClose(false) // as the listener manager does before passing it
	startParent(t, ParentConfig{SocketPath: path, Hooks: Hooks{ListenSocket: func(a string) net.Listener {
		if a == sockPath {
			return ln
		}
		return nil
	}}})
	c, err := connect(t, ChildConfig{SocketPath: path, Epoch: 1})
	if err != nil {
		t.Fatal(err)
	}
	got, err := c.ListenSocket(KindListener, sockPath)
	if err != nil || got == nil {
		t.Fatalf("ListenSocket = %v, %v", got, err)
	}
	ln.Close() // the parent's copy: must not remove the path
	nc, err := net.Dial("unix", sockPath)
	if err != nil {
		t.Fatalf("dial after the parent closed its copy: %v", err)
	}
	nc.Close()
	a, err := got.Accept()
	if err != nil {
		t.Fatal(err)
	}
	a.Close()
	got.Close()
	if _, err := os.Stat(sockPath); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("socket file after the child closed it: %v; want removed", err)
	}
}

func TestProtocolErrors(t *testing.T) {
	tests := []struct {
		name string
		send []byte
		want string
	}{
		{name: "bad magic", send: []byte("HTTP/1.1"), want: "frame magic"},
		{name: "huge body", send: []byte("LGHR\xff\xff\xff\xff"), want: "frame body"},
		{name: "first not hello", send: frame(`{"type":"stats"}`), want: "must be hello"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := testPath(t)
			startParent(t, ParentConfig{SocketPath: path})
			nc, err := net.Dial("unix", SocketName(path, 0, 0))
			if err != nil {
				t.Fatal(err)
			}
			defer nc.Close()
			nc.SetDeadline(time.Now().Add(10 * time.Second))
			nc.Write(tc.send)
			cn := &conn{uc: nc.(*net.UnixConn)}
			m, files, err := cn.read()
			closeFiles(files)
			if tc.want == "must be hello" {
				if err != nil || m.Type != typeError || !strings.Contains(m.Error, tc.want) {
					t.Errorf("reply = %+v, %v; want an error message with %q", m, err, tc.want)
				}
				return
			}
			// The parent drops a peer that does not speak the protocol.
			if err == nil {
				t.Errorf("reply %+v; want the connection closed", m)
			}
		})
	}
}

func frame(body string) []byte {
	b := []byte(frameMagic + "\x00\x00\x00\x00" + body)
	b[7] = byte(len(body))
	return b
}

func TestParseBody(t *testing.T) {
	tests := []struct {
		name, body, wantErr string
	}{
		{name: "hello", body: `{"type":"hello","hello":{"version":"legate.1","protocol":1}}`},
		{name: "unknown fields ignored", body: `{"type":"stats","future":true}`},
		{name: "hello without body", body: `{"type":"hello"}`, wantErr: `hello message without its "hello" field`},
		{name: "unknown type", body: `{"type":"udp"}`, wantErr: `message type "udp"`},
		{name: "not json", body: `{`, wantErr: "hot restart: message"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parseBody([]byte(tc.body))
			if (err == nil) != (tc.wantErr == "") || err != nil && !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("parseBody(%s) error = %v; want %q", tc.body, err, tc.wantErr)
			}
		})
	}
}

func FuzzFrame(f *testing.F) {
	f.Add(frame(`{"type":"hello","hello":{"version":"legate.1","protocol":1,"features":["stats"]}}`))
	f.Add(frame(`{"type":"socket","socket":{"kind":"listener","address":"127.0.0.1:0"}}`))
	f.Add(frame(`{"type":"stats","stats":{"counters":{"a":1}}}`))
	f.Add([]byte("LGHR\x00\x00\x00"))
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) < headerSize {
			return
		}
		size, err := parseHeader(b[:headerSize])
		if err != nil {
			return
		}
		if size <= 0 || size > maxBodySize {
			t.Fatalf("parseHeader accepted size %d", size)
		}
		body := b[headerSize:]
		if len(body) > size {
			body = body[:size]
		}
		m, err := parseBody(body)
		if err != nil {
			return
		}
		if m.Type == typeHello && m.Hello == nil || m.Type == typeSocket && m.Socket == nil {
			t.Fatalf("parseBody accepted %s without its field", m.Type)
		}
	})
}

// BenchmarkStatsRoundTrip measures one stats snapshot of 10,000 counters
// from parent to child (the per-flush import during a hot restart).
func BenchmarkStatsRoundTrip(b *testing.B) {
	counters := make(map[string]uint64, 10000)
	for i := range 10000 {
		counters[fmt.Sprintf("cluster.service_%d.upstream_rq_total", i)] = uint64(i)
	}
	path := fmt.Sprintf("@legate_bench_%d", os.Getpid())
	p, err := Listen(ParentConfig{SocketPath: path, Hooks: Hooks{Stats: func() Stats { return Stats{Counters: counters} }}})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		p.Serve(ctx)
		close(done)
	}()
	defer func() {
		cancel()
		<-done
	}()
	c, err := Connect(context.Background(), ChildConfig{SocketPath: path, Epoch: 1})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	for b.Loop() {
		st, err := c.Stats()
		if err != nil || len(st.Counters) != 10000 {
			b.Fatalf("Stats() = %d counters, %v", len(st.Counters), err)
		}
	}
}
