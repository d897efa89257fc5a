// Package headertometadata is the envoy.filters.http.header_to_metadata HTTP filter
// (typed_config envoy.extensions.filters.http.header_to_metadata.v3.Config): it turns request
// and response header (or request cookie) values into the stream's dynamic metadata
// (filter.Exchange.Metadata), which later filters (RBAC's metadata matchers, Lua's
// streamInfo():dynamicMetadata()) and access logs (%DYNAMIC_METADATA(NS:KEY)%) read.
//
// Implemented: request_rules (on the request headers) and response_rules (on the response
// headers, before the access log is written); per rule header or cookie (one of them),
// on_header_present (its value when set, else the header's value, all its values joined with
// ",", rewritten by regex_value_rewrite), on_header_missing (its value, required), remove
// (headers only); per key-value pair metadata_namespace (default
// envoy.filters.http.header_to_metadata), key, type STRING, NUMBER (a float, after trimming
// spaces) or PROTOBUF_VALUE (a serialized google.protobuf.Value) and encode NONE or BASE64
// (padding optional). As Envoy, a value that is empty, 8 KiB or longer, or does not decode
// or convert adds nothing. typed_per_filter_config takes the same Config, which must have
// rules; the most specific level replaces the filter's rules. The header host (or
// :authority) reads the request's authority.
//
// Refused with "not implemented by Legate": stat_prefix (the filter's optional stats), and
// pseudo-headers other than :authority in a rule's header.
//
// Concurrency: a Filter and its rules are immutable and safe for concurrent use.
package headertometadata
