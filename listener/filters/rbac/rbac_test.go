package rbac

import (
	"context"
	"fmt"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"sigs.k8s.io/yaml"

	"github.com/legateproxy/legate/config"
	"github.com/legateproxy/legate/listener"
	"github.com/legateproxy/legate/stats"
)

// serve runs a listener manager with one listener whose chain is the rbac filter configured
// by rules (YAML) and a terminal filter that writes "in" and closes; it returns the address
// and the stats store.
func serve(t *testing.T, rules string) (string, *stats.Store, error) {
	t.Helper()
	st, err := stats.New(stats.Config{})
	if err != nil {
		t.Fatal(err)
	}
	r := listener.NewRegistry()
	if err := Register(r); err != nil {
		t.Fatal(err)
	}
	r.Register("test.in", func(*listener.ChainContext) (listener.FilterChainHandler, error) {
		return listener.HandlerFunc(func(c *listener.Conn) { io.WriteString(c, "in\n"); c.Close() }), nil
	})
	y := fmt.Sprintf(`{name: l, address: {socket_address: {address: 127.0.0.1, port_value: 0}}, filter_chains: [{filters: [
  {name: envoy.filters.network.rbac, typed_config: {"@type": type.googleapis.com/envoy.extensions.filters.network.rbac.v3.RBAC, stat_prefix: net, %s}},
  {name: test.in}]}]}`, rules)
	j, err := yaml.YAMLToJSON([]byte(y))
	if err != nil {
		t.Fatal(err)
	}
	pb := &listenerv3.Listener{}
	if err := protojson.Unmarshal(j, pb); err != nil {
		t.Fatal(err)
	}
	l, err := config.ListenerFromProto(pb)
	if err != nil {
		t.Fatal(err)
	}
	m, err := listener.NewManager(listener.ManagerConfig{Stats: st, Handlers: r})
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

// admitted dials addr and reports whether the terminal filter answered.
func admitted(t *testing.T, addr string) bool {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	b, _ := io.ReadAll(c)
	return string(b) == "in\n"
}

// TestRBAC: ALLOW admits connections a policy matches and DENY those none matches, over the
// destination port and the client address, counted in <stat_prefix>.rbac.allowed/denied.
func TestRBAC(t *testing.T) {
	for _, tc := range []struct {
		name, rules string
		want        bool
	}{
		{"allow loopback", `rules: {action: ALLOW, policies: {p: {permissions: [{any: true}], principals: [{remote_ip: {address_prefix: 127.0.0.0, prefix_len: 8}}]}}}`, true},
		{"allow other network", `rules: {action: ALLOW, policies: {p: {permissions: [{any: true}], principals: [{direct_remote_ip: {address_prefix: 10.0.0.0, prefix_len: 8}}]}}}`, false},
		{"deny port range", `rules: {action: DENY, policies: {p: {permissions: [{destination_port_range: {start: 1, end: 65535}}], principals: [{any: true}]}}}`, false},
		{"deny not loopback", `rules: {action: DENY, policies: {p: {permissions: [{not_rule: {destination_ip: {address_prefix: 127.0.0.1, prefix_len: 32}}}], principals: [{any: true}]}}}`, true},
		{"allow sni", `rules: {action: ALLOW, policies: {p: {permissions: [{requested_server_name: {exact: a.example.com}}], principals: [{any: true}]}}}`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			addr, st, err := serve(t, tc.rules)
			if err != nil {
				t.Fatal(err)
			}
			if got := admitted(t, addr); got != tc.want {
				t.Fatalf("admitted = %t; want %t", got, tc.want)
			}
			allowed, denied := st.Counter("net.rbac.allowed").Value(), st.Counter("net.rbac.denied").Value()
			if (tc.want && allowed != 1) || (!tc.want && denied != 1) {
				t.Errorf("allowed %d, denied %d", allowed, denied)
			}
		})
	}
}

// TestRBACRefusals: what the filter does not implement is refused with its name.
func TestRBACRefusals(t *testing.T) {
	for _, tc := range []struct{ rules, want string }{
		{`shadow_rules: {}`, "shadow_rules: not implemented by Legate"},
		{`rules: {policies: {p: {permissions: [{header: {name: x}}], principals: [{any: true}]}}}`, "Permission_Header: not implemented by Legate"},
		{`rules: {policies: {p: {permissions: [{any: true}], principals: [{authenticated: {}}]}}}`, "Principal_Authenticated_: not implemented by Legate"},
	} {
		if _, _, err := serve(t, tc.rules); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v; want an error containing %q", tc.rules, err, tc.want)
		}
	}
}
