package extensions

import (
	"github.com/legateproxy/legate/accesslog"
	"github.com/legateproxy/legate/accesslog/als"
	"github.com/legateproxy/legate/cluster"
	"github.com/legateproxy/legate/config"
	"github.com/legateproxy/legate/httpproxy"
	"github.com/legateproxy/legate/httpproxy/filters/buffer"
	"github.com/legateproxy/legate/httpproxy/filters/compressor"
	"github.com/legateproxy/legate/httpproxy/filters/cors"
	"github.com/legateproxy/legate/httpproxy/filters/csrf"
	"github.com/legateproxy/legate/httpproxy/filters/decompressor"
	"github.com/legateproxy/legate/httpproxy/filters/dynamicforwardproxy"
	"github.com/legateproxy/legate/httpproxy/filters/extauthz"
	"github.com/legateproxy/legate/httpproxy/filters/fault"
	"github.com/legateproxy/legate/httpproxy/filters/grpcweb"
	"github.com/legateproxy/legate/httpproxy/filters/headermutation"
	"github.com/legateproxy/legate/httpproxy/filters/headertometadata"
	"github.com/legateproxy/legate/httpproxy/filters/healthcheck"
	"github.com/legateproxy/legate/httpproxy/filters/jwtauthn"
	"github.com/legateproxy/legate/httpproxy/filters/localratelimit"
	"github.com/legateproxy/legate/httpproxy/filters/lua"
	"github.com/legateproxy/legate/httpproxy/filters/ondemand"
	"github.com/legateproxy/legate/httpproxy/filters/ratelimit"
	"github.com/legateproxy/legate/httpproxy/filters/rbac"
	httpsetfilterstate "github.com/legateproxy/legate/httpproxy/filters/setfilterstate"
	"github.com/legateproxy/legate/httpproxy/filters/setmetadata"
	"github.com/legateproxy/legate/httpproxy/filters/tap"
	"github.com/legateproxy/legate/httpproxy/route"
	"github.com/legateproxy/legate/internal/matcher/network"
	"github.com/legateproxy/legate/internal/matcher/transportsocket"
	"github.com/legateproxy/legate/internal/registry"
	"github.com/legateproxy/legate/lb/leastrequest"
	"github.com/legateproxy/legate/lb/maglev"
	lboriginaldst "github.com/legateproxy/legate/lb/originaldst"
	"github.com/legateproxy/legate/lb/random"
	"github.com/legateproxy/legate/lb/ringhash"
	"github.com/legateproxy/legate/lb/roundrobin"
	"github.com/legateproxy/legate/listener/filters/connlimit"
	"github.com/legateproxy/legate/listener/filters/directresponse"
	"github.com/legateproxy/legate/listener/filters/echo"
	netextauthz "github.com/legateproxy/legate/listener/filters/extauthz"
	netlocalratelimit "github.com/legateproxy/legate/listener/filters/localratelimit"
	netratelimit "github.com/legateproxy/legate/listener/filters/ratelimit"
	netrbac "github.com/legateproxy/legate/listener/filters/rbac"
	"github.com/legateproxy/legate/listener/filters/setfilterstate"
	"github.com/legateproxy/legate/listener/filters/snicluster"
	"github.com/legateproxy/legate/listener/httpinspector"
	"github.com/legateproxy/legate/listener/originaldst"
	"github.com/legateproxy/legate/listener/originalsrc"
	"github.com/legateproxy/legate/listener/proxyprotocol"
	"github.com/legateproxy/legate/listener/tlsinspector"
	"github.com/legateproxy/legate/overload"
	"github.com/legateproxy/legate/stats/sinks/hystrix"
	"github.com/legateproxy/legate/stats/sinks/metricsservice"
	"github.com/legateproxy/legate/stats/sinks/opentelemetry"
	"github.com/legateproxy/legate/stats/sinks/statsd"
	"github.com/legateproxy/legate/tcpproxy"
	"github.com/legateproxy/legate/tlsutil"
	"github.com/legateproxy/legate/tracing"
	"github.com/legateproxy/legate/udpproxy"
)

// registrations are the Register functions of every package that implements extensions.
// Adding an extension adds its package's Register here, and nothing else.
func registrations() []func(*registry.Builder) {
	return []func(*registry.Builder){
		// the connection manager's and TCP proxy's configs, router, RE2,
		// upstream HTTP options, load balancing policies and the aggregate cluster's config
		config.Register,
		cluster.Register,    // the aggregate cluster's hosts
		roundrobin.Register, // balancers (config converts their policies)
		leastrequest.Register,
		ringhash.Register,
		random.Register,
		maglev.Register,
		lboriginaldst.Register,
		accesslog.Register,
		als.Register,
		buffer.Register,
		compressor.Register,
		cors.Register,
		csrf.Register,
		decompressor.Register,
		extauthz.Register,
		fault.Register,
		grpcweb.Register,
		headermutation.Register,
		headertometadata.Register,
		healthcheck.Register,
		jwtauthn.Register,
		localratelimit.Register,
		lua.Register,
		dynamicforwardproxy.Register,
		ondemand.Register,
		ratelimit.Register,
		rbac.Register,
		setmetadata.Register,
		httpsetfilterstate.Register,
		tap.Register,
		route.Register,     // retry host predicates
		connlimit.Register, // network filters
		directresponse.Register,
		echo.Register,
		netextauthz.Register,
		netlocalratelimit.Register,
		netratelimit.Register,
		netrbac.Register,
		setfilterstate.Register,
		snicluster.Register,
		httpproxy.Register,       // the connection manager (config converts its typed_config)
		tcpproxy.Register,        // the TCP proxy (likewise)
		udpproxy.Register,        // UDP listener filters
		network.Register,         // matching inputs (filter_chain_matcher)
		transportsocket.Register, // matching inputs (transport_socket_matcher)
		httpinspector.Register,   // listener filters
		originaldst.Register,
		originalsrc.Register,
		proxyprotocol.Register,
		tlsinspector.Register,
		overload.Register, // resource monitors
		hystrix.Register,
		metricsservice.Register,
		opentelemetry.Register,
		statsd.Register,
		tracing.Register,
		tlsutil.Register,
	}
}

// New registers every extension Legate implements and returns the registry. It fails only when
// two registrations conflict, a programming error the tests catch.
func New() (*registry.Registry, error) {
	return registry.Of(registrations()...)
}
