package config

import (
	"errors"
	"fmt"
	"net/netip"
	"time"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	filev3 "github.com/envoyproxy/go-control-plane/envoy/extensions/access_loggers/file/v3"

	"github.com/legateproxy/legate/internal/registry"
	"github.com/legateproxy/legate/internal/sockopt"
	"github.com/legateproxy/legate/overload"
)

const (
	// DefaultMaxObjNameLen is Envoy's default --max-obj-name-len.
	DefaultMaxObjNameLen = 60
	// DefaultProfilePath is Envoy's default admin.profile_path.
	DefaultProfilePath = "/var/log/envoy/envoy.prof"
	// DefaultStatsFlushInterval is Envoy's default stats_flush_interval.
	DefaultStatsFlushInterval = 5 * time.Second
)

// Limits are the command-line limits and the bootstrap-wide defaults that Legate's cluster
// and listener rules depend on, for static and discovered resources alike.
type Limits struct {
	// MaxObjNameLen is --max-obj-name-len, the longest cluster or listener name allowed.
	// Zero means DefaultMaxObjNameLen.
	MaxObjNameLen int
	// UpstreamBindAddress is the bootstrap's cluster_manager.upstream_bind_config
	// source_address: the source of upstream connections of every cluster without an
	// upstream_bind_config of its own. Nil binds nothing (Bootstrap.UpstreamBindAddress).
	UpstreamBindAddress *Address
	// UpstreamSocketOptions are that upstream_bind_config's socket_options, for the same
	// clusters (Bootstrap.UpstreamSocketOptions).
	UpstreamSocketOptions []sockopt.Option
	// Extensions are the extensions Legate is built with (extensions.New), which FromBootstrap
	// hands to the server in Bootstrap.Extensions. Nil there makes the server build them.
	Extensions *registry.Registry
}

func (l Limits) maxObjNameLen() int {
	if l.MaxObjNameLen <= 0 {
		return DefaultMaxObjNameLen
	}
	return l.MaxObjNameLen
}

// Bootstrap is what the server needs from the bootstrap to start. It is immutable once built.
type Bootstrap struct {
	// Admin is the admin interface; nil when the bootstrap has no admin.address, in which case
	// Envoy starts no admin server.
	Admin *Admin
	// Node is the bootstrap's node identity (Envoy's `node`).
	Node Node
	// StatsFlushInterval is stats_flush_interval, DefaultStatsFlushInterval when unset; it is
	// zero when StatsFlushOnAdmin is set, since then no timer flushes.
	StatsFlushInterval time.Duration
	// StatsFlushOnAdmin is stats_flush_on_admin: flush only when the admin reads stats.
	StatsFlushOnAdmin bool
	// StatsServerVersionOverride is stats_server_version_override, the value of the
	// server.version gauge, when HasStatsServerVersionOverride.
	StatsServerVersionOverride    uint64
	HasStatsServerVersionOverride bool
	// Clusters are the static_resources clusters, converted by ClusterFromProto, in file order.
	Clusters []*Cluster
	// ClusterNames and ListenerNames are the static_resources names, in file order.
	ClusterNames  []string
	ListenerNames []string
	// UpstreamBindAddress is cluster_manager.upstream_bind_config.source_address, nil when
	// unset: the Limits default for the clusters discovery brings later.
	UpstreamBindAddress *Address
	// UpstreamSocketOptions are cluster_manager.upstream_bind_config.socket_options: the Limits
	// default for the clusters discovery brings later.
	UpstreamSocketOptions []sockopt.Option
	// Overload is overload_manager, converted by package overload; nil when unset.
	Overload *overload.Config
	// InternalListener is the envoy.bootstrap.internal_listener bootstrap extension; nil
	// without it, and then listeners with internal_listener are refused, as in Envoy.
	InternalListener *InternalListener
	// Proto is the bootstrap as decoded, kept for /config_dump. Do not modify it.
	Proto *bootstrapv3.Bootstrap
	// Extensions is Limits.Extensions: the registry the configuration was read with.
	Extensions *registry.Registry
}

// Node is Envoy's bootstrap `node` (envoy.config.core.v3.Node), the fields Legate reports.
type Node struct {
	ID            string
	Cluster       string
	Locality      Locality
	UserAgentName string
}

// Locality is envoy.config.core.v3.Locality.
type Locality struct {
	Region, Zone, SubZone string
}

// Admin is Envoy's bootstrap `admin`.
type Admin struct {
	// Address is the host of admin.address.socket_address (an IP address or host name).
	Address string
	// Port is its port_value; 0 asks the kernel for a free port.
	Port uint32
	// AccessLogPath is admin.access_log_path, or the path of the first file access logger in
	// admin.access_log when that is unset; "" means no access log.
	AccessLogPath string
	// ProfilePath is admin.profile_path, DefaultProfilePath when unset.
	ProfilePath string
	// IgnoreGlobalConnLimit is admin.ignore_global_conn_limit.
	IgnoreGlobalConnLimit bool
}

// FromBootstrap builds the Bootstrap structs from a decoded bootstrap and checks Legate's rules
// on it: the bootstrap-level ones here, and each static cluster's through ClusterFromProto. b
// must already have passed package bootstrap's checks. All broken rules are reported, joined
// (for a cluster, the first of its own); each error names the resource, the field path, the
// value and the rule, but not the file, which the caller adds.
func FromBootstrap(b *bootstrapv3.Bootstrap, lim Limits) (*Bootstrap, error) {
	v := &validator{lim: lim}
	v.lim.UpstreamBindAddress = v.upstreamBind(b.GetClusterManager().GetUpstreamBindConfig())
	opts, err := socketOptions("cluster_manager.upstream_bind_config.socket_options", b.GetClusterManager().GetUpstreamBindConfig().GetSocketOptions())
	if err == nil {
		err = sockopt.Check(opts)
	}
	if err != nil {
		v.errs = append(v.errs, err)
	}
	v.lim.UpstreamSocketOptions = opts
	out := &Bootstrap{
		UpstreamBindAddress:   v.lim.UpstreamBindAddress,
		UpstreamSocketOptions: opts,
		Proto:                 b,
		Extensions:            lim.Extensions,
		Node: Node{
			ID:            b.GetNode().GetId(),
			Cluster:       b.GetNode().GetCluster(),
			UserAgentName: b.GetNode().GetUserAgentName(),
			Locality: Locality{
				Region:  b.GetNode().GetLocality().GetRegion(),
				Zone:    b.GetNode().GetLocality().GetZone(),
				SubZone: b.GetNode().GetLocality().GetSubZone(),
			},
		},
		StatsFlushOnAdmin: b.GetStatsFlushOnAdmin(),
	}
	if o := b.GetStatsServerVersionOverride(); o != nil {
		out.StatsServerVersionOverride, out.HasStatsServerVersionOverride = o.GetValue(), true
	}
	out.StatsFlushInterval = v.statsFlush(b)
	v.regexEngine(b.GetDefaultRegexEngine())
	out.InternalListener = v.bootstrapExtensions(b.GetBootstrapExtensions())
	out.Admin = v.admin(b.GetAdmin())
	ov, err := overload.FromProto(b.GetOverloadManager(), lim.Extensions)
	if err != nil {
		v.errs = append(v.errs, err)
	}
	out.Overload = ov
	out.Clusters, out.ClusterNames = v.clusters(b.GetStaticResources().GetClusters())
	out.ListenerNames = v.listeners(b.GetStaticResources().GetListeners())
	if err := errors.Join(v.errs...); err != nil {
		return nil, err
	}
	return out, nil
}

// upstreamBind converts cluster_manager.upstream_bind_config; nil when it has no source
// address (Envoy binds nothing then).
func (v *validator) upstreamBind(bc *corev3.BindConfig) *Address {
	sa := bc.GetSourceAddress()
	if sa == nil {
		return nil
	}
	const at = "cluster_manager.upstream_bind_config.source_address"
	a, err := AddressFromProto(&corev3.Address{Address: &corev3.Address_SocketAddress{SocketAddress: sa}})
	if err != nil {
		v.errs = append(v.errs, fmt.Errorf("%s: %w", at, err))
		return nil
	}
	if _, err := netip.ParseAddr(a.Host); err != nil {
		v.errs = append(v.errs, fmt.Errorf("%s.address = %q; must be an IP address", at, a.Host))
		return nil
	}
	return &a
}

// validator collects broken rules.
type validator struct {
	lim  Limits
	errs []error
}

// fail records a broken rule; format may wrap an error with %w.
func (v *validator) fail(format string, args ...any) {
	v.errs = append(v.errs, fmt.Errorf(format, args...))
}

// statsFlush applies Envoy's rule that stats_flush_interval and stats_flush_on_admin exclude
// each other, and the interval's default.
func (v *validator) statsFlush(b *bootstrapv3.Bootstrap) time.Duration {
	interval := b.GetStatsFlushInterval()
	switch {
	case interval != nil && b.GetStatsFlushOnAdmin():
		v.fail("stats_flush_interval = %s and stats_flush_on_admin = true: set only one", interval.AsDuration())
		return 0
	case b.GetStatsFlushOnAdmin():
		return 0
	case interval != nil:
		return interval.AsDuration()
	}
	return DefaultStatsFlushInterval
}

// googleRE2TypeURL is the typed_config type of envoy.regex_engines.google_re2.
const googleRE2TypeURL = "type.googleapis.com/envoy.extensions.regex_engines.v3.GoogleRE2"

// regexEngine accepts default_regex_engine when it is Google RE2, Envoy's default and the
// engine of Go's regexp, which every Legate regex uses. Its options (max_program_size and the
// like, deprecated in Envoy) are not implemented.
func (v *validator) regexEngine(e *corev3.TypedExtensionConfig) {
	switch {
	case e == nil:
	case e.GetTypedConfig().GetTypeUrl() != googleRE2TypeURL:
		v.fail("default_regex_engine.typed_config = %q: not implemented by Legate; only %s (envoy.regex_engines.google_re2) is", e.GetTypedConfig().GetTypeUrl(), googleRE2TypeURL)
	case len(e.GetTypedConfig().GetValue()) > 0:
		v.fail("default_regex_engine.typed_config: GoogleRE2 options set; not implemented by Legate")
	}
}

// admin builds Admin; nil when there is no admin address.
func (v *validator) admin(a *bootstrapv3.Admin) *Admin {
	if a.GetAddress() == nil {
		return nil
	}
	out := &Admin{
		AccessLogPath:         a.GetAccessLogPath(),
		ProfilePath:           a.GetProfilePath(),
		IgnoreGlobalConnLimit: a.GetIgnoreGlobalConnLimit(),
	}
	if out.ProfilePath == "" {
		out.ProfilePath = DefaultProfilePath
	}
	if out.AccessLogPath == "" {
		for _, l := range a.GetAccessLog() {
			var file filev3.FileAccessLog
			if tc := l.GetTypedConfig(); tc != nil && tc.UnmarshalTo(&file) == nil {
				out.AccessLogPath = file.GetPath()
				break
			}
		}
	}
	sa := a.GetAddress().GetSocketAddress()
	switch {
	case sa == nil:
		v.fail("admin.address.%s is set: the admin address must be a socket_address", addressKind(a.GetAddress()))
		return nil
	case sa.GetNamedPort() != "":
		v.fail("admin.address.socket_address.named_port = %q: must be a port_value", sa.GetNamedPort())
		return nil
	case sa.GetPortValue() > 65535:
		v.fail("admin.address.socket_address.port_value = %d: must be in 0..65535", sa.GetPortValue())
		return nil
	case sa.GetAddress() == "":
		v.fail("admin.address.socket_address.address = \"\": must name a host")
		return nil
	}
	out.Address, out.Port = sa.GetAddress(), sa.GetPortValue()
	return out
}

// addressKind names the member of an Address's oneof that is set.
func addressKind(a *corev3.Address) string {
	switch {
	case a.GetPipe() != nil:
		return "pipe"
	case a.GetEnvoyInternalAddress() != nil:
		return "envoy_internal_address"
	}
	return "address"
}

func lastSegment(path string) string {
	for i := len(path) - 1; i >= 0; i-- {
		if path[i] == '.' {
			return path[i+1:]
		}
	}
	return path
}
