// Package filterstate is Envoy's filter state (StreamInfo::FilterState): named objects that
// what handles a downstream connection attaches to it for others to read. The listener
// filters, network filters and the TCP proxy write a connection's; access logs read it
// (%FILTER_STATE(KEY)%, accesslog), and so do the transport socket matcher's filter_state
// input and an internal listener's connection, which inherits the objects shared with the
// upstream connection.
//
// One package owns the type, below everything that uses it (layer 1), so that accesslog,
// listener, pool and the proxies share it without importing each other.
//
// An Object has a name (its key), a plain serialization (Envoy's serializeAsString), a typed
// one (serializeAsProto, rendered as JSON) and optionally fields (getField). Each entry has a
// sharing mode: not shared, shared with every upstream connection made for the connection
// (and on from there: SharedWithUpstream), or with the next one only (SharedWithUpstreamOnce),
// as Envoy's StreamSharingMayImpactPooling. A read-only entry cannot be replaced.
//
// Concurrency: a State is safe for concurrent use; its entries are guarded by its mutex. A
// nil *State is an empty one that can be read. The zero State is empty and ready; it costs
// nothing until an object is set, so a connection without filter state allocates nothing.
package filterstate
