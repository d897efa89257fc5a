package route

import (
	"fmt"
	"strings"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
)

// Upgrade is one entry of RouteAction.upgrade_configs.
type Upgrade struct {
	// Type is upgrade_type as given; requests match it without regard to case.
	Type string
	// Enabled is enabled (default true). It overrides the connection manager's decision for
	// this type on this route, both ways.
	Enabled bool
}

// ConnectConfig is the connect_config of a route's CONNECT upgrade: the route terminates
// CONNECT requests, opening a TCP connection to its cluster's host instead of forwarding
// the CONNECT upstream.
type ConnectConfig struct {
	// AllowPost is allow_post: a POST on the route is tunnelled as a CONNECT would be, its
	// body sent to the upstream as raw bytes.
	AllowPost bool
}

// connectType is the upgrade type of a CONNECT request; Envoy compares it case-sensitively
// when it decides where connect_config may appear.
const connectType = "CONNECT"

// UpgradeEnabled reports the route's decision for upgrade type t: whether it lists t
// (found) and, if so, whether it enables it.
func (r *Route) UpgradeEnabled(t string) (enabled, found bool) {
	for i := range r.Upgrades {
		if strings.EqualFold(r.Upgrades[i].Type, t) {
			return r.Upgrades[i].Enabled, true
		}
	}
	return false, false
}

// compileUpgrades converts upgrade_configs into r, with Envoy's rules: a type appears once,
// and only the CONNECT type may carry connect_config. proxy_protocol_config (a PROXY
// protocol header on the terminated tunnel) is refused.
func compileUpgrades(r *Route, ucs []*routev3.RouteAction_UpgradeConfig, path string) error {
	for i, uc := range ucs {
		upath := fmt.Sprintf("%s.upgrade_configs[%d]", path, i)
		t := uc.GetUpgradeType()
		if t == "" {
			return fmt.Errorf("%s.upgrade_type = \"\": must not be empty", upath)
		}
		if _, dup := r.UpgradeEnabled(t); dup {
			return fmt.Errorf("%s.upgrade_type = %q: duplicate upgrade", upath, t)
		}
		r.Upgrades = append(r.Upgrades, Upgrade{Type: t, Enabled: uc.GetEnabled() == nil || uc.GetEnabled().GetValue()})
		cc := uc.GetConnectConfig()
		if cc == nil {
			continue
		}
		if t != connectType {
			return fmt.Errorf("%s.connect_config: set on upgrade type %q; only the CONNECT upgrade may have one", upath, t)
		}
		if cc.GetProxyProtocolConfig() != nil {
			return fmt.Errorf("%s.connect_config.proxy_protocol_config: not implemented by Legate", upath)
		}
		r.Connect = &ConnectConfig{AllowPost: cc.GetAllowPost()}
	}
	return nil
}
