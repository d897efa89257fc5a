// Package resource holds what the xDS client and the owners of resource types share about
// resources: a core.ConfigSource as a Source, the DiscoveryResponse files of path-based
// config sources, the dynamic resources an LDS listener depends on (ListenerDependencies:
// rds, scoped_rds, config_discovery and sds_config sources, each a Dependency) and the
// decoders of the types still handled by the client (RDS route configurations, SRDS scopes,
// VHDS virtual hosts, ECDS extension configurations). The decoders of the types that moved
// to their owners live with them (cluster/cds: clusters and assignments; listener/lds:
// listeners).
//
// Errors name the resource, the field path, the value and the rule, for example
// `route_config "r": virtual_hosts[0].domains: ...`; the xDS client sends them back to the
// management server as a NACK's error_detail.
//
// Concurrency: the package has no state; every function may be called from any goroutine.
package resource
