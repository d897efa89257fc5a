package config

import (
	"go/types"
	"sort"
	"strings"
	"testing"

	"golang.org/x/tools/go/packages"
)

// unreadFields are the exported fields of config's structs that no code outside config and
// bootstrap reads, each with the reason it stays. TestConfigFieldsAreRead fails on an unread
// field missing here (a field parsed and then dropped, as xff_num_trusted_hops,
// per_host_thresholds and close_connections_on_host_set_change were) and on an entry here
// that is read after all, so the list only shrinks.
var unreadFields = map[string]string{
	// Not implemented yet; each is a known gap with its issue.
	"Address.EndpointID": "internal listeners (issue 20): envoy_internal_address endpoints are not routed yet",
	"Address.UDP":        "UDP proxying (issue 20)",
	// Read by config itself.
	"SubClustersConfig.LbPolicy": "config.SubClusterConfig makes it each sub-cluster's lb_policy",
	// Read through the protos they came from by the server (issue 15 moves the readers here).
	"Bootstrap.Node":                          "server reads the node proto (server.Node)",
	"Node.Cluster":                            "server reads the node proto",
	"Node.ID":                                 "server reads the node proto",
	"Node.Locality":                           "server reads the node proto",
	"Node.UserAgentName":                      "server reads the node proto",
	"Locality.Region":                         "read through the node and endpoint protos",
	"Locality.SubZone":                        "read through the node and endpoint protos",
	"Locality.Zone":                           "read through the node and endpoint protos",
	"Bootstrap.StatsServerVersionOverride":    "server reads the bootstrap proto",
	"Bootstrap.HasStatsServerVersionOverride": "server reads the bootstrap proto",
	"Bootstrap.ClusterNames":                  "config's own name-uniqueness index",
	"Bootstrap.ListenerNames":                 "config's own name-uniqueness index",
	"LoadAssignment.ClusterName":              "the cluster's own name is used (Envoy ignores it for static clusters too)",
	"Cluster.TypedExtensionProtocolOptions":   "read through the cluster proto by the pools",
	"TransportSocketMatch.Labels":             "read through Cluster.MatchTransportSocket, which the cluster manager calls",
	"TransportSocketMatch.TransportSocket":    "read through Cluster.TransportSocketFor, which the server and health checks call",
	"CustomClusterType.Config":                "custom cluster types read the typed config from the proto",
	"HTTPConnectionManager.Proto":             "kept for /config_dump, which dumps the listener",
	"TCPProxy.Proto":                          "kept for /config_dump, which dumps the listener",
	"HealthCheck.Proto":                       "kept for /config_dump",
	"StatusRange.End":                         "health checks read the proto ranges (issue 15)",
	"StatusRange.Start":                       "health checks read the proto ranges (issue 15)",
	"StringMatch.Contains":                    "health checks match through internal/headermatch (issue 15)",
	"StringMatch.Exact":                       "health checks match through internal/headermatch (issue 15)",
	"StringMatch.IgnoreCase":                  "health checks match through internal/headermatch (issue 15)",
	"StringMatch.Prefix":                      "health checks match through internal/headermatch (issue 15)",
	"StringMatch.Regex":                       "health checks match through internal/headermatch (issue 15)",
	"StringMatch.Suffix":                      "health checks match through internal/headermatch (issue 15)",
}

// TestConfigFieldsAreRead type-checks the module and lists the exported fields of config's
// exported structs that nothing outside config and bootstrap reads: a field the loader
// converts must change behaviour somewhere, or be refused.
func TestConfigFieldsAreRead(t *testing.T) {
	if testing.Short() {
		t.Skip("type-checks the whole module")
	}
	cfg := &packages.Config{Mode: packages.NeedName | packages.NeedTypes | packages.NeedTypesInfo, Dir: ".."}
	pkgs, err := packages.Load(cfg, "./...")
	if err != nil {
		t.Fatal(err)
	}
	const self = "github.com/legateproxy/legate/config"
	var fields map[*types.Var]string
	read := map[*types.Var]bool{}
	for _, p := range pkgs {
		if len(p.Errors) > 0 {
			t.Fatalf("loading %s: %v", p.PkgPath, p.Errors)
		}
		switch p.PkgPath {
		case self:
			fields = exportedFields(p.Types)
			continue
		case "github.com/legateproxy/legate/bootstrap":
			continue
		}
		for _, obj := range p.TypesInfo.Uses {
			if v, ok := obj.(*types.Var); ok && v.IsField() {
				read[v] = true
			}
		}
	}
	if len(fields) == 0 {
		t.Fatal("package config not loaded")
	}
	var unread []string
	for f, name := range fields {
		_, known := unreadFields[name]
		switch {
		case !read[f] && !known:
			unread = append(unread, name)
		case read[f] && known:
			t.Errorf("%s is read now: delete its unreadFields entry", name)
		}
	}
	sort.Strings(unread)
	if len(unread) > 0 {
		t.Errorf("config fields nothing outside config reads (implement them, refuse them, or say why in unreadFields):\n%s", strings.Join(unread, "\n"))
	}
}

// exportedFields maps the exported fields of p's exported struct types to "Type.Field".
func exportedFields(p *types.Package) map[*types.Var]string {
	out := map[*types.Var]string{}
	scope := p.Scope()
	for _, n := range scope.Names() {
		tn, ok := scope.Lookup(n).(*types.TypeName)
		if !ok || !tn.Exported() {
			continue
		}
		st, ok := tn.Type().Underlying().(*types.Struct)
		if !ok {
			continue
		}
		for i := range st.NumFields() {
			if f := st.Field(i); f.Exported() {
				out[f] = n + "." + f.Name()
			}
		}
	}
	return out
}

// TestPerHostThresholdsRefused: per-host circuit breakers were parsed and dropped; with no
// per-host limit in the pools they are refused.
func TestPerHostThresholdsRefused(t *testing.T) {
	pc, err := clusterYAML(t, "name: a\ncircuit_breakers: {per_host_thresholds: [{max_connections: 1}]}")
	if err != nil {
		t.Fatal(err)
	}
	want := `cluster "a": circuit_breakers.per_host_thresholds: set; not implemented by Legate`
	if _, err := ClusterFromProto(pc, Limits{}); err == nil || err.Error() != want {
		t.Errorf("ClusterFromProto() error = %v; want %q", err, want)
	}
}
