package listener

import (
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/emptypb"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/legateproxy/legate/internal/registry"
)

// gate is a test ConnFilter: it admits connections while open is true, counts the closes it
// was told about and records its name in the order filters ran.
type gate struct {
	name   string
	open   atomic.Bool
	closes chan string // receives name from each close hook
	order  *order
}

// order records the filters that ran, across connection goroutines.
type order struct {
	mu    sync.Mutex
	names []string
}

func (o *order) add(name string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.names = append(o.names, name)
}

func (o *order) String() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return strings.Join(o.names, ",")
}

func (g *gate) OnConnection(c *Conn) bool {
	g.order.add(g.name)
	if !g.open.Load() {
		return false
	}
	c.OnClose(func() { g.closes <- g.name })
	return true
}

// TestConnFilters: non-terminal network filters run in chain order on each connection
// before the terminal filter; one that refuses closes the connection before the terminal
// filter sees it; close hooks run when the connection closes; a terminal filter that is not
// last, or a non-terminal one that is, is refused with the filter named.
func TestConnFilters(t *testing.T) {
	var ran order
	closes := make(chan string, 10)
	first, second := &gate{name: "first", order: &ran, closes: closes}, &gate{name: "second", order: &ran, closes: closes}
	first.open.Store(true)
	second.open.Store(true)
	b := registry.NewBuilder()
	// Each extension takes its own config message; these filters read none.
	for g, msg := range map[*gate]proto.Message{first: &emptypb.Empty{}, second: &structpb.Struct{}} {
		registry.Add(b, ConnFilters, "test."+g.name, msg, func(*ChainContext, any) (ConnFilter, error) { return g, nil })
	}
	registerTestTerminals(b)
	ext, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	st := newStore(t)
	m := testManager(t, ManagerConfig{Stats: st, Services: addrServices(), Extensions: ext}, listenerFromYAML(t,
		`{name: l, stat_prefix: l, address: {socket_address: {address: 127.0.0.1, port_value: 0}}, filter_chains: [{name: c, filters: [{name: test.first}, {name: test.second}, {name: test.addrs}]}]}`))
	line, c, r2 := dialWith(t, addrOf(t, m, "l"), nil, "")
	if !strings.HasPrefix(line, "c ") {
		t.Fatalf("the terminal filter wrote %q", line)
	}
	c.Close()
	expectClosed(t, c, r2)
	// The handler closes its side once the client's close reaches it: both hooks run.
	for range 2 {
		select {
		case <-closes:
		case <-time.After(wait):
			t.Fatal("the close hooks did not run")
		}
	}
	if got := ran.String(); got != "first,second" {
		t.Errorf("filters ran in order %q; want first,second", got)
	}

	second.open.Store(false)
	line, c, r2 = dialWith(t, addrOf(t, m, "l"), nil, "")
	if line != "" {
		t.Fatalf("a refused connection reached the terminal filter: %q", line)
	}
	expectClosed(t, c, r2)
	wantStat(t, st, "listener.l.downstream_cx_total", 2)

	for _, tc := range []struct{ chain, want string }{
		{`[{name: test.addrs}, {name: test.first}]`, `"test.addrs" is a terminal filter; it must be the last filter`},
		{`[{name: test.first}]`, `"test.first" is not a terminal filter`},
		{`[{name: test.nosuch}, {name: test.addrs}]`, `no such network filter`},
	} {
		_, err := m.AddOrUpdate(listenerFromYAML(t, `{name: bad, address: {socket_address: {address: 127.0.0.1, port_value: 0}}, filter_chains: [{filters: `+tc.chain+`}]}`), "1")
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("chain %s: %v; want an error containing %q", tc.chain, err, tc.want)
		}
	}
}
