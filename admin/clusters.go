package admin

import (
	"bufio"
	"bytes"
	"io"
	"net/http"
	"net/netip"
	"strconv"

	adminv3 "github.com/envoyproxy/go-control-plane/envoy/admin/v3"
	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/legateproxy/legate/admin/pbjson"
	"github.com/legateproxy/legate/cluster"
	"github.com/legateproxy/legate/config"
	"github.com/legateproxy/legate/host"
)

// ClusterSource is what /clusters reads: the CDS version and the active clusters sorted by
// name. *cluster.Manager implements it.
type ClusterSource interface {
	VersionInfo() string
	Snapshot() []*cluster.Cluster
}

// ClustersEndpoint returns /clusters over src. The text form is Envoy's, preceded by the spec's
// version_info line and with the spec's per-host healthy line; format=json prints
// envoy.admin.v3.Clusters. Both are streamed cluster by cluster.
func ClustersEndpoint(src ClusterSource) Endpoint {
	return Endpoint{
		Path: "/clusters",
		Help: "upstream cluster status",
		Params: []Param{
			{Name: "format", Kind: ParamEnum, Help: "File format to use", Choices: []string{"text", "json"}},
		},
		Handle: func(w http.ResponseWriter, r *http.Request, q Query) {
			if q.Get("format") == "json" {
				w.Header().Set("Content-Type", "application/json")
				writeClustersJSON(w, src)
				return
			}
			writeClustersText(w, src)
		},
	}
}

// noRate is the success rate printed without an outlier detector, or before it has data.
const noRate = -1.0

// hostRates are h's external and local-origin success rates in c, -1 without a detector or data.
func hostRates(c *cluster.Cluster, h *host.Host) (external, local float64) {
	d := c.Outlier()
	if d == nil {
		return noRate, noRate
	}
	return d.SuccessRate(h), d.LocalOriginSuccessRate(h)
}

// writeClustersText streams the text form.
func writeClustersText(out io.Writer, src ClusterSource) {
	w := bufio.NewWriterSize(out, 64<<10)
	defer w.Flush()
	line := func(parts ...string) {
		for i, p := range parts {
			if i > 0 {
				w.WriteString("::")
			}
			w.WriteString(p)
		}
		w.WriteByte('\n')
	}
	line("version_info", src.VersionInfo())
	var num []byte
	u := func(v uint64) string { num = strconv.AppendUint(num[:0], v, 10); return string(num) }
	for _, c := range src.Snapshot() {
		cfg := c.Config()
		name := cfg.Name
		line(name, "observability_name", observabilityName(cfg))
		if d := c.Outlier(); d != nil {
			g := func(v float64) string { return strconv.FormatFloat(v, 'g', 6, 64) }
			line(name, "outlier", "success_rate_average", g(d.SuccessRateAverage()))
			line(name, "outlier", "success_rate_ejection_threshold", g(d.SuccessRateEjectionThreshold()))
			line(name, "outlier", "local_origin_success_rate_average", g(d.LocalOriginSuccessRateAverage()))
			line(name, "outlier", "local_origin_success_rate_ejection_threshold", g(d.LocalOriginSuccessRateEjectionThreshold()))
		}
		snap := c.Snapshot()
		for i, prio := range []string{"default_priority", "high_priority"} {
			p := snap.Breaker.Priority(config.Priority(i))
			line(name, prio, "max_connections", u(p.Connections.Max()))
			line(name, prio, "max_pending_requests", u(p.PendingRequests.Max()))
			line(name, prio, "max_requests", u(p.Requests.Max()))
			line(name, prio, "max_retries", u(p.Retries.Max()))
		}
		line(name, "added_via_api", strconv.FormatBool(c.AddedViaAPI()))
		if cfg.EDS != nil && cfg.EDS.ServiceName != "" {
			line(name, "eds_service_name", cfg.EDS.ServiceName)
		}
		for _, s := range snap.PrioritySet.Sets() {
			for _, h := range s.Hosts() {
				addr := h.Address()
				hs := snap.HostStats(h)
				var st cluster.HostStats
				if hs == nil {
					hs = &st
				}
				line(name, addr, "cx_active", u(uint64(max(hs.CxActive.Load(), 0))))
				line(name, addr, "cx_connect_fail", u(hs.CxConnectFail.Load()))
				line(name, addr, "cx_total", u(hs.CxTotal.Load()))
				line(name, addr, "rq_active", u(uint64(max(hs.RqActive.Load(), 0))))
				line(name, addr, "rq_error", u(hs.RqError.Load()))
				line(name, addr, "rq_success", u(hs.RqSuccess.Load()))
				line(name, addr, "rq_timeout", u(hs.RqTimeout.Load()))
				line(name, addr, "rq_total", u(hs.RqTotal.Load()))
				line(name, addr, "hostname", h.Hostname())
				flags := h.HealthFlags()
				line(name, addr, "health_flags", flags.String())
				line(name, addr, "healthy", specHealth(flags))
				line(name, addr, "weight", u(uint64(h.Weight())))
				loc := h.Locality()
				line(name, addr, "region", loc.Region)
				line(name, addr, "zone", loc.Zone)
				line(name, addr, "sub_zone", loc.SubZone)
				line(name, addr, "canary", strconv.FormatBool(h.Canary()))
				line(name, addr, "priority", u(uint64(s.Priority())))
				ext, local := hostRates(c, h)
				line(name, addr, "success_rate", strconv.FormatFloat(ext, 'f', -1, 64))
				line(name, addr, "local_origin_success_rate", strconv.FormatFloat(local, 'f', -1, 64))
			}
		}
	}
}

// specHealth is the spec's healthy value: "healthy", or the composed failure flags
// (/failed_active_hc, /failed_eds_health, /failed_outlier_check) in the spec's order.
func specHealth(f host.HealthFlag) string {
	s := ""
	if f&host.FailedActiveHC != 0 {
		s += "/failed_active_hc"
	}
	if f&host.FailedEDSHealth != 0 {
		s += "/failed_eds_health"
	}
	if f&host.FailedOutlierCheck != 0 {
		s += "/failed_outlier_check"
	}
	if s == "" {
		return "healthy"
	}
	return s
}

func observabilityName(cfg *config.Cluster) string {
	if cfg.AltStatName != "" {
		return cfg.AltStatName
	}
	return cfg.Name
}

// writeClustersJSON streams envoy.admin.v3.Clusters: one ClusterStatus is printed at a time and
// indented into the cluster_statuses array, so the output equals printing the whole message.
func writeClustersJSON(out io.Writer, src ClusterSource) {
	w := bufio.NewWriterSize(out, 64<<10)
	defer w.Flush()
	clusters := src.Snapshot()
	if len(clusters) == 0 {
		w.WriteString("{}\n")
		return
	}
	w.WriteString("{\n \"cluster_statuses\": [\n")
	for i, c := range clusters {
		b, err := pbjson.Marshal(clusterStatus(c), pbjson.OmitDefaults)
		if err != nil {
			return
		}
		b = bytes.TrimSuffix(b, []byte("\n"))
		if i > 0 {
			w.WriteString(",\n")
		}
		for j, l := range bytes.Split(b, []byte("\n")) {
			if j > 0 {
				w.WriteByte('\n')
			}
			w.WriteString("  ")
			w.Write(l)
		}
	}
	w.WriteString("\n ]\n}\n")
}

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
			// Envoy prints a rate only when the detector has one (>= 0).
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
			counter("rq_error", hs.RqError.Load()),
			counter("rq_success", hs.RqSuccess.Load()),
			counter("rq_timeout", hs.RqTimeout.Load()),
			counter("rq_total", hs.RqTotal.Load()),
			gauge("cx_active", hs.CxActive.Load()),
			gauge("rq_active", hs.RqActive.Load()),
		},
		HealthStatus: health,
		Weight:       h.Weight(),
		Hostname:     h.Hostname(),
		Priority:     priority,
		Locality:     &corev3.Locality{Region: loc.Region, Zone: loc.Zone, SubZone: loc.SubZone},
	}
}

// hostAddress renders a host address string as a core.Address: "ip:port" as a socket address,
// "envoy://listener/id" as an internal address, anything else as a pipe path.
func hostAddress(s string) *corev3.Address {
	if ap, err := netip.ParseAddrPort(s); err == nil {
		return &corev3.Address{Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{
			Address:       ap.Addr().String(),
			PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: uint32(ap.Port())},
		}}}
	}
	const internal = "envoy://"
	if len(s) > len(internal) && s[:len(internal)] == internal {
		rest := s[len(internal):]
		listener, id := rest, ""
		if i := bytes.IndexByte([]byte(rest), '/'); i >= 0 {
			listener, id = rest[:i], rest[i+1:]
		}
		return &corev3.Address{Address: &corev3.Address_EnvoyInternalAddress{EnvoyInternalAddress: &corev3.EnvoyInternalAddress{
			AddressNameSpecifier: &corev3.EnvoyInternalAddress_ServerListenerName{ServerListenerName: listener},
			EndpointId:           id,
		}}}
	}
	return &corev3.Address{Address: &corev3.Address_Pipe{Pipe: &corev3.Pipe{Path: s}}}
}
