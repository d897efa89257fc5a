// Package config turns a decoded, protoc-gen-validate-checked Envoy bootstrap (see package
// bootstrap) into plain Go structs and checks Legate's own rules on it: the rules Envoy applies
// in C++ rather than in its proto annotations (unique names, name length limits, lb_policy
// agreeing with its lb config, ring sizes, admin address shape, …). This is the one place where
// bootstrap protos become structs; code past this package reads the structs.
//
// Cluster.load_balancing_policy is converted into the same Cluster values as lb_policy and its
// config (RoundRobin, LeastRequest, Random, RingHash, Maglev, ClusterProvided, and WrrLocality
// as locality-weighted balancing around one of them); the first entry of policies whose type
// Legate implements wins, as in Envoy, and none implemented is an error.
//
// Bootstrap.overload_manager is converted by package overload (overload.FromProto), which
// decides its sub-fields: the monitors and actions it implements, and every other one refused
// with its path.
//
// # Fields Legate does not implement
//
// No configuration field is silently ignored. A field of the Bootstrap, Admin,
// ClusterManager, Cluster, Listener, FilterChain and the sub-messages below that Legate does not
// implement is either refused (it changes traffic or security semantics: the configuration is
// rejected with "<path>: set; not implemented by Legate" before anything binds; over xDS the
// resource is NACKed) or ignored with a warning (operational only). bootstrap.Audit holds the
// decisions: bootstrap.Load and bootstrap.Parse add refusals to their errors and warnings to
// Loaded.Warnings (the server logs them and counts them in server.static_unknown_fields);
// ClusterFromProto and ListenerFromProto refuse the same fields and list the ignored ones in
// Cluster.Ignored and Listener.Ignored. A field a newer API adds to one of these messages is
// refused until it is given a decision. TestDocTableMatchesAudit holds this table equal to
// bootstrap's:
//
//	| message                                          | field                                            | decision | why |
//	|--------------------------------------------------|--------------------------------------------------|----------|---|
//	| Bootstrap                                        | node_context_params                              | ignored  | xDS-TP context parameters; Legate sends the node as is |
//	| Bootstrap                                        | hds_config                                       | ignored  | health discovery for the management server; no traffic changes |
//	| Bootstrap                                        | flags_path                                       | ignored  | Envoy's flag files (drain, …); Legate's admin endpoints do this |
//	| Bootstrap                                        | watchdog                                         | ignored  | dispatcher watchdogs; Go has no event-loop stalls to kill on |
//	| Bootstrap                                        | watchdogs                                        | ignored  | as watchdog |
//	| Bootstrap                                        | enable_dispatcher_stats                          | ignored  | dispatcher histograms only |
//	| Bootstrap                                        | use_tcp_for_dns_lookups                          | ignored  | DNS transport only; the same names resolve |
//	| Bootstrap                                        | fatal_actions                                    | ignored  | crash-time actions |
//	| Bootstrap                                        | inline_headers                                   | ignored  | a header-map performance hint |
//	| Bootstrap                                        | perf_tracing_file_path                           | ignored  | performance tracing output |
//	| Bootstrap                                        | xds_config_tracker_extension                     | ignored  | observes xDS updates only |
//	| Bootstrap                                        | grpc_async_client_manager_config                 | ignored  | gRPC client cache tuning |
//	| Bootstrap                                        | memory_allocator_manager                         | ignored  | tcmalloc release tuning |
//	| Bootstrap                                        | enable_worker_cpu_affinity                       | ignored  | thread pinning |
//	| Bootstrap                                        | stats_eviction_interval                          | ignored  | unused stats are kept |
//	| Bootstrap                                        | header_prefix                                    | refused  | renames x-envoy-* headers on the wire |
//	| Bootstrap                                        | dns_resolution_config                            | refused  | would change which DNS servers resolve cluster hosts |
//	| Bootstrap                                        | typed_dns_resolver_config                        | refused  | as dns_resolution_config |
//	| Bootstrap                                        | config_sources                                   | refused  | xDS-TP resource locators would not resolve |
//	| Bootstrap                                        | default_config_source                            | refused  | as config_sources |
//	| Bootstrap                                        | default_socket_interface                         | refused  | replaces how every socket is made |
//	| Bootstrap                                        | certificate_provider_instances                   | refused  | certificates TLS contexts would use |
//	| Bootstrap                                        | xds_delegate_extension                           | refused  | changes where xDS resources come from |
//	| Bootstrap                                        | listener_manager                                 | refused  | replaces the listener manager |
//	| Admin                                            | socket_options                                   | ignored  | admin socket tuning |
//	| Admin                                            | allow_paths                                      | refused  | ignoring it would expose every admin endpoint |
//	| ClusterManager                                   | load_stats_config                                | ignored  | load reports to the management server |
//	| ClusterManager                                   | enable_deferred_cluster_creation                 | ignored  | clusters are built eagerly, same traffic |
//	| Cluster                                          | stats_matcher                                    | ignored  | which cluster stats are kept |
//	| Cluster                                          | per_connection_buffer_high_watermark_timeout     | ignored  | backpressure timeout; flow control still applies |
//	| Cluster                                          | dns_jitter                                       | ignored  | refresh timing only |
//	| Cluster                                          | wait_for_warm_on_init                            | ignored  | start-up sequencing; the cluster always warms first |
//	| Cluster                                          | lrs_server                                       | ignored  | load reports to the management server |
//	| Cluster                                          | lrs_report_endpoint_metrics                      | ignored  | as lrs_server |
//	| Cluster                                          | track_timeout_budgets                            | ignored  | extra stats only |
//	| Cluster                                          | track_cluster_stats                              | ignored  | extra stats only |
//	| Cluster                                          | preconnect_policy                                | ignored  | connections open on demand; same requests reach the same hosts |
//	| Cluster                                          | filters                                          | refused  | upstream network filters |
//	| Cluster                                          | upstream_config                                  | refused  | replaces the upstream connection pool |
//	| Cluster                                          | connection_pool_per_downstream_connection        | refused  | connection isolation between clients |
//	| Cluster                                          | queuing_policies                                 | refused  | request queueing |
//	| HttpProtocolOptions                              | headers_with_underscores_action                  | ignored  | applies to downstream requests only; Envoy ignores it on clusters too |
//	| HttpProtocolOptions                              | max_connection_duration_jitter                   | ignored  | Envoy honours it for downstream connections only |
//	| HttpProtocolOptions                              | header_validation_config                         | refused  | header validation |
//	| HttpProtocolOptions                              | outlier_detection                                | refused  | HTTP-level outlier detection matchers |
//	| HttpProtocolOptions                              | request_mirror_policies                          | refused  | cluster-level request mirroring |
//	| HttpProtocolOptions                              | hash_policy                                      | refused  | cluster-level hash policy |
//	| HttpProtocolOptions                              | retry_policy                                     | refused  | cluster-level retry policy |
//	| HttpProtocolOptions.ExplicitHttpConfig           | http3_protocol_options                           | refused  | HTTP/3 upstreams |
//	| HttpProtocolOptions.UseDownstreamHttpConfig      | http3_protocol_options                           | refused  | HTTP/3 upstreams |
//	| HttpProtocolOptions.AutoHttpConfig               | http3_protocol_options                           | refused  | HTTP/3 upstreams |
//	| HttpProtocolOptions.AutoHttpConfig               | alternate_protocols_cache_options                | refused  | HTTP/3 discovery |
//	| Http2ProtocolOptions                             | allow_connect                                    | ignored  | Legate's upstream HTTP/2 carries extended CONNECT (upgrades) whether set or not |
//	| Http2ProtocolOptions                             | max_outbound_frames                              | ignored  | flood protection; the HTTP/2 server writes its acks from its reader, which stops reading while a write waits, so no queue grows |
//	| Http2ProtocolOptions                             | max_outbound_control_frames                      | ignored  | as max_outbound_frames |
//	| Http2ProtocolOptions                             | max_consecutive_inbound_frames_with_empty_payload | ignored  | as max_outbound_frames |
//	| Http2ProtocolOptions                             | max_inbound_priority_frames_per_stream           | ignored  | as max_outbound_frames |
//	| Http2ProtocolOptions                             | max_inbound_window_update_frames_per_data_frame_sent | ignored  | as max_outbound_frames |
//	| Http2ProtocolOptions                             | enable_huffman_encoding                          | ignored  | header encoding only; the same headers are sent |
//	| Http2ProtocolOptions                             | stream_reset_burst                               | ignored  | reset flood protection |
//	| Http2ProtocolOptions                             | stream_reset_rate                                | ignored  | reset flood protection |
//	| Http2ProtocolOptions                             | max_metadata_size                                | ignored  | METADATA frames are not used |
//	| Http2ProtocolOptions                             | use_oghttp2_codec                                | ignored  | Envoy's choice of codec library; the protocol is the same |
//	| Http2ProtocolOptions                             | allow_metadata                                   | refused  | METADATA frames |
//	| Http2ProtocolOptions                             | stream_error_on_invalid_http_messaging           | refused  | codec error handling |
//	| Http2ProtocolOptions                             | override_stream_error_on_invalid_http_message    | refused  | codec error handling |
//	| Http2ProtocolOptions                             | custom_settings_parameters                       | refused  | extra SETTINGS |
//	| Http2ProtocolOptions                             | max_header_field_size_kb                         | refused  | a per-field limit; max_response_headers_kb applies |
//	| Http2ProtocolOptions                             | disallow_obs_text                                | refused  | header validation |
//	| KeepaliveSettings                                | interval_jitter                                  | ignored  | PING timing only |
//	| KeepaliveSettings                                | connection_idle_interval                         | refused  | a PING before reusing an idle connection |
//	| Http1ProtocolOptions                             | override_stream_error_on_invalid_http_message    | refused  | HTTP/1 codec option (deprecated Cluster.http_protocol_options) |
//	| Http1ProtocolOptions                             | use_balsa_parser                                 | refused  | HTTP/1 codec option (deprecated Cluster.http_protocol_options) |
//	| Http1ProtocolOptions                             | allow_custom_methods                             | refused  | HTTP/1 codec option (deprecated Cluster.http_protocol_options) |
//	| Http1ProtocolOptions                             | ignore_http_11_upgrade                           | refused  | HTTP/1 codec option (deprecated Cluster.http_protocol_options) |
//	| Cluster.RoundRobinLbConfig                       | slow_start_config                                | refused  | no slow start |
//	| Cluster.LeastRequestLbConfig                     | slow_start_config                                | refused  | no slow start |
//	| Cluster.CommonLbConfig                           | override_host_status                             | refused  | host override selection |
//	| Cluster.CommonLbConfig                           | close_connections_on_host_set_change             | refused  | pools are not drained when hosts change |
//	| Cluster.CommonLbConfig.ConsistentHashingLbConfig | hash_balance_factor                              | refused  | bounded-load hashing |
//	| Cluster.LbSubsetConfig                           | list_as_any                                      | refused  | subset matching of list metadata |
//	| Cluster.LbSubsetConfig                           | metadata_fallback_policy                         | refused  | subset fallback lists |
//	| Cluster.LbSubsetConfig.LbSubsetSelector          | single_host_per_subset                           | refused  | subset selection |
//	| Cluster.LbSubsetConfig.LbSubsetSelector          | fallback_policy                                  | refused  | per-selector fallback |
//	| Cluster.LbSubsetConfig.LbSubsetSelector          | fallback_keys_subset                             | refused  | per-selector fallback |
//	| BindConfig                                       | freebind                                         | refused  | bind options (cluster upstream_bind_config) |
//	| BindConfig                                       | extra_source_addresses                           | refused  | source address choice |
//	| BindConfig                                       | additional_source_addresses                      | refused  | source address choice |
//	| BindConfig                                       | local_address_selector                           | refused  | source address choice |
//	| BindConfig                                       | validate_network_namespaces                      | refused  | bind options |
//	| UpstreamConnectionOptions                        | set_local_interface_name_on_upstream_connections | ignored  | information for filters only |
//	| UpstreamConnectionOptions                        | happy_eyeballs_config                            | ignored  | connection racing order; same hosts |
//	| Listener                                         | per_connection_buffer_high_watermark_timeout     | ignored  | backpressure timeout; flow control still applies |
//	| Listener                                         | tcp_fast_open_queue_length                       | ignored  | TCP Fast Open off; connections still accepted |
//	| Listener                                         | tcp_backlog_size                                 | ignored  | kernel backlog tuning |
//	| Listener                                         | max_connections_to_accept_per_socket_event       | ignored  | accept batching |
//	| Listener                                         | enable_reuse_port                                | ignored  | one socket per listener |
//	| Listener                                         | reuse_port                                       | ignored  | as enable_reuse_port |
//	| Listener                                         | stats_matcher                                    | ignored  | which listener stats are kept |
//	| Listener                                         | fcds_config                                      | refused  | filter chain discovery |
//	| Listener                                         | deprecated_v1                                    | refused  | v1 bind_to_port |
//	| Listener                                         | transparent                                      | refused  | IP_TRANSPARENT bind option |
//	| Listener                                         | freebind                                         | refused  | bind option |
//	| Listener                                         | connection_balance_config                        | refused  | connection distribution |
//	| Listener                                         | enable_mptcp                                     | refused  | transport protocol |
//	| FilterChainMatch                                 | address_suffix                                   | refused  | filter chain selection |
//	| FilterChainMatch                                 | suffix_len                                       | refused  | filter chain selection |
//
// Bootstrap.default_regex_engine may name only envoy.regex_engines.google_re2, the engine
// Legate's regexes already use (Go's regexp is RE2); any other engine is refused.
//
// HttpProtocolOptions above is both core.v3.HttpProtocolOptions (a Cluster's
// common_http_protocol_options: idle_timeout, max_connection_duration, max_headers_count,
// max_response_headers_kb, max_stream_duration and max_requests_per_connection are
// implemented) and the typed_extension_protocol_options entry
// envoy.extensions.upstreams.http.v3.HttpProtocolOptions, whose fields the audit reads inside
// the Any. When that entry is set it replaces the Cluster's http2_protocol_options,
// common_http_protocol_options, protocol_selection and http_protocol_options, as in Envoy
// (those are then listed as ignored); explicit_http_config, use_downstream_protocol_config and auto_config (TLS only:
// ALPN chooses HTTP/2 or HTTP/1.1 per connection) are implemented, and their
// http_protocol_options follows the rules of Cluster.http_protocol_options.
//
// Http2ProtocolOptions above are a cluster's (http2_protocol_options, or the typed options'):
// hpack_table_size, max_concurrent_streams (a cap on Legate's streams per connection),
// initial_stream_window_size (never above per_connection_buffer_limit_bytes),
// initial_connection_window_size and connection_keepalive's interval and timeout are
// implemented by the pools' HTTP/2 client. Legate's own gRPC channels (xDS, access-log and
// metrics services) are grpc-go's and do not apply them.
//
// Cluster.http_protocol_options, deprecated in Envoy, is accepted with a deprecation warning
// (bootstrap's Loaded.Warnings); its Http1ProtocolOptions, like those of the typed
// HttpProtocolOptions, become Cluster.HTTP1 (HTTP1OptionsFromProto), the fields above refused.
//
// The HTTP connection manager (HttpConnectionManager) has a table of its own, hcmFields in
// hcm_fields.go: HTTPConnectionManagerFromProto refuses the fields below marked refused (over
// xDS the listener is NACKed) and lists the ignored ones in HTTPConnectionManager.Ignored, which
// the connection manager logs. Its http_protocol_options become HTTPConnectionManager.HTTP1,
// refusing the fields the cluster's table refuses.
// TestHCMDocTable holds this table equal to hcmFields:
//
//	| message               | field                                              | decision | why |
//	|-----------------------|----------------------------------------------------|----------|---|
//	| HttpConnectionManager | access_log_flush_interval                          | ignored  | periodic access-log entries for long streams; entries are written at the stream's end |
//	| HttpConnectionManager | flush_access_log_on_new_request                    | ignored  | an extra access-log entry when a request starts |
//	| HttpConnectionManager | access_log_options                                 | ignored  | as access_log_flush_interval and flush_access_log_on_new_request |
//	| HttpConnectionManager | record_route_resolution_stats                      | ignored  | a stat only |
//	| HttpConnectionManager | drain_timeout_jitter                               | ignored  | spreads drain GOAWAYs; drain_timeout still applies |
//	| HttpConnectionManager | delayed_close_timeout                              | ignored  | how long a closing connection waits for the peer; Legate closes once the response is written |
//	| HttpConnectionManager | stream_flush_timeout                               | ignored  | a timeout for flushing to a stalled client; stream_idle_timeout still applies |
//	| HttpConnectionManager | add_user_agent                                     | refused  | changes request headers (user-agent, x-envoy-downstream-service-cluster) |
//	| HttpConnectionManager | http1_safe_max_connection_duration                 | refused  | connection lifetime |
//	| HttpConnectionManager | http3_protocol_options                             | refused  | HTTP/3 is not served |
//	| HttpConnectionManager | scheme_header_transformation                       | refused  | changes :scheme |
//	| HttpConnectionManager | original_ip_detection_extensions                   | refused  | changes the client address |
//	| HttpConnectionManager | early_header_mutation_extensions                   | refused  | changes request headers |
//	| HttpConnectionManager | internal_address_config                            | refused  | changes which clients are internal |
//	| HttpConnectionManager | via                                                | refused  | changes headers |
//	| HttpConnectionManager | forward_client_cert_details                        | refused  | x-forwarded-client-cert handling |
//	| HttpConnectionManager | set_current_client_cert_details                    | refused  | x-forwarded-client-cert handling |
//	| HttpConnectionManager | forward_client_cert_matcher                        | refused  | x-forwarded-client-cert handling |
//	| HttpConnectionManager | proxy_100_continue                                 | refused  | changes 100-continue handling |
//	| HttpConnectionManager | represent_ipv4_remote_address_as_ipv4_mapped_ipv6  | refused  | changes the client address |
//	| HttpConnectionManager | normalize_path                                     | refused  | path normalisation changes routing |
//	| HttpConnectionManager | merge_slashes                                      | refused  | path normalisation changes routing |
//	| HttpConnectionManager | path_with_escaped_slashes_action                   | refused  | path normalisation changes routing |
//	| HttpConnectionManager | request_id_extension                               | refused  | changes x-request-id |
//	| HttpConnectionManager | local_reply_config                                 | refused  | changes local replies |
//	| HttpConnectionManager | strip_matching_host_port                           | refused  | changes the host routes see |
//	| HttpConnectionManager | stream_error_on_invalid_http_message               | refused  | changes codec error handling |
//	| HttpConnectionManager | path_normalization_options                         | refused  | path normalisation changes routing |
//	| HttpConnectionManager | strip_trailing_host_dot                            | refused  | changes the host routes see |
//	| HttpConnectionManager | proxy_status_config                                | refused  | adds proxy-status headers |
//	| HttpConnectionManager | typed_header_validation_config                     | refused  | header validation |
//	| HttpConnectionManager | append_x_forwarded_port                            | refused  | changes request headers |
//	| HttpConnectionManager | append_local_overload                              | refused  | changes request headers |
//	| HttpConnectionManager | forward_proto_config                               | refused  | changes request headers |
//
// Fields refused by the code that converts them rather than by this table: listener
// udp_listener_config, api_listener, internal_listener,
// listener filters other than the TLS inspector, the original destination filter, the PROXY
// protocol filter, the HTTP inspector and the original source filter (refused where the
// process may not set IP_TRANSPARENT, listener/originalsrc), config_discovery, filter_disabled
// (ListenerFromProto); the PROXY protocol filter's own fields (listener/proxyprotocol); the load_balancing_policy fields listed in
// lbpolicy_proto.go; the HTTP connection manager's and the TCP proxy's own lists.
//
// Concurrency: FromBootstrap is a pure function. The structs it returns are not modified
// afterwards and may be read from any goroutine.
package config
