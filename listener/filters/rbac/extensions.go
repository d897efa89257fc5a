package rbac

import (
	netrbacv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/rbac/v3"

	"github.com/legateproxy/legate/internal/registry"
)

// Declare declares the filter in the extension registry; the server builds it from the
// listener registry (Register) until network filters have a registry.Kind.
func Declare(b *registry.Builder) {
	b.Declare(registry.NetworkFilter, Name, &netrbacv3.RBAC{})
}
