package xds

import (
	adminv3 "github.com/envoyproxy/go-control-plane/envoy/admin/v3"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/legateproxy/legate/xds/resource"
)

// SecretsConfigDump returns the SDS part of the "secrets" config dump: dynamic_active_secrets
// for secrets that arrived and dynamic_warming_secrets for those still awaited, with
// version_info, last_updated and error_state. The caller adds static_secrets; /config_dump
// redacts private keys. match filters by secret name (nil for all). Safe for concurrent use.
func (c *Client) SecretsConfigDump(match func(string) bool) *adminv3.SecretsConfigDump {
	out := &adminv3.SecretsConfigDump{}
	for _, st := range c.States(resource.SecretType) {
		if match != nil && !match(st.Name) {
			continue
		}
		d := &adminv3.SecretsConfigDump_DynamicSecret{Name: st.Name, VersionInfo: st.Version, Secret: st.Resource, ErrorState: st.ErrorState}
		if st.Resource == nil {
			out.DynamicWarmingSecrets = append(out.DynamicWarmingSecrets, d)
			continue
		}
		d.LastUpdated = timestamppb.New(st.Updated)
		out.DynamicActiveSecrets = append(out.DynamicActiveSecrets, d)
	}
	return out
}
