package xds

import (
	"fmt"
	"time"

	adminv3 "github.com/envoyproxy/go-control-plane/envoy/admin/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/legateproxy/legate/stats"
	"github.com/legateproxy/legate/xds/resource"
)

// ecdsStats are the ECDS-only stats of an HTTP filter configuration subscription, next to its
// subscription stats under extension_config_discovery.http_filter.<name>.
type ecdsStats struct {
	ConfigReload stats.Counter `stat:"config_reload"`
}

var ecdsKind = &namedKind{
	typeURL: resource.ExtensionConfigType,
	short:   "ECDS",
	decode: func(a *anypb.Any) (string, any, error) {
		tc, err := resource.DecodeExtensionConfig(a)
		if err != nil {
			return resource.ExtensionConfigName(a), nil, err
		}
		return tc.GetName(), tc, nil
	},
	statPrefix: func(name, _ string) string { return "extension_config_discovery.http_filter." + name + "." },
	initTarget: func(name string) string { return "ExtensionConfigSubscription " + name },
	extra: func(st *stats.Store, prefix string) (func(time.Time, time.Duration), *stats.Registration) {
		s := &ecdsStats{}
		reg := st.Register(prefix, s)
		return func(time.Time, time.Duration) { s.ConfigReload.Inc() }, reg
	},
}

// WatchExtensionConfig implements httpproxy.ExtensionConfigProvider: it subscribes to the ECDS
// resource (TypedExtensionConfig) called name from source — one subscription per name and
// transport, shared by every HTTP filter that discovers it, with its stats under
// extension_config_discovery.http_filter.<name>. — and calls update with every accepted new
// version (gen grows), and with nil when the first fetch times out or the resource is removed.
// It returns the current configuration (nil until one arrives), its generation and cancel.
// update runs on an xDS goroutine without locks and must not block. Safe for concurrent use;
// a subscription made before Run registers an init target.
func (c *Client) WatchExtensionConfig(name string, source *corev3.ConfigSource,
	update func(gen uint64, tc *corev3.TypedExtensionConfig)) (*corev3.TypedExtensionConfig, uint64, func(), error) {
	src, err := resource.SourceFromProto(source)
	if err != nil {
		return nil, 0, nil, fmt.Errorf("config_discovery.config_source.%w", err)
	}
	if src.Self {
		return nil, 0, nil, fmt.Errorf("config_discovery.config_source.self is not supported")
	}
	ref, val, gen, _, err := c.ecds.subscribe(src, name, "", func(gen uint64, v any) {
		tc, _ := v.(*corev3.TypedExtensionConfig)
		update(gen, tc)
	})
	if err != nil {
		return nil, 0, nil, fmt.Errorf("extension config %q: %w", name, err)
	}
	tc, _ := val.(*corev3.TypedExtensionConfig)
	return tc, gen, ref.release, nil
}

// EcdsConfigDump returns the "ecds_filter_http" config dump: an ecds_filters entry per
// subscription that has a configuration or an error, with version_info, last_updated and
// error_state. match filters by configuration name (nil for all). Safe for concurrent use.
func (c *Client) EcdsConfigDump(match func(string) bool) *adminv3.EcdsConfigDump {
	out := &adminv3.EcdsConfigDump{}
	for _, st := range c.ecds.states() {
		if (match != nil && !match(st.name)) || (st.raw == nil && st.failure == nil) {
			continue
		}
		d := &adminv3.EcdsConfigDump_EcdsFilterConfig{VersionInfo: st.version, EcdsFilter: st.raw, ErrorState: st.failure.state()}
		if st.raw != nil {
			d.LastUpdated = timestamppb.New(st.updated)
		}
		out.EcdsFilters = append(out.EcdsFilters, d)
	}
	return out
}
