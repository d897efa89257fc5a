package server

import (
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/legateproxy/legate/bootstrap"
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

// Extensions is node.extensions: every extension Legate registers.
func Extensions() []*corev3.Extension {
	var out []*corev3.Extension
	for _, e := range bootstrap.Extensions() {
		out = append(out, &corev3.Extension{
			Name:     e.Name,
			Category: e.Category,
			TypeUrls: []string{e.TypeName},
		})
	}
	return out
}
