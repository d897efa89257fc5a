package route

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestCompileUpgrades(t *testing.T) {
	tests := []struct {
		name        string
		action      string
		wantUpgrade []Upgrade
		wantConnect *ConnectConfig
	}{
		{name: "none", action: `route: {cluster: c}`},
		{
			name:        "websocket and disabled CONNECT",
			action:      `route: {cluster: c, upgrade_configs: [{upgrade_type: websocket}, {upgrade_type: CONNECT, enabled: false}]}`,
			wantUpgrade: []Upgrade{{Type: "websocket", Enabled: true}, {Type: "CONNECT", Enabled: false}},
		},
		{
			name:        "connect config",
			action:      `route: {cluster: c, upgrade_configs: [{upgrade_type: CONNECT, connect_config: {allow_post: true}}]}`,
			wantUpgrade: []Upgrade{{Type: "CONNECT", Enabled: true}},
			wantConnect: &ConnectConfig{AllowPost: true},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := mustCompile(t, oneRoute(tt.action), Options{}).VirtualHosts()[0].Routes[0]
			if diff := cmp.Diff(tt.wantUpgrade, r.Upgrades); diff != "" {
				t.Errorf("Upgrades (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantConnect, r.Connect); diff != "" {
				t.Errorf("Connect (-want +got):\n%s", diff)
			}
		})
	}
}

func TestCompileUpgradesErrors(t *testing.T) {
	tests := []struct{ name, action, want string }{
		{"duplicate", `route: {cluster: c, upgrade_configs: [{upgrade_type: websocket}, {upgrade_type: WEBSOCKET}]}`,
			`virtual_hosts[0].routes[0].route.upgrade_configs[1].upgrade_type = "WEBSOCKET": duplicate upgrade`},
		{"empty type", `route: {cluster: c, upgrade_configs: [{enabled: true}]}`,
			`virtual_hosts[0].routes[0].route.upgrade_configs[0].upgrade_type = "": must not be empty`},
		{"connect config on websocket", `route: {cluster: c, upgrade_configs: [{upgrade_type: websocket, connect_config: {}}]}`,
			`virtual_hosts[0].routes[0].route.upgrade_configs[0].connect_config: set on upgrade type "websocket"`},
		{"proxy protocol", `route: {cluster: c, upgrade_configs: [{upgrade_type: CONNECT, connect_config: {proxy_protocol_config: {}}}]}`,
			`virtual_hosts[0].routes[0].route.upgrade_configs[0].connect_config.proxy_protocol_config: not implemented by Legate`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Compile(parseConfig(t, oneRoute(tt.action)), Options{})
			if err == nil || !strings.HasPrefix(err.Error(), tt.want) {
				t.Errorf("Compile() error = %v; want prefix %q", err, tt.want)
			}
		})
	}
}

func TestUpgradeEnabledIgnoresCase(t *testing.T) {
	r := mustCompile(t, oneRoute(`route: {cluster: c, upgrade_configs: [{upgrade_type: WebSocket}, {upgrade_type: h2c, enabled: false}]}`), Options{}).VirtualHosts()[0].Routes[0]
	for _, tt := range []struct {
		typ                  string
		wantEnabled, wantHas bool
	}{{"websocket", true, true}, {"WEBSOCKET", true, true}, {"H2C", false, true}, {"CONNECT", false, false}} {
		if enabled, found := r.UpgradeEnabled(tt.typ); enabled != tt.wantEnabled || found != tt.wantHas {
			t.Errorf("UpgradeEnabled(%q) = %v, %v; want %v, %v", tt.typ, enabled, found, tt.wantEnabled, tt.wantHas)
		}
	}
}
