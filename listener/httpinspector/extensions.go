package httpinspector

import (
	httpinspectorv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/listener/http_inspector/v3"

	"github.com/legateproxy/legate/internal/registry"
)

// Register declares the filter; package config reads its typed_config and the listener
// manager runs it.
func Register(b *registry.Builder) {
	b.Declare(registry.ListenerFilter, Name, &httpinspectorv3.HttpInspector{})
}
