package bootstrap

import (
	"fmt"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	httpoptionsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/anypb"
)

// Support says what Legate does with one configuration field when it is set.
type Support uint8

const (
	// Implemented fields are read and honoured.
	Implemented Support = iota
	// Ignored fields are operational only (stats, tracing, watchdogs, load reports, …):
	// Legate accepts them and warns that it does not implement them.
	Ignored
	// Refused fields change traffic or security semantics; a configuration that sets one is
	// rejected with an error naming the field, before anything is bound.
	Refused
)

// fieldNotes are the audited messages: for each, the support of every field. A field of an
// audited message that is missing here (one a newer API added) is Refused, so that no field is
// ever silently ignored. Messages not listed (the HTTP connection manager, TLS contexts, …) are
// checked by the code that converts them. The map is filled at initialisation and only read
// afterwards. config/doc.go documents the same decisions in a table; config's tests hold the
// two equal.
var fieldNotes = map[protoreflect.FullName]map[protoreflect.Name]Support{
	"envoy.config.bootstrap.v3.Bootstrap": {
		"node": Implemented, "static_resources": Implemented, "dynamic_resources": Implemented,
		"cluster_manager": Implemented, "stats_sinks": Implemented, "stats_config": Implemented,
		"stats_flush_interval": Implemented, "stats_flush_on_admin": Implemented,
		"layered_runtime": Implemented, "admin": Implemented, "stats_server_version_override": Implemented,
		"application_log_config": Implemented,
		"node_context_params":    Ignored, "hds_config": Ignored, "flags_path": Ignored,
		"deferred_stat_options": Implemented, "watchdog": Ignored, "watchdogs": Ignored, "tracing": Implemented,
		"overload_manager": Implemented, "enable_dispatcher_stats": Ignored, "use_tcp_for_dns_lookups": Ignored,
		"fatal_actions": Ignored, "inline_headers": Ignored, "perf_tracing_file_path": Ignored,
		"default_regex_engine": Implemented, "xds_config_tracker_extension": Ignored,
		"grpc_async_client_manager_config": Ignored, "memory_allocator_manager": Ignored,
		"enable_worker_cpu_affinity": Ignored, "stats_eviction_interval": Ignored,
		"header_prefix": Refused, "dns_resolution_config": Refused, "typed_dns_resolver_config": Refused,
		"bootstrap_extensions": Implemented, "config_sources": Refused, "default_config_source": Refused,
		"default_socket_interface": Refused, "certificate_provider_instances": Refused,
		"xds_delegate_extension": Refused, "listener_manager": Refused,
	},
	"envoy.config.bootstrap.v3.Admin": {
		"access_log": Implemented, "access_log_path": Implemented, "profile_path": Implemented,
		"address": Implemented, "ignore_global_conn_limit": Implemented,
		"socket_options": Ignored,
		"allow_paths":    Refused,
	},
	"envoy.config.bootstrap.v3.ClusterManager": {
		"local_cluster_name": Implemented, "outlier_detection": Implemented,
		"load_stats_config": Ignored, "enable_deferred_cluster_creation": Ignored,
		"upstream_bind_config": Implemented,
	},
	"envoy.config.cluster.v3.Cluster": {
		"name": Implemented, "alt_stat_name": Implemented, "type": Implemented, "cluster_type": Implemented,
		"eds_cluster_config": Implemented, "connect_timeout": Implemented,
		"per_connection_buffer_limit_bytes": Implemented, "lb_policy": Implemented,
		"load_assignment": Implemented, "health_checks": Implemented, "max_requests_per_connection": Implemented,
		"circuit_breakers": Implemented, "common_http_protocol_options": Implemented,
		"http2_protocol_options": Implemented, "typed_extension_protocol_options": Implemented,
		"dns_refresh_rate": Implemented, "dns_failure_refresh_rate": Implemented, "respect_dns_ttl": Implemented,
		"dns_lookup_family": Implemented, "dns_resolvers": Implemented, "outlier_detection": Implemented,
		"cleanup_interval": Implemented, "upstream_bind_config": Implemented, "lb_subset_config": Implemented,
		"ring_hash_lb_config": Implemented, "maglev_lb_config": Implemented,
		"original_dst_lb_config": Implemented, "least_request_lb_config": Implemented,
		"round_robin_lb_config": Implemented, "common_lb_config": Implemented, "transport_socket": Implemented,
		"metadata": Implemented, "protocol_selection": Implemented, "upstream_connection_options": Implemented,
		"close_connections_on_host_health_failure": Implemented, "ignore_health_on_host_removal": Implemented,
		"load_balancing_policy": Implemented,
		"stats_matcher":         Ignored, "per_connection_buffer_high_watermark_timeout": Ignored,
		"dns_jitter": Ignored, "use_tcp_for_dns_lookups": Implemented, "wait_for_warm_on_init": Ignored,
		"lrs_server": Ignored, "lrs_report_endpoint_metrics": Ignored, "track_timeout_budgets": Ignored,
		"track_cluster_stats": Ignored, "preconnect_policy": Ignored,
		"transport_socket_matches": Implemented, "transport_socket_matcher": Implemented,
		"upstream_http_protocol_options": Implemented,
		// Deprecated; its Http1ProtocolOptions (below) are the upstream codec's options.
		"http_protocol_options": Implemented,
		"dns_resolution_config": Implemented, "typed_dns_resolver_config": Implemented, "filters": Refused,
		"upstream_config": Refused, "connection_pool_per_downstream_connection": Refused,
		"queuing_policies": Refused,
	},
	"envoy.config.core.v3.HttpProtocolOptions": {
		"idle_timeout": Implemented, "max_connection_duration": Implemented, "max_headers_count": Implemented,
		"max_response_headers_kb": Implemented, "max_stream_duration": Implemented,
		"max_requests_per_connection":     Implemented,
		"headers_with_underscores_action": Ignored, "max_connection_duration_jitter": Ignored,
	},
	"envoy.config.core.v3.UpstreamHttpProtocolOptions": {
		"auto_sni": Implemented, "auto_san_validation": Implemented, "override_auto_sni_header": Implemented,
	},
	"envoy.extensions.upstreams.http.v3.HttpProtocolOptions": {
		"common_http_protocol_options": Implemented, "explicit_http_config": Implemented,
		"use_downstream_protocol_config": Implemented, "auto_config": Implemented,
		"upstream_http_protocol_options": Implemented, "http_filters": Implemented,
		"header_validation_config": Refused, "outlier_detection": Refused,
		"request_mirror_policies": Refused, "hash_policy": Refused, "retry_policy": Refused,
	},
	"envoy.extensions.upstreams.http.v3.HttpProtocolOptions.ExplicitHttpConfig": {
		"http_protocol_options": Implemented, "http2_protocol_options": Implemented,
		"http3_protocol_options": Refused,
	},
	"envoy.extensions.upstreams.http.v3.HttpProtocolOptions.UseDownstreamHttpConfig": {
		"http_protocol_options": Implemented, "http2_protocol_options": Implemented,
		"http3_protocol_options": Refused,
	},
	"envoy.extensions.upstreams.http.v3.HttpProtocolOptions.AutoHttpConfig": {
		"http_protocol_options": Implemented, "http2_protocol_options": Implemented,
		"http3_protocol_options": Refused, "alternate_protocols_cache_options": Refused,
	},
	"envoy.config.core.v3.Http2ProtocolOptions": {
		"hpack_table_size": Implemented, "max_concurrent_streams": Implemented,
		"initial_stream_window_size": Implemented, "initial_connection_window_size": Implemented,
		"connection_keepalive": Implemented,
		"allow_connect":        Ignored, "max_outbound_frames": Ignored, "max_outbound_control_frames": Ignored,
		"max_consecutive_inbound_frames_with_empty_payload":    Ignored,
		"max_inbound_priority_frames_per_stream":               Ignored,
		"max_inbound_window_update_frames_per_data_frame_sent": Ignored,
		"enable_huffman_encoding":                              Ignored, "stream_reset_burst": Ignored, "stream_reset_rate": Ignored,
		"max_metadata_size": Ignored, "use_oghttp2_codec": Ignored,
		"allow_metadata": Refused, "stream_error_on_invalid_http_messaging": Refused,
		"override_stream_error_on_invalid_http_message": Refused, "custom_settings_parameters": Refused,
		"max_header_field_size_kb": Refused, "disallow_obs_text": Refused,
	},
	"envoy.config.core.v3.KeepaliveSettings": {
		"interval": Implemented, "timeout": Implemented,
		"interval_jitter": Ignored, "connection_idle_interval": Refused,
	},
	"envoy.config.core.v3.Http1ProtocolOptions": {
		"allow_absolute_url": Implemented, "accept_http_10": Implemented, "default_host_for_http_10": Implemented,
		"header_key_format": Implemented, "enable_trailers": Implemented, "allow_chunked_length": Implemented,
		"send_fully_qualified_url":                      Implemented,
		"override_stream_error_on_invalid_http_message": Refused,
		"use_balsa_parser":                              Refused, "allow_custom_methods": Refused, "ignore_http_11_upgrade": Refused,
	},
	"envoy.config.cluster.v3.Cluster.RoundRobinLbConfig": {
		"slow_start_config": Refused,
	},
	"envoy.config.cluster.v3.Cluster.LeastRequestLbConfig": {
		"choice_count": Implemented, "active_request_bias": Implemented,
		"slow_start_config": Refused,
	},
	"envoy.config.cluster.v3.Cluster.CommonLbConfig": {
		"healthy_panic_threshold": Implemented, "zone_aware_lb_config": Implemented,
		"locality_weighted_lb_config": Implemented, "update_merge_window": Implemented,
		"ignore_new_hosts_until_first_hc": Implemented,
		"consistent_hashing_lb_config":    Implemented,
		"override_host_status":            Refused, "close_connections_on_host_set_change": Refused,
	},
	"envoy.config.cluster.v3.Cluster.CommonLbConfig.ConsistentHashingLbConfig": {
		"use_hostname_for_hashing": Implemented,
		"hash_balance_factor":      Refused,
	},
	"envoy.config.cluster.v3.Cluster.LbSubsetConfig": {
		"fallback_policy": Implemented, "default_subset": Implemented, "subset_selectors": Implemented,
		"locality_weight_aware": Implemented, "scale_locality_weight": Implemented, "panic_mode_any": Implemented,
		"list_as_any": Refused, "metadata_fallback_policy": Refused,
	},
	"envoy.config.cluster.v3.Cluster.LbSubsetConfig.LbSubsetSelector": {
		"keys":                   Implemented,
		"single_host_per_subset": Refused, "fallback_policy": Refused, "fallback_keys_subset": Refused,
	},
	"envoy.config.core.v3.BindConfig": {
		"source_address": Implemented, "socket_options": Implemented,
		"freebind": Refused, "extra_source_addresses": Refused,
		"additional_source_addresses": Refused, "local_address_selector": Refused,
		"validate_network_namespaces": Refused,
	},
	"envoy.config.cluster.v3.UpstreamConnectionOptions": {
		"tcp_keepalive": Implemented,
		"set_local_interface_name_on_upstream_connections": Ignored, "happy_eyeballs_config": Ignored,
	},
	"envoy.config.listener.v3.Listener": {
		"name": Implemented, "address": Implemented, "additional_addresses": Implemented,
		"stat_prefix": Implemented, "filter_chains": Implemented, "filter_chain_matcher": Implemented,
		"use_original_dst": Implemented, "default_filter_chain": Implemented,
		"per_connection_buffer_limit_bytes": Implemented, "metadata": Implemented, "drain_type": Implemented,
		"listener_filters": Implemented, "listener_filters_timeout": Implemented,
		"continue_on_listener_filters_timeout": Implemented, "traffic_direction": Implemented,
		"udp_listener_config": Implemented, "api_listener": Implemented, "internal_listener": Implemented,
		"bind_to_port": Implemented,
		"per_connection_buffer_high_watermark_timeout": Ignored, "tcp_fast_open_queue_length": Ignored,
		"access_log": Implemented, "tcp_backlog_size": Ignored, "max_connections_to_accept_per_socket_event": Ignored,
		"enable_reuse_port": Ignored, "reuse_port": Ignored, "stats_matcher": Ignored,
		"fcds_config": Refused, "deprecated_v1": Refused, "transparent": Refused, "freebind": Refused,
		"socket_options": Implemented, "connection_balance_config": Refused, "enable_mptcp": Refused,
		"ignore_global_conn_limit": Implemented, "bypass_overload_manager": Implemented, "tcp_keepalive": Implemented,
	},
	"envoy.config.listener.v3.FilterChain": {
		"filter_chain_match": Implemented, "filters": Implemented, "use_proxy_proto": Implemented,
		"metadata": Implemented, "transport_socket": Implemented, "transport_socket_connect_timeout": Implemented,
		"name": Implemented,
	},
	"envoy.config.listener.v3.FilterChainMatch": {
		"destination_port": Implemented, "prefix_ranges": Implemented, "address_suffix": Refused,
		"suffix_len": Refused, "direct_source_prefix_ranges": Implemented, "source_type": Implemented,
		"source_prefix_ranges": Implemented, "source_ports": Implemented, "server_names": Implemented,
		"transport_protocol": Implemented, "application_protocols": Implemented,
	},
}

// FieldNote is one set field Audit found that Legate does not implement.
type FieldNote struct {
	// Path is the field path, as errors and warnings name it (e.g.
	// "static_resources.clusters[0].track_cluster_stats").
	Path    string
	Support Support
}

// String is the text of the note's warning or error.
func (n FieldNote) String() string {
	if n.Support == Ignored {
		return n.Path + ": set, but not implemented by Legate; ignored (it does not change how traffic is handled)"
	}
	return n.Path + ": set; not implemented by Legate"
}

// Audit lists the fields set in m, and in the audited messages inside it, that Legate ignores
// (with a warning) or refuses, in field order; paths start with path. It is a pure function of
// m.
func Audit(path string, m proto.Message) []FieldNote {
	var out []FieldNote
	audit(path, m.ProtoReflect(), &out)
	return out
}

// FieldSupport returns the support of field of the message named msg, and whether msg is
// audited at all.
func FieldSupport(msg protoreflect.FullName, field protoreflect.Name) (Support, bool) {
	notes, ok := fieldNotes[msg]
	if !ok {
		return Implemented, false
	}
	s, known := notes[field]
	if !known {
		return Refused, true
	}
	return s, true
}

// AuditedFields returns the audited messages and their fields with their support, for
// documentation tests.
func AuditedFields() map[protoreflect.FullName]map[protoreflect.Name]Support {
	out := make(map[protoreflect.FullName]map[protoreflect.Name]Support, len(fieldNotes))
	for m, fs := range fieldNotes {
		c := make(map[protoreflect.Name]Support, len(fs))
		for f, s := range fs {
			c[f] = s
		}
		out[m] = c
	}
	return out
}

func audit(path string, m protoreflect.Message, out *[]FieldNote) {
	if !m.IsValid() {
		return
	}
	if opts := upstreamHTTPOptions(m); opts != nil {
		audit(path, opts.ProtoReflect(), out)
		return
	}
	_, audited := fieldNotes[m.Descriptor().FullName()]
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		fpath := joinPath(path, string(fd.Name()))
		if audited {
			if s, _ := FieldSupport(m.Descriptor().FullName(), fd.Name()); s != Implemented {
				*out = append(*out, FieldNote{Path: fpath, Support: s})
				return true
			}
		}
		if fd.Kind() != protoreflect.MessageKind && fd.Kind() != protoreflect.GroupKind {
			return true
		}
		switch {
		case fd.IsList():
			l := v.List()
			for i := 0; i < l.Len(); i++ {
				audit(fmt.Sprintf("%s[%d]", fpath, i), l.Get(i).Message(), out)
			}
		case fd.IsMap():
			if fd.MapValue().Kind() == protoreflect.MessageKind {
				v.Map().Range(func(k protoreflect.MapKey, mv protoreflect.Value) bool {
					audit(fmt.Sprintf("%s[%q]", fpath, k.String()), mv.Message(), out)
					return true
				})
			}
		default:
			audit(fpath, v.Message(), out)
		}
		return true
	})
}

// auditProblems adds the refused fields of m to p and returns the warnings for the ignored
// ones, each prefixed with p's file name.
func auditProblems(p *problems, m proto.Message) []string {
	var warnings []string
	for _, n := range Audit("", m) {
		if n.Support == Refused {
			p.add(n.Path, "set; not implemented by Legate")
			continue
		}
		warnings = append(warnings, p.file+": "+n.String())
	}
	return warnings
}

// deprecations returns a warning, prefixed with file, for each deprecated field set in b that
// Legate accepts as Envoy does, with the warning Envoy logs.
func deprecations(file string, b *bootstrapv3.Bootstrap) []string {
	var out []string
	for i, c := range b.GetStaticResources().GetClusters() {
		if c.GetHttpProtocolOptions() != nil {
			out = append(out, fmt.Sprintf("%s: static_resources.clusters[%d].http_protocol_options: deprecated; use typed_extension_protocol_options[%q] instead", file, i, httpOptionsKey()))
		}
	}
	return out
}

// upstreamHTTPOptions returns the upstream HttpProtocolOptions packed in m when m is an Any
// holding one (a cluster's typed_extension_protocol_options entry), so that its fields are
// audited like the Cluster's own. Other Anys are left to the code that decodes them.
func upstreamHTTPOptions(m protoreflect.Message) *httpoptionsv3.HttpProtocolOptions {
	a, ok := m.Interface().(*anypb.Any)
	if !ok || a.GetTypeUrl() != typeURL(&httpoptionsv3.HttpProtocolOptions{}) {
		return nil
	}
	var opts httpoptionsv3.HttpProtocolOptions
	if a.UnmarshalTo(&opts) != nil {
		return nil // the cluster's converter reports the bad payload
	}
	return &opts
}
