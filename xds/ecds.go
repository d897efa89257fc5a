package xds

import (
	"errors"

	adminv3 "github.com/envoyproxy/go-control-plane/envoy/admin/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/legateproxy/legate/xds/resource"
	xdswatch "github.com/legateproxy/legate/xds/watch"
)

// ExtensionWatcher watches the ECDS configurations a warming LDS listener's HTTP filters
// discover (httpproxy.ECDS.WatchWarming): each new configuration must suit typeURLs and the
// filter factories, as the filters will check it once built; onChange runs after each change.
type ExtensionWatcher interface {
	WatchWarming(cs *corev3.ConfigSource, name string, typeURLs []string, onChange func()) (xdswatch.Subscription, error)
}

// watchExtension watches the ECDS configuration d of an LDS listener through
// Config.Extensions (the HTTP connection manager owns ECDS); onChange runs after each change.
func (c *Client) watchExtension(d resource.Dependency, onChange func()) (xdswatch.Subscription, error) {
	if c.cfg.Extensions == nil {
		return nil, errors.New("ECDS is not available (no extension config watcher)")
	}
	return c.cfg.Extensions.WatchWarming(d.Config, d.Name, d.TypeURLs, onChange)
}

// EcdsConfigDump returns the "ecds_filter_http" config dump: an ecds_filters entry per
// subscription that has a configuration or an error, with version_info, last_updated and
// error_state. match filters by configuration name (nil for all). Safe for concurrent use.
func (c *Client) EcdsConfigDump(match func(string) bool) *adminv3.EcdsConfigDump {
	out := &adminv3.EcdsConfigDump{}
	for _, st := range c.watchedStates(resource.ExtensionConfigType) {
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
