// Package udpproxy is Legate's envoy.filters.udp_listener.udp_proxy
// (envoy.extensions.filters.udp.udp_proxy.v3.UdpProxyConfig), the listener filter of a UDP
// listener (socket_address.protocol: UDP). The listener manager reads the listener's socket
// (package listener's packetLoop) and hands every datagram to the Proxy. Register adds the
// parser that converts the typed_config into a Config on the configuration path
// (config.UDPListenerFilterConfigs) and the factory that builds the Proxy from it
// (listener.UDPFilters) with the Service the server gives the listener manager.
//
// Implemented: stat_prefix; cluster, or a matcher whose only rule is on_no_match with a
// Route action; idle_timeout (default 60s; 0 disables it); hash_policies (one entry,
// source_ip or key, the hash the cluster's ring hash or Maglev balancer uses);
// upstream_socket_config.max_rx_datagram_size (default 1500; longer upstream datagrams are
// dropped and counted in sess_rx_datagrams_dropped); use_per_packet_load_balancing (each
// datagram picks its host; the session keeps one socket per host); access_log with
// envoy.access_loggers.file, stdout and stderr and the access log filters, one UdpSessionEnd
// entry per session with the downstream addresses, %UPSTREAM_CLUSTER%, %UPSTREAM_HOST% (the
// last host used), %BYTES_RECEIVED%, %BYTES_SENT%, %START_TIME% and %DURATION%.
//
// Each downstream address has a session with a connected upstream socket of its own; the
// cluster's max_connections circuit breaker counts sessions (upstream_cx_overflow drops the
// datagram), upstream_cx_none_healthy counts datagrams without a host. Stats are
// udp.<stat_prefix>.downstream_sess_* and idle_timeout, cluster.<name>.udp.sess_*, and the
// cluster's upstream_cx_rx_bytes_total / upstream_cx_tx_bytes_total.
//
// Refused ("not implemented by Legate"): use_original_src_ip, session_filters,
// tunneling_config, access_log_options, proxy_access_log, upstream_socket_config.prefer_gro,
// matcher_list and matcher_tree, gRPC access loggers. A listener's
// udp_listener_config.quic_options (HTTP/3) is refused by package config.
//
// Concurrency: Packet runs on the listener's read loop; each upstream socket has one reader
// goroutine (the Proxy's wg) sending its datagrams back through the listener's socket, which
// ends when its session closes: after idle_timeout on the Proxy's clock, or at Close. mu
// guards the sessions; a session's mu its sockets.
package udpproxy
