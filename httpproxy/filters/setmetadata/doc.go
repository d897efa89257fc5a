// Package setmetadata is the envoy.filters.http.set_metadata HTTP filter (typed_config
// envoy.extensions.filters.http.set_metadata.v3.Config): it writes static values into the
// request's dynamic metadata (filter.Exchange.Metadata), which later filters read (RBAC's
// metadata matchers, ext_authz's metadata context).
//
// Implemented: metadata (each entry's metadata_namespace, value and allow_overwrite: a
// namespace that already has metadata is merged into only with allow_overwrite, otherwise the
// entry is skipped and counted) and the deprecated metadata_namespace and value (always
// merged). A merge replaces the top-level keys the value sets, as protobuf's merge of a Struct.
//
// Refused with "not implemented by Legate": typed_value (typed metadata).
//
// Stats, under the connection manager's prefix: http.<stat_prefix>.set_metadata.overwrite_denied.
//
// Concurrency: a Filter is immutable and safe for concurrent use.
package setmetadata
