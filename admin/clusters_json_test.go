package admin

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"strings"
	"testing"

	adminv3 "github.com/envoyproxy/go-control-plane/envoy/admin/v3"
	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/legateproxy/legate/cluster"
	"github.com/legateproxy/legate/config"
	"github.com/legateproxy/legate/host"
	"github.com/legateproxy/legate/internal/pbjson"
)

// The reference path: build the envoy.admin.v3 protos as Envoy fills them and print them with
// pbjson. writeClustersJSON must print the same bytes without building them.

// clusterStatus builds the ClusterStatus of c as Envoy fills it.
func clusterStatus(c *cluster.Cluster) *adminv3.ClusterStatus {
	cfg := c.Config()
	snap := c.Snapshot()
	cs := &adminv3.ClusterStatus{
		Name:              cfg.Name,
		AddedViaApi:       c.AddedViaAPI(),
		ObservabilityName: observabilityName(cfg),
		CircuitBreakers:   &clusterv3.CircuitBreakers{},
	}
	if cfg.EDS != nil {
		cs.EdsServiceName = cfg.EDS.ServiceName
	}
	if d := c.Outlier(); d != nil {
		if v := d.SuccessRateEjectionThreshold(); v > 0 {
			cs.SuccessRateEjectionThreshold = &typev3.Percent{Value: v}
		}
		if v := d.LocalOriginSuccessRateEjectionThreshold(); v > 0 {
			cs.LocalOriginSuccessRateEjectionThreshold = &typev3.Percent{Value: v}
		}
	}
	for i := range config.NumPriorities {
		p := snap.Breaker.Priority(i)
		cs.CircuitBreakers.Thresholds = append(cs.CircuitBreakers.Thresholds, &clusterv3.CircuitBreakers_Thresholds{
			Priority:           corev3.RoutingPriority(i),
			MaxConnections:     wrapperspb.UInt32(uint32(p.Connections.Max())),
			MaxPendingRequests: wrapperspb.UInt32(uint32(p.PendingRequests.Max())),
			MaxRequests:        wrapperspb.UInt32(uint32(p.Requests.Max())),
			MaxRetries:         wrapperspb.UInt32(uint32(p.Retries.Max())),
		})
	}
	for _, s := range snap.PrioritySet.Sets() {
		for _, h := range s.Hosts() {
			hs := hostStatus(h, s.Priority(), snap.HostStats(h))
			ext, local := hostRates(c, h)
			if ext >= 0 {
				hs.SuccessRate = &typev3.Percent{Value: ext}
			}
			if local >= 0 {
				hs.LocalOriginSuccessRate = &typev3.Percent{Value: local}
			}
			cs.HostStatuses = append(cs.HostStatuses, hs)
		}
	}
	return cs
}

func hostStatus(h *host.Host, priority uint32, hs *cluster.HostStats) *adminv3.HostStatus {
	if hs == nil {
		hs = &cluster.HostStats{}
	}
	counter := func(name string, v uint64) *adminv3.SimpleMetric {
		return &adminv3.SimpleMetric{Type: adminv3.SimpleMetric_COUNTER, Value: v, Name: name}
	}
	gauge := func(name string, v int64) *adminv3.SimpleMetric {
		return &adminv3.SimpleMetric{Type: adminv3.SimpleMetric_GAUGE, Value: uint64(max(v, 0)), Name: name}
	}
	f := h.HealthFlags()
	health := &adminv3.HostHealthStatus{
		FailedActiveHealthCheck:    f&host.FailedActiveHC != 0,
		FailedOutlierCheck:         f&host.FailedOutlierCheck != 0,
		FailedActiveDegradedCheck:  f&host.DegradedActiveHC != 0,
		PendingDynamicRemoval:      f&host.PendingDynamicRemoval != 0,
		PendingActiveHc:            f&host.PendingActiveHC != 0,
		ExcludedViaImmediateHcFail: f&host.ExcludedViaImmediateHCFail != 0,
		ActiveHcTimeout:            f&host.ActiveHCTimeout != 0,
		EdsHealthStatus:            corev3.HealthStatus_HEALTHY,
	}
	switch {
	case f&host.EDSStatusDraining != 0:
		health.EdsHealthStatus = corev3.HealthStatus_DRAINING
	case f&host.FailedEDSHealth != 0:
		health.EdsHealthStatus = corev3.HealthStatus_UNHEALTHY
	case f&host.DegradedEDSHealth != 0:
		health.EdsHealthStatus = corev3.HealthStatus_DEGRADED
	}
	loc := h.Locality()
	return &adminv3.HostStatus{
		Address: hostAddress(h.Address()),
		Stats: []*adminv3.SimpleMetric{
			counter("cx_connect_fail", hs.CxConnectFail.Load()),
			counter("cx_total", hs.CxTotal.Load()),
			counter("rq_error", hs.Rq().Error),
			counter("rq_success", hs.Rq().Success),
			counter("rq_timeout", hs.Rq().Timeout),
			counter("rq_total", hs.Rq().Total),
			gauge("cx_active", hs.CxActive.Load()),
			gauge("rq_active", hs.Rq().Active),
		},
		HealthStatus: health,
		Weight:       h.Weight(),
		Hostname:     h.Hostname(),
		Priority:     priority,
		Locality:     &corev3.Locality{Region: loc.Region, Zone: loc.Zone, SubZone: loc.SubZone},
	}
}

func hostAddress(s string) *corev3.Address {
	if ap, err := netip.ParseAddrPort(s); err == nil {
		return &corev3.Address{Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{
			Address:       ap.Addr().String(),
			PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: uint32(ap.Port())},
		}}}
	}
	if rest, ok := strings.CutPrefix(s, "envoy://"); ok && rest != "" {
		listener, id, _ := strings.Cut(rest, "/")
		return &corev3.Address{Address: &corev3.Address_EnvoyInternalAddress{EnvoyInternalAddress: &corev3.EnvoyInternalAddress{
			AddressNameSpecifier: &corev3.EnvoyInternalAddress_ServerListenerName{ServerListenerName: listener},
			EndpointId:           id,
		}}}
	}
	return &corev3.Address{Address: &corev3.Address_Pipe{Pipe: &corev3.Pipe{Path: s}}}
}

// pbjsonClusters prints src through the reference path.
func pbjsonClusters(t testing.TB, src ClusterSource) string {
	t.Helper()
	whole := &adminv3.Clusters{}
	for _, c := range src.Snapshot() {
		whole.ClusterStatuses = append(whole.ClusterStatuses, clusterStatus(c))
	}
	b, err := pbjson.Marshal(whole, pbjson.OmitDefaults)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func directClusters(src ClusterSource) string {
	var b bytes.Buffer
	writeClustersJSON(&b, src)
	return b.String()
}

func TestClustersJSONMatchesPbjson(t *testing.T) {
	cases := []struct {
		name string
		src  func(t *testing.T) ClusterSource
	}{
		{"empty", func(t *testing.T) ClusterSource { return newManager(t) }},
		{"golden fixture", func(t *testing.T) ClusterSource { return clustersFixture(t) }},
		{"outlier fixture", func(t *testing.T) ClusterSource { return outlierFixture(t) }},
	}
	for seed := range uint64(8) {
		cases = append(cases, struct {
			name string
			src  func(t *testing.T) ClusterSource
		}{fmt.Sprintf("random seed %d", seed), func(t *testing.T) ClusterSource { return randomClusters(t, seed) }})
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			src := tc.src(t)
			want := pbjsonClusters(t, src)
			got := directClusters(src)
			if diff := cmp.Diff(want, got); diff != "" {
				t.Fatalf("direct encoder differs from pbjson (-pbjson +direct):\n%s", diff)
			}
			var decoded adminv3.Clusters
			if err := protojson.Unmarshal([]byte(got), &decoded); err != nil {
				t.Fatalf("strict decode into adminv3.Clusters: %v", err)
			}
		})
	}
}

// randomText returns a short string mixing ASCII, characters pbjson escapes (quotes,
// backslashes, controls, < >, invisible code points) and multi-byte text.
func randomText(r *rand.Rand, maxLen int) string {
	pieces := []string{"a", "Z", "9", "-", "_", ".", "/", `"`, `\`, "\n", "\t", "\x01", "\x7f", "<", ">", "é", "日本", "\u200b", "\u2028", "\ufeff", "😀", "\u00ad", " "}
	var b strings.Builder
	for range r.IntN(maxLen + 1) {
		b.WriteString(pieces[r.IntN(len(pieces))])
	}
	return b.String()
}

// randomAddress returns an Envoy Address as JSON: IPv4 or IPv6 socket addresses (port 0
// included), pipes and internal addresses.
func randomAddress(r *rand.Rand, i int) map[string]any {
	switch r.IntN(5) {
	case 0:
		return map[string]any{"pipe": map[string]any{"path": fmt.Sprintf("/tmp/sock%d-%s", i, randomText(r, 4))}}
	case 1:
		a := map[string]any{"server_listener_name": fmt.Sprintf("listener%d", i)}
		if r.IntN(2) == 0 {
			a["endpoint_id"] = randomText(r, 5)
		}
		return map[string]any{"envoy_internal_address": a}
	case 2:
		return map[string]any{"socket_address": map[string]any{"address": fmt.Sprintf("2001:db8::%x", i+1), "port_value": r.IntN(65536)}}
	}
	return map[string]any{"socket_address": map[string]any{"address": fmt.Sprintf("10.%d.%d.%d", i>>16&255, i>>8&255, i&255), "port_value": min(r.IntN(3), 1) * r.IntN(65536)}}
}

// randomClusters builds a manager of static and EDS clusters with random names, alt stat
// names, localities, hostnames, weights, priorities, breaker thresholds, outlier detection,
// host stats and health flags.
func randomClusters(t *testing.T, seed uint64) *cluster.Manager {
	t.Helper()
	r := rand.New(rand.NewPCG(seed, 4))
	m := newManager(t)
	addr := 0
	endpoints := func() []any {
		var eps []any
		for p := range r.IntN(3) + 1 {
			for range r.IntN(3) {
				loc := map[string]any{}
				for _, k := range []string{"region", "zone", "sub_zone"} {
					if r.IntN(2) == 0 {
						loc[k] = randomText(r, 6)
					}
				}
				var lbs []any
				for range r.IntN(4) {
					addr++
					ep := map[string]any{"address": randomAddress(r, addr)}
					if r.IntN(2) == 0 {
						ep["hostname"] = randomText(r, 8)
					}
					lb := map[string]any{"endpoint": ep, "load_balancing_weight": r.IntN(host.MaxWeight) + 1}
					if r.IntN(4) == 0 {
						lb["health_status"] = []string{"HEALTHY", "UNHEALTHY", "DRAINING", "DEGRADED", "TIMEOUT"}[r.IntN(5)]
					}
					lbs = append(lbs, lb)
				}
				if len(lbs) > 0 {
					eps = append(eps, map[string]any{"priority": p, "locality": loc, "lb_endpoints": lbs})
				}
			}
		}
		return eps
	}
	var static []*config.Cluster
	var edsNames []string
	for i := range 40 {
		name := fmt.Sprintf("c%03d%s", i, randomText(r, 6))
		c := map[string]any{"name": name}
		if r.IntN(3) == 0 {
			c["alt_stat_name"] = randomText(r, 8)
		}
		if r.IntN(3) == 0 {
			c["outlier_detection"] = map[string]any{}
		}
		if r.IntN(2) == 0 {
			var th []any
			for _, p := range []string{"DEFAULT", "HIGH"} {
				if r.IntN(2) == 0 {
					th = append(th, map[string]any{"priority": p, "max_connections": r.Uint32() >> r.IntN(32), "max_pending_requests": r.IntN(3), "max_retries": r.IntN(100)})
				}
			}
			c["circuit_breakers"] = map[string]any{"thresholds": th}
		}
		eds := r.IntN(4) == 0
		if eds {
			c["type"] = "EDS"
			service := ""
			if r.IntN(2) == 0 {
				service = randomText(r, 6)
			}
			c["eds_cluster_config"] = map[string]any{"service_name": service, "eds_config": map[string]any{"ads": map[string]any{}}}
			if service == "" {
				service = name
			}
			edsNames = append(edsNames, service)
		} else if eps := endpoints(); len(eps) > 0 {
			c["load_assignment"] = map[string]any{"endpoints": eps}
		}
		j, err := json.Marshal(c)
		if err != nil {
			t.Fatal(err)
		}
		cfg := clusterConfigJSON(t, j)
		if eds {
			if _, err := m.AddOrUpdate(cfg, "1"); err != nil {
				t.Fatal(err)
			}
		} else {
			static = append(static, cfg)
		}
	}
	if err := m.AddStatic(static); err != nil {
		t.Fatal(err)
	}
	for _, w := range m.Warming() {
		j, err := json.Marshal(map[string]any{"cluster_name": w.Config().EDS.ServiceName, "endpoints": endpoints()})
		if err != nil {
			t.Fatal(err)
		}
		cla := &endpointv3.ClusterLoadAssignment{}
		if err := protojson.Unmarshal(j, cla); err != nil {
			t.Fatal(err)
		}
		if err := w.ApplyAssignment(cla); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range m.Snapshot() {
		snap := c.Snapshot()
		for _, s := range snap.PrioritySet.Sets() {
			for _, h := range s.Hosts() {
				h.SetHealthFlag(host.HealthFlag(r.Uint32()) & host.HealthFlag(r.Uint32()) & host.HealthFlag(r.Uint32()))
				if hs := snap.HostStats(h); hs != nil {
					some := func() uint64 {
						if r.IntN(2) == 0 {
							return r.Uint64() >> r.IntN(64)
						}
						return 0
					}
					hs.CxConnectFail.Add(some())
					hs.CxTotal.Add(some())
					rq := cluster.HostRq{Error: some(), Success: some(), Timeout: some(), Total: some()}
					hs.CxActive.Add(int64(r.IntN(5)) - 2)
					rq.Active = int64(r.IntN(5)) - 2
					hs.AddRq(rq)
				}
			}
		}
	}
	return m
}

// chunkWriter records the size of every write it is given.
type chunkWriter struct{ sizes []int }

func (w *chunkWriter) Write(p []byte) (int, error) {
	w.sizes = append(w.sizes, len(p))
	return len(p), nil
}

func TestClustersJSONStreams(t *testing.T) {
	m := randomClusters(t, 1)
	var w chunkWriter
	writeClustersJSON(&w, m)
	if len(w.sizes) < 2 {
		t.Fatalf("writes = %d; want the document in several chunks", len(w.sizes))
	}
	for i, n := range w.sizes {
		if limit := 2 * clustersJSONFlush; n > limit {
			t.Errorf("write %d has %d bytes; want <= %d", i, n, limit)
		}
	}
}
