// Package resource decodes and validates the xDS resources Legate subscribes to: a
// google.protobuf.Any from a DiscoveryResponse becomes a validated proto (protoc-gen-validate
// rules) and then the plain config struct the rest of Legate reads (config.Cluster,
// config.LoadAssignment). It also turns a core.ConfigSource into a Source, and parses the
// DiscoveryResponse files of path-based config sources.
//
// Errors name the resource, the field path, the value and the rule, for example
// `cluster "web": connect_timeout = -1s; must be > 0`; the xDS client sends them back to the
// management server as a NACK's error_detail.
//
// Concurrency: the package has no state; every function may be called from any goroutine.
package resource
