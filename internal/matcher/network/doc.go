// Package network is Envoy's network matching inputs (envoy.matching.common_inputs.network,
// the messages of envoy.extensions.matching.common_inputs.network.v3) for the unified
// matcher API (internal/matcher): destination_ip, destination_port, source_ip, source_port,
// direct_source_ip, source_type, server_name, transport_protocol and application_protocol,
// each registered under its Envoy name in the envoy.matching.network.input category. Their
// configuration messages have no fields. It also declares the IP range custom matcher
// (envoy.matching.custom_matchers.ip_range_matcher), which internal/matcher evaluates.
//
// Values are Envoy's: addresses without port, ports in decimal, source_type "local" for a
// loopback or same-address peer (no value otherwise), application_protocol the client's
// ALPN list quoted and comma-joined ('h2','http/1.1'). An input without a value (no SNI,
// a pipe's addresses) matches no value_match and no map key.
//
// Not implemented by Legate (refused at load as an unknown input): filter_state,
// dynamic_metadata and network_namespace inputs.
package network
