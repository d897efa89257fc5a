package xds

import (
	adminv3 "github.com/envoyproxy/go-control-plane/envoy/admin/v3"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/legateproxy/legate/xds/resource"
)

// EcdsConfigDump returns the "ecds_filter_http" config dump: an ecds_filters entry per
// subscription that has a configuration or an error, with version_info, last_updated and
// error_state. match filters by configuration name (nil for all). Safe for concurrent use.
func (c *Client) EcdsConfigDump(match func(string) bool) *adminv3.EcdsConfigDump {
	out := &adminv3.EcdsConfigDump{}
	for _, st := range c.States(resource.ExtensionConfigType) {
		if (match != nil && !match(st.Name)) || (st.Resource == nil && st.ErrorState == nil) {
			continue
		}
		d := &adminv3.EcdsConfigDump_EcdsFilterConfig{VersionInfo: st.Version, EcdsFilter: st.Resource, ErrorState: st.ErrorState}
		if st.Resource != nil {
			d.LastUpdated = timestamppb.New(st.Updated)
		}
		out.EcdsFilters = append(out.EcdsFilters, d)
	}
	return out
}
