package xds

import (
	"errors"

	adminv3 "github.com/envoyproxy/go-control-plane/envoy/admin/v3"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/legateproxy/legate/xds/resource"
	xdswatch "github.com/legateproxy/legate/xds/watch"
)

// watchSecret watches the SDS secret d of a CDS cluster or an LDS listener through
// Config.Secrets (TLS owns SDS); onChange runs after each change.
func (c *Client) watchSecret(d resource.Dependency, onChange func()) (xdswatch.Subscription, error) {
	if c.cfg.Secrets == nil {
		return nil, errors.New("SDS is not available (no secret watcher)")
	}
	return c.cfg.Secrets.Watch(d.Config, d.Name, onChange)
}

// SecretsConfigDump returns the SDS part of the "secrets" config dump: dynamic_active_secrets
// for secrets that arrived and dynamic_warming_secrets for those still awaited, with
// version_info, last_updated and error_state. The caller adds static_secrets; /config_dump
// redacts private keys. match filters by secret name (nil for all). Safe for concurrent use.
func (c *Client) SecretsConfigDump(match func(string) bool) *adminv3.SecretsConfigDump {
	out := &adminv3.SecretsConfigDump{}
	for _, st := range c.watchedStates(resource.SecretType) {
		if match != nil && !match(st.name) {
			continue
		}
		d := &adminv3.SecretsConfigDump_DynamicSecret{Name: st.name, VersionInfo: st.version, Secret: st.raw, ErrorState: st.failure.state()}
		if st.raw == nil {
			out.DynamicWarmingSecrets = append(out.DynamicWarmingSecrets, d)
			continue
		}
		d.LastUpdated = timestamppb.New(st.updated)
		out.DynamicActiveSecrets = append(out.DynamicActiveSecrets, d)
	}
	return out
}
