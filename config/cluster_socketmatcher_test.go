package config

import (
	"strings"
	"testing"

	"github.com/legateproxy/legate/internal/filterstate"
	"github.com/legateproxy/legate/internal/matcher/transportsocket"
	"github.com/legateproxy/legate/internal/registry"
	"github.com/legateproxy/legate/tlsutil"
)

// socketMatcherLimits loads clusters with the transport socket matcher's inputs registered.
func socketMatcherLimits(t *testing.T) Limits {
	t.Helper()
	b := registry.NewBuilder()
	Register(b)
	tlsutil.Register(b) // the sockets the matches name
	transportsocket.Register(b)
	r, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	return Limits{Extensions: r}
}

// socketMatcherCluster is a cluster with a TLS and a plain-text match, its matcher given,
// and three endpoints: one whose metadata says tls, one plain, one with none, in a locality
// whose metadata says region-a.
func socketMatcherCluster(m string) string {
	return `
name: web
transport_socket_matches:
- name: mtls
  match: {}
  transport_socket: {name: envoy.transport_sockets.tls, typed_config: {"@type": type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext}}
- name: plain
  match: {}
  transport_socket: {name: envoy.transport_sockets.raw_buffer}
transport_socket_matcher:
` + m + `
load_assignment:
  endpoints:
  - metadata: {filter_metadata: {envoy.transport_socket_match: {region: a}}}
    lb_endpoints:
    - endpoint: {address: {socket_address: {address: 10.0.0.1, port_value: 80}}}
      metadata: {filter_metadata: {envoy.transport_socket_match: {mode: {kind: tls}}}}
    - endpoint: {address: {socket_address: {address: 10.0.0.2, port_value: 80}}}
      metadata: {filter_metadata: {envoy.transport_socket_match: {mode: {kind: plain}}}}
    - endpoint: {address: {socket_address: {address: 10.0.0.3, port_value: 80}}}
`
}

const endpointKindTree = `
  matcher_tree:
    input:
      name: envoy.matching.inputs.endpoint_metadata
      typed_config: {"@type": type.googleapis.com/envoy.extensions.matching.common_inputs.transport_socket.v3.EndpointMetadataInput, filter: envoy.transport_socket_match, path: [{key: mode}, {key: kind}]}
    exact_match_map:
      map:
        tls: {action: {name: ts, typed_config: {"@type": type.googleapis.com/envoy.extensions.matching.common_inputs.transport_socket.v3.TransportSocketNameAction, name: mtls}}}
        plain: {action: {name: ts, typed_config: {"@type": type.googleapis.com/envoy.extensions.matching.common_inputs.transport_socket.v3.TransportSocketNameAction, name: plain}}}`

// TestTransportSocketMatcher: the compiled matcher picks each endpoint's socket from its
// metadata (a nested path) or its locality's, and an endpoint it does not match gets the
// cluster's transport_socket (0). (The e2e test of the same name shows the matcher replacing
// the labels of transport_socket_matches.)
func TestTransportSocketMatcher(t *testing.T) {
	lim := socketMatcherLimits(t)
	for _, tc := range []struct {
		name, matcher string
		want          []int // per endpoint: 0 default, i+1 transport_socket_matches[i]
	}{
		{"endpoint metadata", endpointKindTree, []int{1, 2, 0}},
		{"locality metadata with on_no_match", `
  matcher_tree:
    input:
      name: envoy.matching.inputs.locality_metadata
      typed_config: {"@type": type.googleapis.com/envoy.extensions.matching.common_inputs.transport_socket.v3.LocalityMetadataInput, filter: envoy.transport_socket_match, path: [{key: region}]}
    exact_match_map:
      map:
        b: {action: {name: ts, typed_config: {"@type": type.googleapis.com/envoy.extensions.matching.common_inputs.transport_socket.v3.TransportSocketNameAction, name: mtls}}}
  on_no_match: {action: {name: ts, typed_config: {"@type": type.googleapis.com/envoy.extensions.matching.common_inputs.transport_socket.v3.TransportSocketNameAction, name: plain}}}`, []int{2, 2, 2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pc, err := clusterYAML(t, socketMatcherCluster(tc.matcher))
			if err != nil {
				t.Fatalf("decode: %v", err)
			}
			c, err := ClusterFromProto(pc, lim)
			if err != nil {
				t.Fatalf("ClusterFromProto: %v", err)
			}
			l := &c.LoadAssignment.Localities[0]
			for i := range l.Endpoints {
				got, _ := c.TransportSocketMatcher.Match(&transportsocket.Data{Endpoint: l.Endpoints[i].RawMetadata, Locality: l.RawMetadata})
				if got != tc.want[i] {
					t.Errorf("endpoint %d: socket %d (%s); want %d (%s)", i, got, c.TransportSocketPath(got), tc.want[i], c.TransportSocketPath(tc.want[i]))
				}
			}
		})
	}
}

// TestTransportSocketMatcherFilterState: a matcher over the filter_state input is marked as
// reading filter state; it matches the shared object's plain string (here "tls" selects
// mtls), and without the object (the host's own choice) falls to on_no_match; a matcher
// over metadata alone is not marked.
func TestTransportSocketMatcherFilterState(t *testing.T) {
	lim := socketMatcherLimits(t)
	m := strings.Replace(endpointKindTree,
		`name: envoy.matching.inputs.endpoint_metadata
      typed_config: {"@type": type.googleapis.com/envoy.extensions.matching.common_inputs.transport_socket.v3.EndpointMetadataInput, filter: envoy.transport_socket_match, path: [{key: mode}, {key: kind}]}`,
		`name: envoy.matching.inputs.transport_socket_filter_state
      typed_config: {"@type": type.googleapis.com/envoy.extensions.matching.common_inputs.transport_socket.v3.FilterStateInput, key: acme.socket}`, 1) + `
  on_no_match: {action: {name: ts, typed_config: {"@type": type.googleapis.com/envoy.extensions.matching.common_inputs.transport_socket.v3.TransportSocketNameAction, name: plain}}}`
	pc, err := clusterYAML(t, socketMatcherCluster(m))
	if err != nil {
		t.Fatalf("decode: %v", err)
	}
	c, err := ClusterFromProto(pc, lim)
	if err != nil {
		t.Fatalf("ClusterFromProto: %v", err)
	}
	if !c.SocketMatcherReadsFilterState {
		t.Error("SocketMatcherReadsFilterState = false; want true for a filter_state input")
	}
	shared := []filterstate.Entry{{Name: "acme.socket", Object: filterstate.String("tls")}}
	if got, _ := c.TransportSocketMatcher.Match(&transportsocket.Data{FilterState: shared}); got != 1 {
		t.Errorf("with acme.socket=tls: socket %d; want 1 (mtls)", got)
	}
	if got, _ := c.TransportSocketMatcher.Match(&transportsocket.Data{}); got != 2 {
		t.Errorf("without filter state: socket %d; want 2 (plain, on_no_match)", got)
	}
	pc, err = clusterYAML(t, socketMatcherCluster(endpointKindTree))
	if err != nil {
		t.Fatal(err)
	}
	if c, err := ClusterFromProto(pc, lim); err != nil || c.SocketMatcherReadsFilterState {
		t.Errorf("metadata matcher: SocketMatcherReadsFilterState = %v (%v); want false", c.SocketMatcherReadsFilterState, err)
	}
}

// TestTransportSocketMatcherRefused: an action of another type and a name no match has are
// refused at load with their field path.
func TestTransportSocketMatcherRefused(t *testing.T) {
	lim := socketMatcherLimits(t)
	for _, tc := range []struct{ name, matcher, want string }{
		{"unknown name", strings.Replace(endpointKindTree, "name: plain}", "name: nothing}", 1),
			`name = "nothing"; no transport_socket_matches entry has that name`},
		{"other action", strings.Replace(endpointKindTree, "TransportSocketNameAction, name: plain}", "EndpointMetadataInput}", 1),
			`not implemented by Legate; a transport socket matcher's action is a TransportSocketNameAction`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pc, err := clusterYAML(t, socketMatcherCluster(tc.matcher))
			if err != nil {
				t.Fatalf("decode: %v", err)
			}
			_, err = ClusterFromProto(pc, lim)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("ClusterFromProto error = %v; want it to contain %q", err, tc.want)
			}
		})
	}
}
