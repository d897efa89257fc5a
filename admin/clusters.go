package admin

import (
	"bufio"
	"io"
	"net/http"
	"strconv"

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
				rq := hs.Rq()
				line(name, addr, "cx_active", u(uint64(max(hs.CxActive.Load(), 0))))
				line(name, addr, "cx_connect_fail", u(hs.CxConnectFail.Load()))
				line(name, addr, "cx_total", u(hs.CxTotal.Load()))
				line(name, addr, "rq_active", u(uint64(max(rq.Active, 0))))
				line(name, addr, "rq_error", u(rq.Error))
				line(name, addr, "rq_success", u(rq.Success))
				line(name, addr, "rq_timeout", u(rq.Timeout))
				line(name, addr, "rq_total", u(rq.Total))
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
