package rbac

import (
	"fmt"
	"strings"
	"testing"

	"github.com/legateproxy/legate/listener/filters/chaintest"
	"github.com/legateproxy/legate/stats"
)

// serve runs a listener whose chain is the rbac filter configured by rules (YAML) and a
// terminal filter that writes "in" and closes.
func serve(t *testing.T, rules string) (string, *stats.Store, error) {
	t.Helper()
	return chaintest.Serve(t, Register, nil, fmt.Sprintf(
		`{name: envoy.filters.network.rbac, typed_config: {"@type": type.googleapis.com/envoy.extensions.filters.network.rbac.v3.RBAC, stat_prefix: net, %s}},`, rules))
}

// TestRBAC: ALLOW admits connections a policy matches and DENY those none matches, over the
// destination port and the client address, counted in <stat_prefix>.rbac.allowed/denied.
func TestRBAC(t *testing.T) {
	for _, tc := range []struct {
		name, rules string
		want        bool
	}{
		{"allow loopback", `rules: {action: ALLOW, policies: {p: {permissions: [{any: true}], principals: [{remote_ip: {address_prefix: 127.0.0.0, prefix_len: 8}}]}}}`, true},
		{"allow other network", `rules: {action: ALLOW, policies: {p: {permissions: [{any: true}], principals: [{direct_remote_ip: {address_prefix: 10.0.0.0, prefix_len: 8}}]}}}`, false},
		{"deny port range", `rules: {action: DENY, policies: {p: {permissions: [{destination_port_range: {start: 1, end: 65535}}], principals: [{any: true}]}}}`, false},
		{"deny not loopback", `rules: {action: DENY, policies: {p: {permissions: [{not_rule: {destination_ip: {address_prefix: 127.0.0.1, prefix_len: 32}}}], principals: [{any: true}]}}}`, true},
		{"allow sni", `rules: {action: ALLOW, policies: {p: {permissions: [{requested_server_name: {exact: a.example.com}}], principals: [{any: true}]}}}`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			addr, st, err := serve(t, tc.rules)
			if err != nil {
				t.Fatal(err)
			}
			if got := chaintest.Admitted(t, addr); got != tc.want {
				t.Fatalf("admitted = %t; want %t", got, tc.want)
			}
			allowed, denied := st.Counter("net.rbac.allowed").Value(), st.Counter("net.rbac.denied").Value()
			if (tc.want && allowed != 1) || (!tc.want && denied != 1) {
				t.Errorf("allowed %d, denied %d", allowed, denied)
			}
		})
	}
}

// TestRBACRefusals: what the filter does not implement is refused with its name.
func TestRBACRefusals(t *testing.T) {
	for _, tc := range []struct{ rules, want string }{
		{`shadow_rules: {}`, "shadow_rules: not implemented by Legate"},
		{`rules: {policies: {p: {permissions: [{header: {name: x}}], principals: [{any: true}]}}}`, "Permission_Header: not implemented by Legate"},
		{`rules: {policies: {p: {permissions: [{any: true}], principals: [{authenticated: {}}]}}}`, "Principal_Authenticated_: not implemented by Legate"},
	} {
		if _, _, err := serve(t, tc.rules); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v; want an error containing %q", tc.rules, err, tc.want)
		}
	}
}
