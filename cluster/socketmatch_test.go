package cluster

import (
	"testing"

	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/legateproxy/legate/host"
)

// socketMatchCluster has Istio's shape: a TLS match for endpoints labelled tlsMode: istio and
// a catch-all plain-text one.
const socketMatchCluster = `name: mesh
type: EDS
common_lb_config: {update_merge_window: 0s}
transport_socket_matches:
- name: tlsMode-istio
  match: {tlsMode: istio}
  transport_socket: {name: envoy.transport_sockets.tls}
- name: tlsMode-disabled
  match: {}
  transport_socket: {name: envoy.transport_sockets.raw_buffer}
`

// TestTransportSocketMatchesSelectPerEndpoint checks that each host carries the socket its
// endpoint's (else its locality's) envoy.transport_socket_match metadata selects, that the
// per-match total_match_count stats count the hosts created, and that an EDS update changing an
// endpoint's metadata replaces its host (so new connections use the new socket).
func TestTransportSocketMatchesSelectPerEndpoint(t *testing.T) {
	e := newEnv(t, nil)
	if _, err := e.m.AddOrUpdate(parseCluster(t, socketMatchCluster), "1"); err != nil {
		t.Fatal(err)
	}
	c := e.m.Warming()[0]
	apply := func(j string) map[string]*host.Host {
		t.Helper()
		cla := &endpointv3.ClusterLoadAssignment{}
		if err := protojson.Unmarshal([]byte(j), cla); err != nil {
			t.Fatal(err)
		}
		if err := c.ApplyAssignment(cla); err != nil {
			t.Fatal(err)
		}
		out := map[string]*host.Host{}
		for _, s := range c.Snapshot().PrioritySet.Sets() {
			for _, h := range s.Hosts() {
				out[h.Address()] = h
			}
		}
		return out
	}
	hosts := apply(`{"cluster_name":"mesh","endpoints":[
	 {"lb_endpoints":[
	  {"endpoint":{"address":{"socket_address":{"address":"10.0.0.1","port_value":80}}},
	   "metadata":{"filter_metadata":{"envoy.transport_socket_match":{"tlsMode":"istio"}}}},
	  {"endpoint":{"address":{"socket_address":{"address":"10.0.0.2","port_value":80}}}}]},
	 {"metadata":{"filter_metadata":{"envoy.transport_socket_match":{"tlsMode":"istio"}}},
	  "lb_endpoints":[{"endpoint":{"address":{"socket_address":{"address":"10.0.0.3","port_value":80}}}}]}]}`)
	want := map[string]int{"10.0.0.1:80": 1, "10.0.0.2:80": 2, "10.0.0.3:80": 2}
	// 10.0.0.3's own (empty) metadata satisfies the catch-all match first: endpoint metadata is
	// tried against every match before the locality's.
	for addr, w := range want {
		if got := hosts[addr].SocketMatch(); got != w {
			t.Errorf("%s: SocketMatch() = %d; want %d", addr, got, w)
		}
	}
	e.wantStats(t, map[string]uint64{
		"cluster.mesh.tlsMode-istio.total_match_count":    1,
		"cluster.mesh.tlsMode-disabled.total_match_count": 2,
		"cluster.mesh.default.total_match_count":          0,
	})

	// 10.0.0.2 becomes an Istio endpoint: a new host with the TLS socket; 10.0.0.1 is kept.
	first := hosts["10.0.0.1:80"]
	hosts = apply(`{"cluster_name":"mesh","endpoints":[{"lb_endpoints":[
	  {"endpoint":{"address":{"socket_address":{"address":"10.0.0.1","port_value":80}}},
	   "metadata":{"filter_metadata":{"envoy.transport_socket_match":{"tlsMode":"istio"}}}},
	  {"endpoint":{"address":{"socket_address":{"address":"10.0.0.2","port_value":80}}},
	   "metadata":{"filter_metadata":{"envoy.transport_socket_match":{"tlsMode":"istio"}}}}]}]}`)
	if hosts["10.0.0.1:80"] != first {
		t.Error("10.0.0.1 was replaced although its metadata did not change")
	}
	if got := hosts["10.0.0.2:80"].SocketMatch(); got != 1 {
		t.Errorf("10.0.0.2 after the update: SocketMatch() = %d; want 1", got)
	}
	e.wantStats(t, map[string]uint64{
		"cluster.mesh.tlsMode-istio.total_match_count":    2,
		"cluster.mesh.tlsMode-disabled.total_match_count": 2,
	})
}

// TestTransportSocketMatchesLocality checks that a locality's metadata selects a match when no
// match takes the endpoint's own metadata, and that a host no match takes uses the cluster's
// transport_socket (default.total_match_count).
func TestTransportSocketMatchesLocality(t *testing.T) {
	e := newEnv(t, nil)
	cfg := parseCluster(t, `name: loc
type: EDS
common_lb_config: {update_merge_window: 0s}
transport_socket_matches:
- name: numbered
  match: {num: 1}
  transport_socket: {name: envoy.transport_sockets.tls}
`)
	if _, err := e.m.AddOrUpdate(cfg, "1"); err != nil {
		t.Fatal(err)
	}
	c := e.m.Warming()[0]
	cla := &endpointv3.ClusterLoadAssignment{}
	// The string "1" is not the number 1: only the locality's metadata matches.
	if err := protojson.Unmarshal([]byte(`{"cluster_name":"loc","endpoints":[
	 {"metadata":{"filter_metadata":{"envoy.transport_socket_match":{"num":1}}},"lb_endpoints":[
	  {"endpoint":{"address":{"socket_address":{"address":"10.0.1.1","port_value":80}}},
	   "metadata":{"filter_metadata":{"envoy.transport_socket_match":{"num":"1"}}}}]},
	 {"lb_endpoints":[{"endpoint":{"address":{"socket_address":{"address":"10.0.1.2","port_value":80}}},
	   "metadata":{"filter_metadata":{"envoy.transport_socket_match":{"num":"1"}}}}]}]}`), cla); err != nil {
		t.Fatal(err)
	}
	if err := c.ApplyAssignment(cla); err != nil {
		t.Fatal(err)
	}
	got := map[string]int{}
	for _, h := range c.Snapshot().PrioritySet.Sets()[0].Hosts() {
		got[h.Address()] = h.SocketMatch()
	}
	if got["10.0.1.1:80"] != 1 || got["10.0.1.2:80"] != 0 {
		t.Errorf("SocketMatch by address = %v; want 10.0.1.1:80 → 1 (locality), 10.0.1.2:80 → 0 (default)", got)
	}
	e.wantStats(t, map[string]uint64{"cluster.loc.numbered.total_match_count": 1, "cluster.loc.default.total_match_count": 1})
}
