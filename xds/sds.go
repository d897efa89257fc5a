package xds

import (
	"fmt"

	adminv3 "github.com/envoyproxy/go-control-plane/envoy/admin/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/legateproxy/legate/tlsutil"
	"github.com/legateproxy/legate/xds/resource"
)

var sdsKind = &namedKind{
	typeURL: resource.SecretType,
	short:   "SDS",
	decode: func(_ *Client, a *anypb.Any) (string, any, error) {
		pb, s, err := resource.DecodeSecret(a)
		if err != nil {
			return resource.NamedResourceName(a), nil, err
		}
		return pb.GetName(), s, nil
	},
	statPrefix: func(name, _ string) string { return "sds." + name + "." },
	initTarget: func(name string) string { return "SdsApi " + name },
	changed: func(c *Client) {
		if f := c.cfg.SecretsChanged; f != nil {
			f()
		}
	},
}

// Secret implements tlsutil.SecretProvider: a static secret (Config.StaticSecrets) of that
// name, else the current SDS secret. SDS secrets are subscribed by the listeners and clusters
// that name them with an sds_config. Safe for concurrent use; never blocks on the network.
func (c *Client) Secret(name string) (tlsutil.Secret, bool) {
	if c.cfg.StaticSecrets != nil {
		if s, ok := c.cfg.StaticSecrets.Secret(name); ok {
			return s, true
		}
	}
	v, ok := c.sds.value(name)
	if !ok {
		return tlsutil.Secret{}, false
	}
	s, ok := v.(tlsutil.Secret)
	return s, ok
}

// WatchSecrets subscribes to the SDS secrets a TLS context names with an sds_config, for
// upstream contexts (clusters); path names the context in errors. The returned function ends
// the subscriptions. Safe for concurrent use.
func (c *Client) WatchSecrets(path string, common *tlsv3.CommonTlsContext) (func(), error) {
	deps, err := resource.SecretDependencies(path, common)
	if err != nil {
		return nil, err
	}
	return c.watchSecretDeps(deps)
}

// watchSecretDeps subscribes to deps and returns the function that ends the subscriptions.
func (c *Client) watchSecretDeps(deps []resource.Dependency) (func(), error) {
	var refs []watchRef
	release := func() {
		for _, r := range refs {
			r.release()
		}
	}
	for _, d := range deps {
		ref, _, _, _, err := c.sds.subscribe(d.Source, d.Name, "", func(uint64, any) {})
		if err != nil {
			release()
			return nil, err
		}
		refs = append(refs, ref)
	}
	return release, nil
}

// SecretsConfigDump returns the SDS part of the "secrets" config dump: dynamic_active_secrets
// for secrets that arrived and dynamic_warming_secrets for those still awaited, with
// version_info, last_updated and error_state. The caller adds static_secrets; /config_dump
// redacts private keys. match filters by secret name (nil for all). Safe for concurrent use.
func (c *Client) SecretsConfigDump(match func(string) bool) *adminv3.SecretsConfigDump {
	out := &adminv3.SecretsConfigDump{}
	for _, st := range c.sds.states() {
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

// WatchClusterSecrets subscribes to the SDS secrets of a bootstrap cluster's transport socket
// (an UpstreamTlsContext naming secrets with an sds_config); CDS clusters are subscribed by
// the client itself. Made before Run, each subscription registers an init target ("SdsApi
// <name>"), so initialization waits for the secrets or their initial_fetch_timeout, as
// Envoy's static clusters warm on SDS. The returned function ends the subscriptions. Safe for
// concurrent use.
func (c *Client) WatchClusterSecrets(name string, ts *corev3.TransportSocket) (func(), error) {
	deps, err := resource.UpstreamSecretDependencies(fmt.Sprintf("cluster %q: transport_socket", name), ts)
	if err != nil {
		return nil, err
	}
	return c.watchSecretDeps(deps)
}

// HasClusterSecrets reports whether a cluster's transport socket loads secrets over SDS.
func HasClusterSecrets(ts *corev3.TransportSocket) bool {
	deps, err := resource.UpstreamSecretDependencies("transport_socket", ts)
	return err == nil && len(deps) > 0
}
