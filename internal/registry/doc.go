// Package registry is Legate's one table of extensions: every HTTP filter, network filter,
// listener filter, access logger, stats sink, tracer, resource monitor, cluster type, load
// balancing policy, transport socket, retry plugin and bootstrap extension Legate implements,
// keyed by its Envoy name and by the type URL of its typed_config message.
//
// Each extension package registers itself once, into a Builder, with the Kind of factory its
// consumer looks up (registry.Add); the extensions package calls every Register and Builds the
// Registry once at start. The loader (bootstrap) resolves typed_config types and lists
// node.extensions from it, package config decodes cluster types and load balancing policies
// through it, and the server finds every factory in it.
//
// A Builder is used by one goroutine. A Registry is frozen: it is never modified after Build,
// so any number of goroutines may read it without a lock. There is no package-level registry;
// the value is passed down from where it is built.
package registry
