// Package dynamicforwardproxy is the envoy.filters.http.dynamic_forward_proxy HTTP filter
// (extensions.filters.http.dynamic_forward_proxy.v3.FilterConfig), the request side of
// Legate's dynamic forward proxy; the cluster side, envoy.clusters.dynamic_forward_proxy, and
// the DNS caches both share by name are the cluster manager's (cluster.DNSCache).
//
// For a request routed to a dynamic forward proxy cluster, the filter applies the route's
// host rewrite (typed_per_filter_config PerRouteConfig: host_rewrite_literal, or
// host_rewrite_header when the request carries that header), takes the request's
// "name:port" (the authority's port, else 443 for a cluster with a TLS transport socket, else
// 80) and looks it up in the cache. A name not resolved yet is resolved while the request
// waits (its body buffered as for any paused request); a failed resolution is answered 503
// "DNS resolution failure" with response flag DF and details dns_resolution_failure. A
// cache that is full (max_hosts) or has max_pending_requests requests waiting answers 503
// (details dns_cache_overflow and dynamic_forward_proxy_pending_request_overflow). The router
// then sends the request to the cluster's host of that name:port. Requests to other clusters
// pass untouched.
//
// A request to a cluster with sub_clusters_config instead waits (sub_cluster_config's
// cluster_init_timeout, 5 s by default) for the STRICT_DNS sub-cluster of its name:port to
// become active, made first when needed (cluster.Cluster.LoadSubCluster); past
// max_sub_clusters it is answered 503 "Sub cluster overflow" (details sub_cluster_overflow),
// and after the timeout 503 "Sub cluster warming timeout" (sub_cluster_warming_timeout).
//
// Implemented: dns_cache_config (every field Legate's DNS cache implements, see
// config.DNSCacheFromProto, including the resolver fields), sub_cluster_config, per-route
// host_rewrite_literal and host_rewrite_header.
// Refused with "not implemented by Legate": save_upstream_address (Legate keeps no filter
// state), allow_dynamic_host_from_filter_state.
//
// Concurrency: a Filter is immutable and shared by every stream; the DNS cache is safe for
// concurrent use.
package dynamicforwardproxy
