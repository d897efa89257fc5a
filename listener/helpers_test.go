package listener

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"
	"sigs.k8s.io/yaml"

	"github.com/legateproxy/legate/config"
	"github.com/legateproxy/legate/internal/clock/clocktest"
	"github.com/legateproxy/legate/internal/registry"
	"github.com/legateproxy/legate/listener/tlsinspector/hellotest"
	"github.com/legateproxy/legate/stats"
)

// wait is how long a test waits for something that should happen at once.
const wait = 10 * time.Second

// newFakeClock returns the fake clock the listener tests drive.
func newFakeClock() *clocktest.Fake {
	return clocktest.NewFake(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
}

// listenerFromYAML parses a Listener in Envoy's YAML and converts it.
func listenerFromYAML(t testing.TB, y string) *config.Listener {
	t.Helper()
	j, err := yaml.YAMLToJSON([]byte(y))
	if err != nil {
		t.Fatalf("YAMLToJSON: %v", err)
	}
	pb := &listenerv3.Listener{}
	if err := protojson.Unmarshal(j, pb); err != nil {
		t.Fatalf("protojson.Unmarshal: %v", err)
	}
	l, err := config.ListenerFromProto(pb, config.Limits{})
	if err != nil {
		t.Fatalf("ListenerFromProto: %v", err)
	}
	return l
}

// greeter is the test network filter "test.greet": it writes its filter chain's name and a
// newline, then serves line requests until the client closes. A "slow" request waits for
// release before its "ok" reply. After each reply it closes the connection when DrainClose
// says so; when a drain starts while it waits for a request, it closes the idle connection.
// Every connection it served is sent on served once closed.
type greeter struct {
	served  chan *Conn
	release chan struct{}
	started chan *Conn    // receives each connection once its greeting is written
	waiting chan struct{} // receives once per "slow" request, before it waits for release
}

func newGreeter() *greeter {
	return &greeter{served: make(chan *Conn, 100), release: make(chan struct{}), started: make(chan *Conn, 100), waiting: make(chan struct{}, 100)}
}

// services gives the greeter as the handler of "test.greet" (registerTestTerminals).
func (g *greeter) services() Services {
	return serving("test.greet", func(*ChainContext, any) (FilterChainHandler, error) { return HandlerFunc(g.serve), nil })
}

// serving is the Services that make the test terminal filter name serve with f.
func serving(name string, f HandlerFactory) Services { return Services{name: f} }

// registerTestTerminals registers the terminal filters of the listener tests, each under a
// config message of its own (none reads one): each serves with the HandlerFactory the test
// gives in ManagerConfig.Services under the filter's name, so a test's handler reaches the
// chain as the server's services reach the connection manager.
func registerTestTerminals(b *registry.Builder) {
	for name, msg := range map[string]proto.Message{
		"test.greet": &wrapperspb.StringValue{}, "test.addrs": &wrapperspb.BytesValue{},
		"bench": &wrapperspb.BoolValue{}, "hold": &wrapperspb.Int32Value{}, "echo": &wrapperspb.Int64Value{},
		"test.state": &wrapperspb.UInt32Value{},
	} {
		registry.Add(b, TerminalFilters, name, msg, func(ctx *ChainContext, config any) (FilterChainHandler, error) {
			f, err := Service[HandlerFactory](ctx.Services, name)
			if err != nil {
				return nil, err
			}
			return f(ctx, config)
		})
	}
}

func (g *greeter) serve(c *Conn) {
	defer func() { g.served <- c }()
	defer c.Close()
	if _, err := io.WriteString(c, c.FilterChainName()+"\n"); err != nil {
		return
	}
	g.started <- c
	var mu sync.Mutex
	busy := false
	done := make(chan struct{})
	defer close(done)
	go func() { // closes the connection when a drain starts and it is idle
		select {
		case <-c.DrainStarted():
			mu.Lock()
			if !busy {
				c.Close()
			}
			mu.Unlock()
		case <-done:
		}
	}()
	r := bufio.NewReader(c)
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return
		}
		mu.Lock()
		busy = true
		mu.Unlock()
		if strings.TrimSpace(line) == "slow" {
			g.waiting <- struct{}{}
			<-g.release
		}
		if _, err := io.WriteString(c, "ok\n"); err != nil {
			return
		}
		if c.DrainClose() {
			return
		}
		mu.Lock()
		busy = false
		mu.Unlock()
	}
}

// testManager builds a manager over a new store, adds ls as static listeners, runs it and
// stops it at the end of the test.
func testManager(t testing.TB, cfg ManagerConfig, ls ...*config.Listener) *Manager {
	t.Helper()
	if cfg.Extensions == nil {
		cfg.Extensions = testExtensions(t)
	}
	if cfg.Stats == nil {
		st, err := stats.New(stats.Config{})
		if err != nil {
			t.Fatal(err)
		}
		cfg.Stats = st
	}
	m, err := NewManager(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.AddStatic(ls); err != nil {
		t.Fatalf("AddStatic: %v", err)
	}
	if err := m.Start(); err != nil {
		t.Fatalf("Start: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run() = %v", err)
		}
	})
	return m
}

// addrOf returns the first bound address of the listener called name.
func addrOf(t testing.TB, m *Manager, name string) string {
	t.Helper()
	as := m.Addrs()[name]
	if len(as) == 0 {
		t.Fatalf("listener %q has no bound address", name)
	}
	return as[0].String()
}

// greet dials addr, writes first (a ClientHello or nothing) and returns the greeting line and
// the connection.
func greet(t testing.TB, addr string, first []byte) (string, net.Conn, *bufio.Reader) {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, wait)
	if err != nil {
		t.Fatalf("dial %s: %v", addr, err)
	}
	c.SetDeadline(time.Now().Add(wait))
	if len(first) > 0 {
		if _, err := c.Write(first); err != nil {
			t.Fatalf("write: %v", err)
		}
	}
	r := bufio.NewReader(c)
	line, err := r.ReadString('\n')
	if err != nil {
		c.Close()
		return "", nil, nil
	}
	return strings.TrimSuffix(line, "\n"), c, r
}

// helloBytes returns the first flight of a crypto/tls client offering sni and alpn.
func helloBytes(t testing.TB, sni string, alpn ...string) []byte {
	return hellotest.Bytes(t, sni, alpn...)
}

// statValue returns the value of the counter or gauge called name, and whether it exists.
func statValue(st *stats.Store, name string) (uint64, bool) {
	var v uint64
	found := false
	st.Each(stats.KindSet(stats.KindCounter, stats.KindGauge), func(s *stats.Stat) bool {
		if s.Name() == name {
			v, found = s.Value(), true
			return false
		}
		return true
	})
	return v, found
}

func wantStat(t testing.TB, st *stats.Store, name string, want uint64) {
	t.Helper()
	got, ok := statValue(st, name)
	if !ok {
		t.Errorf("stat %s does not exist", name)
		return
	}
	if got != want {
		t.Errorf("%s = %d; want %d", name, got, want)
	}
}

// expectClosed reads from c until EOF or an error other than a timeout.
func expectClosed(t testing.TB, c net.Conn, r io.Reader) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(wait))
	_, err := io.Copy(io.Discard, r)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Errorf("connection still open after %v", wait)
	}
}

func newStore(t testing.TB) *stats.Store {
	t.Helper()
	st, err := stats.New(stats.Config{})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func bufioReader(c net.Conn) *bufio.Reader { return bufio.NewReader(c) }
