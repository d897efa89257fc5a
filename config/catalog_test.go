package config

import (
	"slices"
	"testing"

	"github.com/legateproxy/legate/bootstrap"
)

// TestImplementedTypesInCatalog holds package config's decoders to the loader's extension
// catalog (bootstrap.Extensions): every typed_config type config builds is one the loader
// resolves, so that no implemented extension is refused at load as "does not implement this
// extension" (the TLS inspector once was).
func TestImplementedTypesInCatalog(t *testing.T) {
	catalog := bootstrap.SupportedTypeURLs()
	implemented := []string{tlsInspectorTypeURL, TCPProxyTypeURL, routerFilterTypeURL, googleRE2TypeURL,
		"type.googleapis.com/" + upstreamHTTPOptionsKey}
	for u := range lbPolicyDecoders {
		implemented = append(implemented, u)
	}
	for _, u := range implemented {
		if !slices.Contains(catalog, u) {
			t.Errorf("config implements %s, which bootstrap.Extensions does not list", u)
		}
	}
}
