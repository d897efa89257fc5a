package route

import (
	"errors"
	"strings"
	"testing"

	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/on_demand/v3" // typed configs below
	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/types/known/anypb"
)

const perRouteType = "type.googleapis.com/envoy.extensions.filters.http.on_demand.v3.PerRouteConfig"

// tagHook is a PerFilterConfig hook that names the entry it made, refuses the filter "bad"
// and ignores optional entries of "gone".
func tagHook(name string, cfg *anypb.Any, optional bool) (any, error) {
	switch {
	case name == "bad":
		return nil, errors.New("refused")
	case name == "gone" && optional:
		return nil, nil
	}
	return name + "@" + cfg.GetTypeUrl()[strings.LastIndexByte(cfg.GetTypeUrl(), '/')+1:], nil
}

const perFilterRC = `
typed_per_filter_config:
  f: {"@type": ` + perRouteType + `}
  only_config: {"@type": ` + perRouteType + `}
virtual_hosts:
- name: v
  domains: ["*"]
  typed_per_filter_config:
    f: {"@type": ` + perRouteType + `}
    vh_only: {"@type": ` + perRouteType + `}
    disabled_f: {"@type": type.googleapis.com/envoy.config.route.v3.FilterConfig, disabled: true}
    enabled_f: {"@type": type.googleapis.com/envoy.config.route.v3.FilterConfig, config: {}}
    gone: {"@type": type.googleapis.com/envoy.config.route.v3.FilterConfig, is_optional: true, config: {"@type": ` + perRouteType + `}}
  routes:
  - name: weighted
    match: {prefix: /w}
    typed_per_filter_config:
      f: {"@type": ` + perRouteType + `}
      route_only: {"@type": ` + perRouteType + `}
    route:
      weighted_clusters:
        clusters:
        - name: a
          weight: 1
          typed_per_filter_config:
            f: {"@type": type.googleapis.com/envoy.config.route.v3.FilterConfig, config: {"@type": ` + perRouteType + `}}
  - name: plain
    match: {prefix: /}
    route: {cluster: a}
`

// TestPerFilterConfig: typed_per_filter_config entries of every level are made by the hook
// and found with the most specific level winning (weighted cluster, route, virtual host,
// route configuration); FilterConfig wrappers disable, enable or mark optional.
func TestPerFilterConfig(t *testing.T) {
	tbl := mustCompile(t, perFilterRC, Options{PerFilterConfig: tagHook})
	w := tbl.Route(req("x", "/w"))
	p := tbl.Route(req("x", "/p"))
	for _, tc := range []struct {
		name   string
		m      *Match
		filter string
		want   *FilterConfig
	}{
		{"weighted cluster wins", w, "f", &FilterConfig{Config: "f@envoy.extensions.filters.http.on_demand.v3.PerRouteConfig"}},
		{"route level", w, "route_only", &FilterConfig{Config: "route_only@envoy.extensions.filters.http.on_demand.v3.PerRouteConfig"}},
		{"virtual host level", p, "vh_only", &FilterConfig{Config: "vh_only@envoy.extensions.filters.http.on_demand.v3.PerRouteConfig"}},
		{"route configuration level", p, "only_config", &FilterConfig{Config: "only_config@envoy.extensions.filters.http.on_demand.v3.PerRouteConfig"}},
		{"disabled", p, "disabled_f", &FilterConfig{Disabled: true}},
		{"enabled without config", p, "enabled_f", &FilterConfig{}},
		{"optional and ignored", p, "gone", &FilterConfig{}},
		{"absent", p, "nothing", nil},
		{"no match", nil, "f", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := tc.m.PerFilterConfig(tc.filter)
			if ok != (tc.want != nil) {
				t.Fatalf("PerFilterConfig(%q) ok = %v; want %v", tc.filter, ok, tc.want != nil)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("PerFilterConfig(%q) mismatch (-want +got):\n%s", tc.filter, diff)
			}
		})
	}
	t.Run("without a hook the typed config is kept", func(t *testing.T) {
		tbl := mustCompile(t, perFilterRC, Options{})
		got, ok := tbl.Route(req("x", "/p")).PerFilterConfig("vh_only")
		if a, isAny := got.Config.(*anypb.Any); !ok || !isAny || a.GetTypeUrl() != perRouteType {
			t.Errorf("PerFilterConfig(vh_only) = %v, %v; want the *anypb.Any of %s", got, ok, perRouteType)
		}
	})
}

// TestPerFilterConfigErrors: a hook error and a FilterConfig without config or disabled
// reject the route configuration, naming the entry's path.
func TestPerFilterConfigErrors(t *testing.T) {
	for _, tc := range []struct {
		name, src, want string
	}{
		{"hook refuses", oneRoute(`route: {cluster: a}, typed_per_filter_config: {bad: {"@type": ` + perRouteType + `}}`),
			`virtual_hosts[0].routes[0].typed_per_filter_config["bad"]: refused`},
		{"empty FilterConfig", "virtual_hosts:\n- name: v\n  domains: [\"*\"]\n  typed_per_filter_config: {x: {\"@type\": type.googleapis.com/envoy.config.route.v3.FilterConfig}}\n",
			`virtual_hosts[0].typed_per_filter_config["x"].config: missing`},
		{"route configuration level", "typed_per_filter_config: {bad: {\"@type\": " + perRouteType + "}}\nvirtual_hosts: []\n",
			`typed_per_filter_config["bad"]: refused`},
		{"weighted cluster level", oneRoute(`route: {weighted_clusters: {clusters: [{name: a, weight: 1, typed_per_filter_config: {bad: {"@type": ` + perRouteType + `}}}]}}`),
			`virtual_hosts[0].routes[0].route.weighted_clusters.clusters[0].typed_per_filter_config["bad"]: refused`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Compile(parseConfig(t, tc.src), Options{PerFilterConfig: tagHook})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Compile error = %v; want one containing %q", err, tc.want)
			}
		})
	}
}
