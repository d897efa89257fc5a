// Package configdump builds the body of Envoy's GET /config_dump: the
// envoy.admin.v3.ConfigDump assembled from the dump messages that subsystems
// register as Trackers, filtered by name_regex, resource and mask, with
// sensitive fields redacted, printed as pretty proto JSON with defaults
// omitted.
//
// It knows nothing about clusters, listeners or secrets: each subsystem adds
// a Tracker that produces its own top-level dump message (BootstrapConfigDump,
// ClustersConfigDump, ...) and applies the name filter to its own resources.
//
// Concurrency: a Registry is safe for concurrent use. Render calls the
// trackers' Dump functions on the calling goroutine without holding the
// registry's lock, so a Dump may take its owner's locks freely. Redact and the
// other functions keep no state.
package configdump
