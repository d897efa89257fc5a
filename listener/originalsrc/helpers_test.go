package originalsrc_test

import (
	"context"
	"fmt"
	"net"
	"testing"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"sigs.k8s.io/yaml"

	"github.com/legateproxy/legate/cluster"
	"github.com/legateproxy/legate/config"
	"github.com/legateproxy/legate/httpproxy"
	"github.com/legateproxy/legate/internal/registry"
	"github.com/legateproxy/legate/listener"
	"github.com/legateproxy/legate/listener/originalsrc"
	"github.com/legateproxy/legate/listener/proxyprotocol"
	"github.com/legateproxy/legate/pool"
	"github.com/legateproxy/legate/stats"
	"github.com/legateproxy/legate/tcpproxy"
)

// fromYAML decodes yml into m.
func fromYAML(t *testing.T, yml string, m proto.Message) {
	t.Helper()
	js, err := yaml.YAMLToJSON([]byte(yml))
	if err != nil {
		t.Fatal(err)
	}
	if err := protojson.Unmarshal(js, m); err != nil {
		t.Fatal(err)
	}
}

// legate is a listener manager serving TCP proxy and HTTP connection manager chains to the
// static cluster "up", with the original_src and proxy_protocol listener filters registered.
type legate struct {
	lm  *listener.Manager
	ext *registry.Registry // the listeners convert with it
}

// newLegate builds the cluster "up" of upstream, with the fields of extra (YAML, "" for
// none), and a listener manager for its TCP proxies and connection managers.
func newLegate(t *testing.T, upstream, extra string) *legate {
	t.Helper()
	store, err := stats.New(stats.Config{})
	if err != nil {
		t.Fatal(err)
	}
	var cpb clusterv3.Cluster
	h, p := splitAddr(t, upstream)
	if extra != "" {
		extra = ", " + extra
	}
	fromYAML(t, fmt.Sprintf(`{name: up, type: STATIC, connect_timeout: 5s, load_assignment: {cluster_name: up, endpoints: [{lb_endpoints: [{endpoint: {address: {socket_address: {address: %q, port_value: %s}}}}]}]}%s}`, h, p, extra), &cpb)
	ccfg, err := config.ClusterFromProto(&cpb, config.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	cm, err := cluster.NewManager(cluster.ManagerConfig{Stats: store})
	if err != nil {
		t.Fatal(err)
	}
	if err := cm.AddStatic([]*config.Cluster{ccfg}); err != nil {
		t.Fatal(err)
	}
	pools, err := pool.NewRegistry(pool.RegistryConfig{Clusters: cm, Stats: store})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pools.Close)
	hcm, err := httpproxy.NewService(httpproxy.Deps{Clusters: cm, Pools: pools, Stats: store})
	if err != nil {
		t.Fatal(err)
	}
	b := registry.NewBuilder()
	config.Register(b)
	tcpproxy.Register(b)
	httpproxy.Register(b)
	originalsrc.Register(b)
	proxyprotocol.Register(b)
	ext, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	lm, err := listener.NewManager(listener.ManagerConfig{Stats: store, Extensions: ext,
		Services: listener.Services{config.TCPProxyFilter: tcpproxy.NewService(tcpproxy.Deps{Pools: pools}), config.HTTPConnectionManagerFilter: hcm}})
	if err != nil {
		t.Fatal(err)
	}
	return &legate{lm: lm, ext: ext}
}

// add adds the listener of yml.
func (l *legate) add(t *testing.T, yml string) error {
	t.Helper()
	var lpb listenerv3.Listener
	fromYAML(t, yml, &lpb)
	lcfg, err := config.ListenerFromProto(&lpb, config.Limits{Extensions: l.ext})
	if err != nil {
		t.Fatal(err)
	}
	return l.lm.AddStatic([]*config.Listener{lcfg})
}

// run starts the listeners and returns the address of the one named name.
func (l *legate) run(t *testing.T, name string) string {
	t.Helper()
	if err := l.lm.Start(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- l.lm.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("listener Run = %v", err)
		}
	})
	return l.lm.Addrs()[name][0].String()
}

// splitAddr splits a host:port address.
func splitAddr(t *testing.T, addr string) (host, port string) {
	t.Helper()
	h, p, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	return h, p
}
