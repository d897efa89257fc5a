package route

import (
	"strings"
	"testing"
)

const domainsConfig = `
name: domains
virtual_hosts:
- name: exact
  domains: ["www.example.com", "api.example.com:8080"]
  routes: [{name: r, match: {prefix: "/"}, route: {cluster: c}}]
- name: suffix-short
  domains: ["*.example.com"]
  routes: [{name: r, match: {prefix: "/"}, route: {cluster: c}}]
- name: suffix-long
  domains: ["*-bar.example.com"]
  routes: [{name: r, match: {prefix: "/"}, route: {cluster: c}}]
- name: prefix-short
  domains: ["foo.*"]
  routes: [{name: r, match: {prefix: "/"}, route: {cluster: c}}]
- name: prefix-long
  domains: ["foo.bar.*"]
  routes: [{name: r, match: {prefix: "/"}, route: {cluster: c}}]
- name: default
  domains: ["*"]
  routes: [{name: r, match: {prefix: "/"}, route: {cluster: c}}]
`

func TestVirtualHostSelection(t *testing.T) {
	tests := []struct {
		host, want string
		ignorePort bool
	}{
		{host: "www.example.com", want: "exact"},
		{host: "WWW.Example.COM", want: "exact"},
		{host: "api.example.com:8080", want: "exact"},
		{host: "api.example.com", want: "suffix-short"},
		{host: "www.example.com:80", want: "default"},
		{host: "www.example.com:80", want: "exact", ignorePort: true},
		{host: "api.example.com:8080", want: "suffix-short", ignorePort: true},
		{host: "a.example.com", want: "suffix-short"},
		{host: "foo-bar.example.com", want: "suffix-long"},
		{host: "-bar.example.com", want: "suffix-short"},
		{host: ".example.com", want: "default"},
		{host: "foo.org", want: "prefix-short"},
		{host: "foo.bar.org", want: "prefix-long"},
		{host: "foo.bar.", want: "prefix-short"},
		{host: "foo.", want: "default"},
		{host: "x.foo.example.com", want: "suffix-short"},
		{host: "other.org", want: "default"},
		{host: "", want: "default"},
		{host: "[::1]:80", want: "default", ignorePort: true},
	}
	for _, tt := range tests {
		name := tt.host
		if tt.ignorePort {
			name += " ignoring port"
		}
		t.Run(name, func(t *testing.T) {
			tbl := mustCompile(t, domainsConfig, Options{StripAnyHostPort: tt.ignorePort})
			if got := routeName(tbl.Route(req(tt.host, "/"))); got != tt.want+"/r" {
				t.Errorf("Route(%q) = %q; want %q", tt.host, got, tt.want+"/r")
			}
		})
	}
	t.Run("ignore_port_in_host_matching", func(t *testing.T) {
		tbl := mustCompile(t, domainsConfig+"ignore_port_in_host_matching: true\n", Options{})
		if got := routeName(tbl.Route(req("www.example.com:9", "/"))); got != "exact/r" {
			t.Errorf("Route = %q; want exact/r", got)
		}
	})
	t.Run("duplicate virtual host names are accepted, as in Envoy", func(t *testing.T) {
		mustCompile(t, `
virtual_hosts:
- {name: same, domains: ["a.com"]}
- {name: same, domains: ["b.com"]}`, Options{})
	})
	t.Run("no default", func(t *testing.T) {
		tbl := mustCompile(t, `
virtual_hosts:
- name: only
  domains: ["a.com"]
  routes: [{match: {prefix: "/"}, route: {cluster: c}}]`, Options{})
		if m := tbl.Route(req("b.com", "/")); m != nil {
			t.Errorf("Route(b.com) = %q; want no match", routeName(m))
		}
	})
}

func TestCompileErrors(t *testing.T) {
	vh := func(routes string) string {
		return "virtual_hosts:\n- name: v\n  domains: [\"*\"]\n  routes:\n" + routes
	}
	tests := []struct {
		name, config, want string
		opts               Options
	}{
		{"duplicate exact domain", `
virtual_hosts:
- {name: a, domains: ["x.com"]}
- {name: b, domains: ["X.com"]}`, `virtual_hosts[1].domains[0] = "X.com": domains must be unique across virtual hosts`, Options{}},
		{"duplicate wildcard", `
virtual_hosts:
- {name: a, domains: ["*.x.com"]}
- {name: b, domains: ["*.x.com"]}`, `virtual_hosts[1].domains[0] = "*.x.com": domains must be unique`, Options{}},
		{"static vhds", "vhds: {config_source: {ads: {}}}\n" + vh(`  - {match: {prefix: "/"}, route: {cluster: c}}`),
			`vhds: virtual host discovery needs a route configuration delivered by RDS`, Options{}},
		{"two catch-alls", `
virtual_hosts:
- {name: a, domains: ["*"]}
- {name: b, domains: ["*"]}`, `virtual_hosts[1].domains[0] = "*": only one virtual host may have the domain "*"`, Options{}},
		{"bad regex", "virtual_hosts:\n- {name: a, domains: [a]}\n" + `- name: b
  domains: ["*"]
  routes:
  - {match: {safe_regex: {regex: "("}}, route: {cluster: c}}`, `virtual_hosts[1].routes[0].match.safe_regex.regex = "(": invalid RE2: `, Options{}},
		{"bad header regex", vh(`  - {match: {prefix: "/", headers: [{name: x, string_match: {safe_regex: {regex: "[a"}}}]}, route: {cluster: c}}`),
			`virtual_hosts[0].routes[0].match.headers[0].string_match.safe_regex.regex = "[a": invalid RE2`, Options{}},
		{"empty header name", vh(`  - {match: {prefix: "/", headers: [{exact_match: x}]}, route: {cluster: c}}`),
			`virtual_hosts[0].routes[0].match.headers[0].name = "": must not be empty`, Options{}},
		{"bad range", vh(`  - {match: {prefix: "/", headers: [{name: x, range_match: {start: 5, end: 5}}]}, route: {cluster: c}}`),
			`virtual_hosts[0].routes[0].match.headers[0].range_match = [5, 5): start must be < end`, Options{}},
		{"query without matcher", vh(`  - {match: {prefix: "/", query_parameters: [{name: q}]}, route: {cluster: c}}`),
			`virtual_hosts[0].routes[0].match.query_parameters[0]: one of string_match or present_match is required`, Options{}},
		{"path_separated_prefix trailing slash", vh(`  - {match: {path_separated_prefix: "/api/"}, route: {cluster: c}}`),
			`virtual_hosts[0].routes[0].match.path_separated_prefix = "/api/": must start with '/'`, Options{}},
		{"no path specifier", vh(`  - {match: {}, route: {cluster: c}}`),
			`virtual_hosts[0].routes[0].match: one of prefix, path, safe_regex`, Options{}},
		{"no action", vh(`  - {match: {prefix: "/"}}`), `virtual_hosts[0].routes[0]: one of route, redirect`, Options{}},
		{"both rewrites", vh(`  - {match: {prefix: "/"}, route: {cluster: c, prefix_rewrite: "/x", regex_rewrite: {pattern: {regex: a}, substitution: b}}}`),
			`virtual_hosts[0].routes[0].route: prefix_rewrite and regex_rewrite are mutually exclusive`, Options{}},
		{"bad substitution", vh(`  - {match: {prefix: "/"}, route: {cluster: c, regex_rewrite: {pattern: {regex: "(a)"}, substitution: "\\2"}}}`),
			`virtual_hosts[0].routes[0].route.regex_rewrite.substitution = "\\2": \2 refers to a capture group`, Options{}},
		{"zero weights", vh(`  - {match: {prefix: "/"}, route: {weighted_clusters: {clusters: [{name: a, weight: 0}]}}}`),
			`virtual_hosts[0].routes[0].route.weighted_clusters.clusters: sum of weights is 0; must be > 0`, Options{}},
		{"total weight mismatch", vh(`  - {match: {prefix: "/"}, route: {weighted_clusters: {total_weight: 100, clusters: [{name: a, weight: 30}, {name: b, weight: 30}]}}}`),
			`virtual_hosts[0].routes[0].route.weighted_clusters.total_weight = 100: must equal the sum of the cluster weights (60)`, Options{}},
		{"unknown cluster", vh(`  - {match: {prefix: "/"}, route: {cluster: nope}}`),
			`virtual_hosts[0].routes[0].route.cluster = "nope": unknown cluster`, Options{ValidateClusters: true, ClusterExists: func(n string) bool { return n == "c" }}},
		{"unknown weighted cluster", vh(`  - {match: {prefix: "/"}, route: {weighted_clusters: {clusters: [{name: c, weight: 1}, {name: nope, weight: 1}]}}}`),
			`virtual_hosts[0].routes[0].route.weighted_clusters.clusters[1].name = "nope": unknown cluster`, Options{ValidateClusters: true, ClusterExists: func(n string) bool { return n == "c" }}},
		{"unknown host predicate", vh(`  - {match: {prefix: "/"}, route: {cluster: c, retry_policy: {retry_host_predicate: [{name: envoy.retry_host_predicates.nope}]}}}`),
			`virtual_hosts[0].routes[0].route.retry_policy.retry_host_predicate[0].name = "envoy.retry_host_predicates.nope": unsupported`, Options{}},
		{"unknown retry priority", vh(`  - {match: {prefix: "/"}, route: {cluster: c, retry_policy: {retry_priority: {name: acme.retry_priority}}}}`),
			`virtual_hosts[0].routes[0].route.retry_policy.retry_priority.name = "acme.retry_priority": not implemented by Legate`, Options{}},
		{"previous_priorities frequency 0", vh(`  - {match: {prefix: "/"}, route: {cluster: c, retry_policy: {retry_priority: {name: envoy.retry_priorities.previous_priorities}}}}`),
			`virtual_hosts[0].routes[0].route.retry_policy.retry_priority.typed_config.update_frequency = 0: must be greater than 0`, Options{}},
		{"max interval below base", vh(`  - {match: {prefix: "/"}, route: {cluster: c, retry_policy: {retry_back_off: {base_interval: 1s, max_interval: 0.5s}}}}`),
			`virtual_hosts[0].routes[0].route.retry_policy.retry_back_off.max_interval = 500ms: must be >= base_interval (1s)`, Options{}},
		{"remove host", vh(`  - {match: {prefix: "/"}, route: {cluster: c}, request_headers_to_remove: [Host]}`),
			`virtual_hosts[0].routes[0].request_headers_to_remove[0] = "Host": pseudo-headers, host and empty names may not be removed`, Options{}},
		{"add pseudo", "request_headers_to_add: [{header: {key: \":path\", value: x}}]\n" + vh(`  - {match: {prefix: "/"}, route: {cluster: c}}`),
			`request_headers_to_add[0].header.key = ":path": pseudo-headers and host may not be modified`, Options{}},
		{"bad header formatter", vh(`  - {match: {prefix: "/"}, route: {cluster: c}, response_headers_to_add: [{header: {key: x, value: "%NOPE%"}}]}`),
			`virtual_hosts[0].routes[0].response_headers_to_add[0].header.value: access log format "%NOPE%"`, Options{}},
		{"direct response too big", "max_direct_response_body_size_bytes: 4\n" + vh(`  - {match: {prefix: "/"}, direct_response: {status: 200, body: {inline_string: "hello"}}}`),
			`virtual_hosts[0].routes[0].direct_response.body: 5 bytes; must be <= max_direct_response_body_size_bytes (4)`, Options{}},
		{"direct response status", vh(`  - {match: {prefix: "/"}, direct_response: {status: 99}}`),
			`virtual_hosts[0].routes[0].direct_response.status = 99: must be in [200, 599]`, Options{}},
		{"hash filter state", vh(`  - {match: {prefix: "/"}, route: {cluster: c, hash_policy: [{filter_state: {key: k}}]}}`),
			`virtual_hosts[0].routes[0].route.hash_policy[0].filter_state: filter state hash policies are not supported`, Options{}},
		{"tls context match", vh(`  - {match: {prefix: "/", tls_context: {presented: true}}, route: {cluster: c}}`),
			`virtual_hosts[0].routes[0].match.tls_context: TLS context matches are not supported`, Options{}},
		{"metadata list", vh(`  - {match: {prefix: "/"}, route: {cluster: c, metadata_match: {filter_metadata: {envoy.lb: {k: [1]}}}}}`),
			`virtual_hosts[0].routes[0].route.metadata_match.filter_metadata["envoy.lb"].k: only strings, numbers and booleans are supported`, Options{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Compile(parseConfig(t, tt.config), tt.opts)
			if err == nil {
				t.Fatalf("Compile() error = nil; want %q", tt.want)
			}
			if !strings.HasPrefix(err.Error(), tt.want) {
				t.Errorf("Compile() error = %q; want prefix %q", err, tt.want)
			}
		})
	}
}
