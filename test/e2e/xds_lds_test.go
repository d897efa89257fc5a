package e2e

import (
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	routerv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/legateproxy/legate/xds/xdstest"
)

// ldsListener is an LDS listener on 127.0.0.1:port whose connection manager loads route
// configuration route over ADS.
func ldsListener(t *testing.T, port int, route string) *listenerv3.Listener {
	t.Helper()
	router, err := anypb.New(&routerv3.Router{})
	if err != nil {
		t.Fatal(err)
	}
	hcm, err := anypb.New(&hcmv3.HttpConnectionManager{
		StatPrefix: "ingress",
		RouteSpecifier: &hcmv3.HttpConnectionManager_Rds{Rds: &hcmv3.Rds{RouteConfigName: route, ConfigSource: &corev3.ConfigSource{
			ResourceApiVersion: corev3.ApiVersion_V3, ConfigSourceSpecifier: &corev3.ConfigSource_Ads{Ads: &corev3.AggregatedConfigSource{}},
		}}},
		HttpFilters: []*hcmv3.HttpFilter{{Name: "envoy.filters.http.router", ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: router}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return &listenerv3.Listener{
		Name: "dyn",
		Address: &corev3.Address{Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{
			Address: "127.0.0.1", PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: uint32(port)},
		}}},
		FilterChains: []*listenerv3.FilterChain{{Filters: []*listenerv3.Filter{{
			Name: "envoy.filters.network.http_connection_manager", ConfigType: &listenerv3.Filter_TypedConfig{TypedConfig: hcm},
		}}}},
	}
}

func routeTo(name string, action *routev3.Route) *routev3.RouteConfiguration {
	action.Match = &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/"}}
	return &routev3.RouteConfiguration{Name: name, VirtualHosts: []*routev3.VirtualHost{{Name: "all", Domains: []string{"*"}, Routes: []*routev3.Route{action}}}}
}

func clusterRoute(cluster string) *routev3.Route {
	return &routev3.Route{Action: &routev3.Route_Route{Route: &routev3.RouteAction{ClusterSpecifier: &routev3.RouteAction_Cluster{Cluster: cluster}}}}
}

func directRoute(body string) *routev3.Route {
	return &routev3.Route{Action: &routev3.Route_DirectResponse{DirectResponse: &routev3.DirectResponseAction{
		Status: 200, Body: &corev3.DataSource{Specifier: &corev3.DataSource_InlineString{InlineString: body}},
	}}}
}

// freePort returns a port nothing listens on now, for a test that must know a port before
// anything binds it: one it shows was never bound, or one a server binds again after a
// restart. Every other test lets the kernel pick (port_value 0, or 127.0.0.1:0) and reads the
// bound port back (boundListenerAddr): a port picked beforehand can be taken by another
// process before its bind, which the lock below only prevents among e2e tests. It comes from below Linux's ephemeral range (32768 and up): a
// port the kernel handed out for port 0 and took back could be handed out again at once, to
// the admin listener Legate binds on port 0 before its data plane; and from below the bench
// scripts' fixed ports (26180 and up). The port stays reserved until the test ends, by a lock
// (flock) on a file named for it in the temporary directory, which every freePort of every
// e2e run on the machine takes first: two runs at once picked the same port between one's
// probe and its Legate's bind (bind: address already in use).
func freePort(t *testing.T) int {
	t.Helper()
	dir := filepath.Join(os.TempDir(), "legate-e2e-ports")
	if err := os.MkdirAll(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	for range 200 {
		port := 20000 + rand.IntN(6000)
		f, err := os.OpenFile(filepath.Join(dir, strconv.Itoa(port)), os.O_CREATE|os.O_RDWR, 0o666)
		if err != nil {
			t.Fatal(err)
		}
		// Held by the open file: released when the test closes it, or its process ends.
		if syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) != nil {
			f.Close()
			continue
		}
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err != nil {
			f.Close()
			continue
		}
		l.Close()
		t.Cleanup(func() { f.Close() }) // after the test's Legate is gone (cleanups run last first)
		return port
	}
	t.Fatal("no free port in 20000-25999 after 200 tries")
	return 0
}

// TestXDSListenersAndRoutesOverADS runs the binary against go-control-plane's server: an LDS
// listener whose routes come from RDS serves a real upstream; a route update and a rejected
// route leave every request of a steady client successful; removing the listener closes it.
func TestXDSListenersAndRoutesOverADS(t *testing.T) {
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "upstream") }))
	defer upstream.Close()
	xds := xdstest.New(t, xdstest.Options{Node: "e2e-lds", ADS: true})
	cfg := adsBootstrap("e2e-lds", xds, []string{"lds_config"}, clusterYAML("backend", upstream.Listener.Addr().String(), false))
	set := func(version string, ls []types.Resource, rcs ...types.Resource) {
		t.Helper()
		xds.Set(version, map[resourcev3.Type][]types.Resource{resourcev3.ListenerType: ls, resourcev3.RouteType: rcs})
	}
	listeners := []types.Resource{ldsListener(t, 0, "r1")} // the kernel picks the port
	set("v1", listeners, routeTo("r1", clusterRoute("backend")))
	p := start(t, "-c", writeConfig(t, cfg))
	addr := p.boundListenerAddr("dyn")
	url := "http://" + addr + "/"
	client := &http.Client{Timeout: 5 * time.Second}
	get := func() (string, error) {
		resp, err := client.Get(url)
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 {
			return "", fmt.Errorf("status %d: %s", resp.StatusCode, b)
		}
		return string(b), err
	}
	waitXDS(t, xds, "the LDS listener to proxy to the upstream", func() bool { b, err := get(); return err == nil && b == "upstream" })

	// A steady client runs through the route update and the rejected route.
	var failures atomic.Int64
	var lastErr atomic.Value
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			if _, err := get(); err != nil {
				failures.Add(1)
				lastErr.Store(err.Error())
			}
		}
	}()
	set("v2", listeners, routeTo("r1", directRoute("rds-v2")))
	waitXDS(t, xds, "the updated route", func() bool { b, err := get(); return err == nil && b == "rds-v2" })
	bad := routeTo("r1", directRoute("bad"))
	bad.VirtualHosts[0].Domains = []string{"*", "*"}
	set("v3", listeners, bad)
	waitXDS(t, xds, "the NACK of the bad route", func() bool {
		_, _, body := p.get("/stats?filter=^http.ingress.rds.r1.update_rejected$")
		return strings.HasPrefix(body, "http.ingress.rds.r1.update_rejected: ") && body != "http.ingress.rds.r1.update_rejected: 0\n"
	})
	close(stop)
	wg.Wait()
	if n := failures.Load(); n != 0 {
		t.Errorf("%d requests failed across the updates; last: %v", n, lastErr.Load())
	}
	if b, err := get(); err != nil || b != "rds-v2" {
		t.Errorf("after the rejected route GET = %q, %v; want the previous route's %q", b, err, "rds-v2")
	}
	_, _, dump := p.get("/config_dump?resource=dynamic_route_configs")
	if !strings.Contains(dump, `"version_info": "v2"`) || !strings.Contains(dump, "error_state") {
		t.Errorf("dynamic_route_configs: want r1 at v2 with an error_state:\n%s", dump)
	}
	_, _, ldump := p.get("/config_dump?resource=dynamic_listeners")
	if !strings.Contains(ldump, `"name": "dyn"`) || !strings.Contains(ldump, "active_state") {
		t.Errorf("dynamic_listeners: want dyn active:\n%s", ldump)
	}

	// Removing the listener closes its port.
	set("v4", nil, routeTo("r1", directRoute("rds-v2")))
	waitXDS(t, xds, "the listener to go away", func() bool {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err != nil {
			return true
		}
		c.Close()
		return false
	})
	_, _, st := p.get("/stats?filter=^listener_manager.lds.update_success$")
	if st == "" || st == "listener_manager.lds.update_success: 0\n" {
		t.Errorf("listener_manager.lds.update_success = %q; want > 0", st)
	}
}

// TestLDSStartsAfterCDS: as Envoy does, Legate asks for listeners only once the clusters CDS
// delivered are initialized, so a listener whose routes name a CDS cluster never meets a
// cluster manager that lacks it. (A clean-clone run once saw LDS refuse a file-delivered
// listener for an "unknown cluster" that CDS had not been read yet.) Over ADS, the first LDS
// request comes after the ACK of the first CDS response.
func TestLDSStartsAfterCDS(t *testing.T) {
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "upstream") }))
	defer upstream.Close()
	_, portStr, _ := net.SplitHostPort(upstream.Listener.Addr().String())
	port, err := strconv.Atoi(portStr)
	if err != nil {
		t.Fatal(err)
	}
	xds := xdstest.New(t, xdstest.Options{Node: "e2e-lds-cds", ADS: true})
	xds.Set("v1", map[resourcev3.Type][]types.Resource{
		resourcev3.ClusterType:  {staticCluster("backend", uint32(port))},
		resourcev3.ListenerType: {ldsListener(t, 0, "r1")}, // the kernel picks the port
		resourcev3.RouteType:    {routeTo("r1", clusterRoute("backend"))},
	})
	p := start(t, "-c", writeConfig(t, adsBootstrap("e2e-lds-cds", xds, []string{"cds_config", "lds_config"})))
	url := "http://" + p.boundListenerAddr("dyn") + "/"
	client := &http.Client{Timeout: 5 * time.Second}
	waitXDS(t, xds, "the LDS listener to proxy to the CDS cluster", func() bool {
		resp, err := client.Get(url)
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode == 200 && string(b) == "upstream"
	})
	cdsAck, ldsFirst := -1, -1
	for i, r := range xds.Requests() {
		switch r.GetTypeUrl() {
		case resourcev3.ClusterType:
			if cdsAck < 0 && r.GetVersionInfo() != "" {
				cdsAck = i
			}
		case resourcev3.ListenerType:
			if ldsFirst < 0 {
				ldsFirst = i
			}
		}
	}
	if cdsAck < 0 || ldsFirst < cdsAck {
		t.Errorf("request order: first LDS request #%d, CDS ACK #%d; want LDS after the CDS ACK", ldsFirst, cdsAck)
	}
}
