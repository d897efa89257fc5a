package extensions

import (
	"github.com/legateproxy/legate/bootstrap"
	"github.com/legateproxy/legate/cluster"
	"github.com/legateproxy/legate/config"
	"github.com/legateproxy/legate/httpproxy/filters/buffer"
	"github.com/legateproxy/legate/httpproxy/filters/cors"
	"github.com/legateproxy/legate/httpproxy/filters/csrf"
	"github.com/legateproxy/legate/httpproxy/filters/extauthz"
	"github.com/legateproxy/legate/httpproxy/filters/fault"
	"github.com/legateproxy/legate/httpproxy/filters/headermutation"
	"github.com/legateproxy/legate/httpproxy/filters/healthcheck"
	"github.com/legateproxy/legate/httpproxy/filters/jwtauthn"
	"github.com/legateproxy/legate/httpproxy/filters/localratelimit"
	"github.com/legateproxy/legate/httpproxy/filters/ondemand"
	"github.com/legateproxy/legate/httpproxy/filters/rbac"
	"github.com/legateproxy/legate/httpproxy/filters/tap"
	"github.com/legateproxy/legate/internal/registry"
)

// New registers every extension Legate implements and returns the registry. It fails only when
// two registrations conflict, a programming error the tests catch.
func New() (*registry.Registry, error) {
	b := registry.NewBuilder()
	for _, register := range []func(*registry.Builder){
		config.Register,  // load balancing policies, the aggregate cluster's typed_config
		cluster.Register, // the aggregate cluster's hosts
		buffer.Register,
		cors.Register,
		csrf.Register,
		fault.Register,
		headermutation.Register,
		healthcheck.Register,
		localratelimit.Register,
		ondemand.Register,
		tap.Register,
		rbac.Register,
		extauthz.Register,
		jwtauthn.Register,
	} {
		register(b)
	}
	// The loader's older catalog, until each of its extensions registers itself.
	for _, e := range bootstrap.Extensions() {
		b.Declare(registry.Category(e.Category), e.Name, e.Config)
	}
	return b.Build()
}
