package admin

import (
	"io"
	"net/netip"
	"strconv"
	"strings"

	"github.com/legateproxy/legate/cluster"
	"github.com/legateproxy/legate/config"
	"github.com/legateproxy/legate/host"
	"github.com/legateproxy/legate/internal/pbjson"
)

// clustersJSONFlush is the amount of buffered JSON after which writeClustersJSON hands it to
// the response.
const clustersJSONFlush = 32 << 10

// writeClustersJSON streams envoy.admin.v3.Clusters exactly as pbjson.Marshal prints the whole
// message with OmitDefaults (fields in field-number order, one space of indentation per level,
// fields without presence left out at their zero value), without building the protos: a
// ClusterStatus through pbjson costs about 600 allocations, this encoder none per host.
// TestClustersJSONMatchesPbjson holds the two byte-identical.
func writeClustersJSON(out io.Writer, src ClusterSource) {
	e := jsonWriter{b: make([]byte, 0, clustersJSONFlush+clustersJSONFlush/4)}
	e.beginObject()
	clusters := src.Snapshot()
	if len(clusters) > 0 {
		e.key("cluster_statuses")
		e.beginArray()
		for _, c := range clusters {
			e.element()
			e.clusterStatus(c)
			if len(e.b) >= clustersJSONFlush {
				if _, err := out.Write(e.b); err != nil {
					return
				}
				e.b = e.b[:0]
			}
		}
		e.end(']')
	}
	e.end('}')
	e.b = append(e.b, '\n')
	out.Write(e.b)
}

// jsonWriter appends pretty JSON in pbjson's layout. first is true right after an opening
// bracket, until its first member is written.
type jsonWriter struct {
	b      []byte
	indent int
	first  bool
}

func (e *jsonWriter) newline() {
	e.b = append(e.b, '\n')
	for range e.indent {
		e.b = append(e.b, ' ')
	}
}

func (e *jsonWriter) beginObject() { e.b = append(e.b, '{'); e.indent++; e.first = true }
func (e *jsonWriter) beginArray()  { e.b = append(e.b, '['); e.indent++; e.first = true }

// end closes the innermost object ('}') or array (']'); an empty one prints as {} on one line.
func (e *jsonWriter) end(c byte) {
	e.indent--
	if !e.first {
		e.newline()
	}
	e.b = append(e.b, c)
	e.first = false
}

// element starts the next array element.
func (e *jsonWriter) element() {
	if !e.first {
		e.b = append(e.b, ',')
	}
	e.first = false
	e.newline()
}

// key starts the member named k (a proto field name: no escaping needed).
func (e *jsonWriter) key(k string) {
	e.element()
	e.b = append(e.b, '"')
	e.b = append(e.b, k...)
	e.b = append(e.b, '"', ':', ' ')
}

// str prints a string field without presence: left out when empty.
func (e *jsonWriter) str(k, v string) {
	if v != "" {
		e.key(k)
		e.b = pbjson.AppendString(e.b, v)
	}
}

// uint32Field prints a uint32 field without presence: left out when zero.
func (e *jsonWriter) uint32Field(k string, v uint32) {
	if v != 0 {
		e.key(k)
		e.b = strconv.AppendUint(e.b, uint64(v), 10)
	}
}

// uint32Wrapper prints a google.protobuf.UInt32Value field that is set.
func (e *jsonWriter) uint32Wrapper(k string, v uint32) {
	e.key(k)
	e.b = strconv.AppendUint(e.b, uint64(v), 10)
}

// boolField prints a bool field without presence: left out when false.
func (e *jsonWriter) boolField(k string, v bool) {
	if v {
		e.key(k)
		e.b = append(e.b, "true"...)
	}
}

// percent prints a set envoy.type.v3.Percent field; its value is left out when zero.
func (e *jsonWriter) percent(k string, v float64) {
	e.key(k)
	e.beginObject()
	if v != 0 {
		e.key("value")
		e.b = pbjson.AppendDouble(e.b, v)
	}
	e.end('}')
}

// clusterStatus prints envoy.admin.v3.ClusterStatus of c as Envoy fills it.
func (e *jsonWriter) clusterStatus(c *cluster.Cluster) {
	cfg := c.Config()
	snap := c.Snapshot()
	d := c.Outlier()
	e.beginObject()
	e.str("name", cfg.Name)                       // 1
	e.boolField("added_via_api", c.AddedViaAPI()) // 2
	if d != nil {
		if v := d.SuccessRateEjectionThreshold(); v > 0 {
			e.percent("success_rate_ejection_threshold", v) // 3
		}
	}
	first := true
	for _, s := range snap.PrioritySet.Sets() {
		for _, h := range s.Hosts() {
			if first {
				e.key("host_statuses") // 4
				e.beginArray()
				first = false
			}
			e.element()
			e.hostStatus(c, h, s.Priority(), snap.HostStats(h))
		}
	}
	if !first {
		e.end(']')
	}
	if d != nil {
		if v := d.LocalOriginSuccessRateEjectionThreshold(); v > 0 {
			e.percent("local_origin_success_rate_ejection_threshold", v) // 5
		}
	}
	e.key("circuit_breakers") // 6
	e.beginObject()
	e.key("thresholds")
	e.beginArray()
	for i := range config.NumPriorities {
		p := snap.Breaker.Priority(i)
		e.element()
		e.beginObject()
		if i != 0 {
			e.key("priority")
			e.b = append(e.b, routingPriorityNames[i]...)
		}
		e.uint32Wrapper("max_connections", uint32(p.Connections.Max()))
		e.uint32Wrapper("max_pending_requests", uint32(p.PendingRequests.Max()))
		e.uint32Wrapper("max_requests", uint32(p.Requests.Max()))
		e.uint32Wrapper("max_retries", uint32(p.Retries.Max()))
		e.end('}')
	}
	e.end(']')
	e.end('}')
	e.str("observability_name", observabilityName(cfg)) // 7
	if cfg.EDS != nil {
		e.str("eds_service_name", cfg.EDS.ServiceName) // 8
	}
	e.end('}')
}

// routingPriorityNames are the JSON names of envoy.config.core.v3.RoutingPriority by value.
var routingPriorityNames = [config.NumPriorities]string{`"DEFAULT"`, `"HIGH"`}

// hostStatus prints envoy.admin.v3.HostStatus of h.
func (e *jsonWriter) hostStatus(c *cluster.Cluster, h *host.Host, priority uint32, hs *cluster.HostStats) {
	if hs == nil {
		hs = &cluster.HostStats{}
	}
	e.beginObject()
	e.key("address") // 1
	e.address(h.Address())
	e.key("stats") // 2
	e.beginArray()
	rq := hs.Rq()
	e.metric(false, hs.CxConnectFail.Load(), "cx_connect_fail")
	e.metric(false, hs.CxTotal.Load(), "cx_total")
	e.metric(false, rq.Error, "rq_error")
	e.metric(false, rq.Success, "rq_success")
	e.metric(false, rq.Timeout, "rq_timeout")
	e.metric(false, rq.Total, "rq_total")
	e.metric(true, uint64(max(hs.CxActive.Load(), 0)), "cx_active")
	e.metric(true, uint64(max(rq.Active, 0)), "rq_active")
	e.end(']')
	e.key("health_status") // 3
	e.healthStatus(h.HealthFlags())
	// Envoy prints a rate only when the detector has one (>= 0).
	ext, local := hostRates(c, h)
	if ext >= 0 {
		e.percent("success_rate", ext) // 4
	}
	e.uint32Field("weight", h.Weight()) // 5
	e.str("hostname", h.Hostname())     // 6
	e.uint32Field("priority", priority) // 7
	if local >= 0 {
		e.percent("local_origin_success_rate", local) // 8
	}
	loc := h.Locality()
	e.key("locality") // 9
	e.beginObject()
	e.str("region", loc.Region)
	e.str("zone", loc.Zone)
	e.str("sub_zone", loc.SubZone)
	e.end('}')
	e.end('}')
}

// metric prints one envoy.admin.v3.SimpleMetric array element (type COUNTER is the default).
func (e *jsonWriter) metric(gauge bool, v uint64, name string) {
	e.element()
	e.beginObject()
	if gauge {
		e.key("type")
		e.b = append(e.b, `"GAUGE"`...)
	}
	if v != 0 {
		e.key("value")
		e.b = append(e.b, '"')
		e.b = strconv.AppendUint(e.b, v, 10)
		e.b = append(e.b, '"')
	}
	e.str("name", name)
	e.end('}')
}

// healthStatus prints envoy.admin.v3.HostHealthStatus composed from the host's flags.
func (e *jsonWriter) healthStatus(f host.HealthFlag) {
	e.beginObject()
	e.boolField("failed_active_health_check", f&host.FailedActiveHC != 0) // 1
	e.boolField("failed_outlier_check", f&host.FailedOutlierCheck != 0)   // 2
	eds := `"HEALTHY"`
	switch {
	case f&host.EDSStatusDraining != 0:
		eds = `"DRAINING"`
	case f&host.FailedEDSHealth != 0:
		eds = `"UNHEALTHY"`
	case f&host.DegradedEDSHealth != 0:
		eds = `"DEGRADED"`
	}
	e.key("eds_health_status") // 3
	e.b = append(e.b, eds...)
	e.boolField("failed_active_degraded_check", f&host.DegradedActiveHC != 0)             // 4
	e.boolField("pending_dynamic_removal", f&host.PendingDynamicRemoval != 0)             // 5
	e.boolField("pending_active_hc", f&host.PendingActiveHC != 0)                         // 6
	e.boolField("excluded_via_immediate_hc_fail", f&host.ExcludedViaImmediateHCFail != 0) // 7
	e.boolField("active_hc_timeout", f&host.ActiveHCTimeout != 0)                         // 8
	e.end('}')
}

// address prints a host address string as envoy.config.core.v3.Address: "ip:port" as a
// socket address, "envoy://listener/id" as an internal address, anything else as a pipe path.
func (e *jsonWriter) address(s string) {
	e.beginObject()
	if ap, err := netip.ParseAddrPort(s); err == nil {
		e.key("socket_address")
		e.beginObject()
		if ap.Addr().IsValid() {
			e.key("address")
			e.b = append(e.b, '"')
			e.b = ap.Addr().AppendTo(e.b)
			e.b = append(e.b, '"')
		}
		// port_value is a oneof member: printed even when zero.
		e.key("port_value")
		e.b = strconv.AppendUint(e.b, uint64(ap.Port()), 10)
		e.end('}')
	} else if listener, id, ok := internalAddress(s); ok {
		e.key("envoy_internal_address")
		e.beginObject()
		// server_listener_name is a oneof member: printed even when empty.
		e.key("server_listener_name")
		e.b = pbjson.AppendString(e.b, listener)
		e.str("endpoint_id", id)
		e.end('}')
	} else {
		e.key("pipe")
		e.beginObject()
		e.str("path", s)
		e.end('}')
	}
	e.end('}')
}

// internalAddress splits "envoy://listener/id" into its listener name and endpoint id.
func internalAddress(s string) (listener, id string, ok bool) {
	const scheme = "envoy://"
	rest, ok := strings.CutPrefix(s, scheme)
	if !ok || rest == "" {
		return "", "", false
	}
	listener, id, _ = strings.Cut(rest, "/")
	return listener, id, true
}
