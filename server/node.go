package server

import (
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/legateproxy/legate/internal/registry"
)

// BuildVersion is node.user_agent_build_version: the Envoy API release Legate
// implements, with Envoy's metadata keys describing this build.
func BuildVersion() *corev3.BuildVersion {
	md, _ := structpb.NewStruct(map[string]any{
		"build.label":     versionLabel,
		"build.type":      "RELEASE",
		"revision.sha":    revision,
		"revision.status": status,
		"ssl.version":     sslLibrary,
	})
	return &corev3.BuildVersion{
		Version:  &typev3.SemanticVersion{MajorNumber: APIMajor, MinorNumber: APIMinor, Patch: APIPatch},
		Metadata: md,
	}
}

// nodeExtensions is node.extensions: every extension of r.
func nodeExtensions(r *registry.Registry) []*corev3.Extension {
	var out []*corev3.Extension
	for _, e := range r.Entries() {
		out = append(out, &corev3.Extension{
			Name:     e.Name,
			Category: string(e.Category),
			TypeUrls: []string{e.TypeName()},
		})
	}
	return out
}
