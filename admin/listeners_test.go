package admin

import (
	"context"
	"net/http/httptest"
	"strings"
	"testing"

	adminv3 "github.com/envoyproxy/go-control-plane/envoy/admin/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/legateproxy/legate/config"
	"github.com/legateproxy/legate/listener"
	"github.com/legateproxy/legate/stats"
)

type fixedListeners []listener.Status

func (f fixedListeners) Statuses() []listener.Status { return f }

func listenersFixture() fixedListeners {
	sock := func(host string, port uint32) config.Address {
		return config.Address{Kind: config.SocketAddress, Host: host, Port: port}
	}
	return fixedListeners{
		{Name: "listener_0", Addresses: []config.Address{sock("0.0.0.0", 10000)}},
		{Name: "dual", Addresses: []config.Address{sock("0.0.0.0", 8080), sock("::", 8080)}},
		{Name: "sock", Addresses: []config.Address{{Kind: config.PipeAddress, Path: "/tmp/sock"}}},
	}
}

func serveListeners(t *testing.T, src ListenerSource, query string) *httptest.ResponseRecorder {
	t.Helper()
	r := httptest.NewRequest("GET", "/listeners?"+query, nil)
	w := httptest.NewRecorder()
	ListenersEndpoint(src).Handle(w, r, ParseQuery(query))
	return w
}

func TestListenersText(t *testing.T) {
	for _, q := range []string{"", "format=text", "format=", "format=JSON", "format=yaml"} {
		t.Run("query "+q, func(t *testing.T) {
			w := serveListeners(t, listenersFixture(), q)
			if w.Code != 200 {
				t.Errorf("status = %d; want 200", w.Code)
			}
			golden(t, "listeners.golden", w.Body.Bytes())
		})
	}
	if got := serveListeners(t, fixedListeners{}, "").Body.String(); got != "" {
		t.Errorf("no listeners: body %q; want empty", got)
	}
}

func TestListenersJSON(t *testing.T) {
	w := serveListeners(t, listenersFixture(), "format=json")
	if ct := w.Header().Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type = %q; want application/json", ct)
	}
	golden(t, "listeners_json.golden", w.Body.Bytes())
	var got adminv3.Listeners
	if err := (protojson.UnmarshalOptions{}).Unmarshal(w.Body.Bytes(), &got); err != nil {
		t.Fatalf("strict decode of envoy.admin.v3.Listeners: %v", err)
	}
	if n := len(got.GetListenerStatuses()); n != 3 {
		t.Errorf("decoded %d listener statuses; want 3", n)
	}
	if body := serveListeners(t, fixedListeners{}, "format=json").Body.String(); body != "{}\n" {
		t.Errorf("no listeners: JSON %q; want {}\\n", body)
	}
}

// TestListenersFromManager: a port-0 listener shows the port the OS chose.
func TestListenersFromManager(t *testing.T) {
	st, _ := stats.New(stats.Config{})
	m, err := listener.NewManager(listener.ManagerConfig{Stats: st})
	if err != nil {
		t.Fatal(err)
	}
	l, err := config.ListenerFromProto(&listenerv3.Listener{
		Name:         "zero",
		Address:      addressProto(config.Address{Kind: config.SocketAddress, Host: "127.0.0.1"}),
		FilterChains: []*listenerv3.FilterChain{{}},
	}, config.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.AddStatic([]*config.Listener{l}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- m.Run(ctx) }()
	defer func() { cancel(); <-done }()
	if err := m.Start(); err != nil {
		t.Fatal(err)
	}
	want := "zero::" + m.Addrs()["zero"][0].String() + "\n"
	if got := serveListeners(t, m, "").Body.String(); got != want || strings.HasSuffix(got, ":0\n") {
		t.Errorf("/listeners = %q; want %q", got, want)
	}
}
