// Package transportsocket is the input side of a cluster's transport_socket_matcher (Envoy's
// envoy.extensions.matching.common_inputs.transport_socket.v3): the inputs
// envoy.matching.inputs.endpoint_metadata and envoy.matching.inputs.locality_metadata, which
// read a value from the endpoint's or its locality's metadata at filter, then path, for the
// unified matcher API (internal/matcher). package config compiles the matcher and its
// actions (envoy.matching.action.transport_socket.name, the name of one of the cluster's
// transport_socket_matches) when it loads the cluster, and each host's socket is chosen
// once, when the cluster makes the host.
//
// A value is the metadata's string; a number or a bool is its decimal or true/false text; a
// missing path, a list, a struct or a null has no value (it matches no value_match and no
// map key).
//
// envoy.matching.inputs.transport_socket_filter_state (FilterStateInput) reads the plain
// string of the filter state object key among those the downstream connection shares with
// the upstream connection (Data.FilterState; an object without a plain form has no value).
// A matcher that uses it chooses the socket per connection: the host keeps the choice made
// without filter state, and a connection made for a downstream connection that shares
// objects (the TCP proxy's own connections) is matched again with them
// (host.Host.SocketFor). The HTTP pools' shared connections carry no filter state.
package transportsocket
