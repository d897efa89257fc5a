// Package chaintest runs a real listener for the network filters' tests: a listener manager
// with one listener on 127.0.0.1:0 whose filter chain is the filters under test followed by a
// terminal filter that writes "in\n" and closes, torn down when the test ends. It is imported
// by tests only.
package chaintest

import (
	"context"
	"fmt"
	"io"
	"net"
	"testing"
	"time"

	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/wrapperspb"
	"sigs.k8s.io/yaml"

	"github.com/legateproxy/legate/config"
	"github.com/legateproxy/legate/internal/grpcclient"
	"github.com/legateproxy/legate/internal/registry"
	"github.com/legateproxy/legate/listener"
	"github.com/legateproxy/legate/stats"
)

// Wait bounds how long a test waits for what should happen at once.
const Wait = 10 * time.Second

// Serve runs the listener. register adds the filters under test to the extension registry;
// dial is the listener manager's Dial (the filters' gRPC services); filters is the YAML of the chain's filters before the terminal one (flow-style list items
// followed by a comma). It returns the listener's address and the stats store, or the error
// of converting or adding the listener (a filter refusing its configuration).
func Serve(t testing.TB, register func(*registry.Builder), dial grpcclient.Dial, filters string) (string, *stats.Store, error) {
	t.Helper()
	return ServeHandler(t, register, dial, filters, func(c *listener.Conn) { io.WriteString(c, "in\n"); c.Close() })
}

// ServeHandler is Serve with terminal as the chain's terminal filter (which closes the
// connection when it is done).
func ServeHandler(t testing.TB, register func(*registry.Builder), dial grpcclient.Dial, filters string, terminal listener.HandlerFunc) (string, *stats.Store, error) {
	t.Helper()
	st, err := stats.New(stats.Config{})
	if err != nil {
		t.Fatal(err)
	}
	b := registry.NewBuilder()
	register(b)
	registry.Add(b, listener.TerminalFilters, "test.in", &wrapperspb.UInt64Value{}, func(*listener.ChainContext, any) (listener.FilterChainHandler, error) {
		return terminal, nil
	})
	ext, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	y := fmt.Sprintf(`{name: l, address: {socket_address: {address: 127.0.0.1, port_value: 0}}, filter_chains: [{filters: [
  %s
  {name: test.in}]}]}`, filters)
	j, err := yaml.YAMLToJSON([]byte(y))
	if err != nil {
		t.Fatal(err)
	}
	pb := &listenerv3.Listener{}
	if err := protojson.Unmarshal(j, pb); err != nil {
		t.Fatal(err)
	}
	l, err := config.ListenerFromProto(pb, config.Limits{Extensions: ext})
	if err != nil {
		return "", nil, err
	}
	m, err := listener.NewManager(listener.ManagerConfig{Stats: st, Extensions: ext, Dial: dial})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.AddStatic([]*config.Listener{l}); err != nil {
		return "", nil, err
	}
	if err := m.Start(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return m.Addrs()["l"][0].String(), st, nil
}

// Admitted dials addr and reports whether the terminal filter answered (the chain's filters
// let the connection on) rather than the connection closing without a byte.
func Admitted(t testing.TB, addr string) bool {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, Wait)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(Wait))
	b, _ := io.ReadAll(c)
	return string(b) == "in\n"
}

// Verdict is what a connection through a filter that calls a service should meet.
type Verdict struct {
	// Admitted: the terminal filter answers; else the connection closes without a byte.
	Admitted bool
	// MinWait is how long the decision must at least take (a call that waits for its
	// timeout).
	MinWait time.Duration
	// Counters are counter values under the filter's stats prefix, by name.
	Counters map[string]uint64
}

// Expect connects once to addr and checks v; prefix is the filter's stats prefix with its
// dot, whose gauge "active" (calls in flight) must be back to 0.
func Expect(t testing.TB, addr string, st *stats.Store, prefix string, v Verdict) {
	t.Helper()
	start := time.Now()
	if got := Admitted(t, addr); got != v.Admitted {
		t.Errorf("admitted = %v; want %v", got, v.Admitted)
	}
	if took := time.Since(start); took < v.MinWait {
		t.Errorf("decided after %v; want at least %v (the call's timeout)", took, v.MinWait)
	}
	for name, want := range v.Counters {
		if got := st.Counter(prefix + name).Value(); got != want {
			t.Errorf("%s%s = %d; want %d", prefix, name, got, want)
		}
	}
	if got := st.Gauge(prefix+"active", stats.Accumulate).Value(); got != 0 {
		t.Errorf("%sactive = %d after the call; want 0", prefix, got)
	}
}
