package bootstrap

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/testing/protocmp"
)

func mustLoad(t *testing.T, src Source) *Loaded {
	t.Helper()
	l, err := Load(src)
	if err != nil {
		t.Fatalf("Load(%+v) error:\n%v", src, err)
	}
	return l
}

func testdata(name string) string { return filepath.Join("testdata", name) }

func TestLoadFormats(t *testing.T) {
	want := mustLoad(t, Source{Path: testdata("v3.yaml")})
	if len(want.Warnings) != 0 || len(want.Upgraded) != 0 {
		t.Errorf("v3.yaml: Warnings = %q, Upgraded = %q; want none", want.Warnings, want.Upgraded)
	}
	for _, name := range []string{"v3.json", "noext_yaml.conf", "noext_json.conf"} {
		t.Run(name, func(t *testing.T) {
			got := mustLoad(t, Source{Path: testdata(name)})
			if diff := cmp.Diff(want.Bootstrap, got.Bootstrap, protocmp.Transform()); diff != "" {
				t.Errorf("%s differs from v3.yaml (-v3.yaml +%s):\n%s", name, name, diff)
			}
		})
	}
}

func TestLoadDecodesFields(t *testing.T) {
	b := mustLoad(t, Source{Path: testdata("v3.yaml")}).Bootstrap
	checks := []struct {
		name      string
		got, want any
	}{
		{"node.id", b.GetNode().GetId(), "legate-test"},
		{"admin port", b.GetAdmin().GetAddress().GetSocketAddress().GetPortValue(), uint32(9901)},
		{"stats_flush_interval", b.GetStatsFlushInterval().AsDuration().String(), "10s"},
		{"clusters", len(b.GetStaticResources().GetClusters()), 3},
		{"maximum_ring_size", b.GetStaticResources().GetClusters()[0].GetRingHashLbConfig().GetMaximumRingSize().GetValue(), uint64(8388608)},
		{"listeners", len(b.GetStaticResources().GetListeners()), 2},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s = %v; want %v", c.name, c.got, c.want)
		}
	}
}

func TestV2Upgrades(t *testing.T) {
	got := mustLoad(t, Source{Path: testdata("v2.yaml")})
	want := mustLoad(t, Source{Path: testdata("v2_upgraded.yaml")})
	if diff := cmp.Diff(want.Bootstrap, got.Bootstrap, protocmp.Transform()); diff != "" {
		t.Errorf("v2.yaml upgraded differs from v2_upgraded.yaml (-want +got):\n%s", diff)
	}
	wantNotes := []string{
		"static_resources.clusters[0].extension_protocol_options[\"envoy.filters.network.http_connection_manager\"]: v2 entry rewritten as typed_extension_protocol_options[\"envoy.extensions.upstreams.http.v3.HttpProtocolOptions\"]",
		"static_resources.clusters[0].hosts: v2 field rewritten as load_assignment",
		"static_resources.clusters[0].tls_context: v2 field rewritten as transport_socket envoy.transport_sockets.tls",
		"static_resources.clusters[0].transport_socket.typed_config.common_tls_context.validation_context.verify_subject_alt_name: v2 field rewritten as match_subject_alt_names (exact)",
		"static_resources.clusters[1].drain_connections_on_host_removal: v2 field renamed ignore_health_on_host_removal",
		"static_resources.clusters[1].lb_policy: v2 value ORIGINAL_DST_LB rewritten as CLUSTER_PROVIDED with type ORIGINAL_DST",
		"static_resources.listeners[0].filter_chains[0].filters[0].typed_config.http_filters[0].config: empty v2 config rewritten as typed_config of type.googleapis.com/envoy.extensions.filters.http.router.v3.Router",
		"static_resources.listeners[0].filter_chains[0].tls_context: v2 field rewritten as transport_socket envoy.transport_sockets.tls",
	}
	var notes []string
	for _, n := range got.Upgraded {
		notes = append(notes, strings.TrimPrefix(n, testdata("v2.yaml")+": "))
	}
	if diff := cmp.Diff(wantNotes, notes, cmpSorted); diff != "" {
		t.Errorf("Upgraded (-want +got):\n%s", diff)
	}
}

var cmpSorted = cmp.Transformer("sort", func(s []string) []string {
	out := append([]string(nil), s...)
	for i := range out {
		for j := i + 1; j < len(out); j++ {
			if out[j] < out[i] {
				out[i], out[j] = out[j], out[i]
			}
		}
	}
	return out
})

func TestLoadMerge(t *testing.T) {
	override := `
node: { id: override-node }
admin: { address: { socket_address: { port_value: 9902 } } }
static_resources:
  clusters:
  - name: extra
    connect_timeout: 2s
    load_assignment:
      cluster_name: extra
      endpoints: [{ lb_endpoints: [{ endpoint: { address: { socket_address: { address: 127.0.0.1, port_value: 8081 } } } }] }]
`
	got := mustLoad(t, Source{Path: testdata("base.yaml"), YAML: override})
	want := mustLoad(t, Source{Path: testdata("merged.yaml")})
	if !proto.Equal(got.Bootstrap, want.Bootstrap) {
		t.Errorf("merged bootstrap differs from merged.yaml:\n%s", cmp.Diff(want.Bootstrap, got.Bootstrap, protocmp.Transform()))
	}

	t.Run("yaml only", func(t *testing.T) {
		l := mustLoad(t, Source{YAML: strings.Replace(override, "port_value: 9902", "address: 127.0.0.1, port_value: 9902", 1)})
		if got := l.Bootstrap.GetNode().GetId(); got != "override-node" {
			t.Errorf("node.id = %q; want %q", got, "override-node")
		}
	})
	t.Run("validated after merge", func(t *testing.T) {
		_, err := Load(Source{Path: testdata("base.yaml"), YAML: "admin: { address: { socket_address: { port_value: 70000 } } }"})
		want := testdata("base.yaml") + " merged with --config-yaml: admin.address.socket_address.port_value: value must be less than or equal to 65535"
		if err == nil || err.Error() != want {
			t.Errorf("Load error = %v; want %q", err, want)
		}
	})
	t.Run("override error names --config-yaml", func(t *testing.T) {
		_, err := Load(Source{Path: testdata("base.yaml"), YAML: "stats_flush_interval: soon"})
		want := `--config-yaml: stats_flush_interval: invalid duration "soon"`
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Load error = %v; want it to contain %q", err, want)
		}
	})
}

func TestLoadSourceErrors(t *testing.T) {
	if _, err := Load(Source{}); err == nil || !strings.Contains(err.Error(), "at least one of --config-path and --config-yaml") {
		t.Errorf("Load(empty) = %v; want an error naming both options", err)
	}
	_, err := Load(Source{Path: testdata("missing.yaml")})
	if !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Load(missing file) = %v; want os.ErrNotExist", err)
	}
}

func TestAllowUnknownFields(t *testing.T) {
	const cfg = `
admin: { address: { socket_address: { address: 127.0.0.1, port_value: 9901 } }, colour: blue }
static_resources:
  clusters:
  - name: web
    connect_timeout: 1s
    flavour: vanilla
    transport_socket:
      name: envoy.transport_sockets.tls
      typed_config:
        "@type": type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext
        sni_typo: x
`
	_, err := Parse([]byte(cfg), FormatYAML, Options{Name: "envoy.yaml"})
	var errs Errors
	if !errors.As(err, &errs) || len(errs) != 3 {
		t.Fatalf("strict Parse error = %v; want 3 FieldErrors", err)
	}
	if got, want := errs[0].Error(), "envoy.yaml: admin.colour: unknown field (not in envoy.config.bootstrap.v3.Admin)"; got != want {
		t.Errorf("first error = %q; want %q", got, want)
	}

	l, err := Parse([]byte(cfg), FormatYAML, Options{Name: "envoy.yaml", AllowUnknownFields: true})
	if err != nil {
		t.Fatalf("lenient Parse error: %v", err)
	}
	want := []string{
		"envoy.yaml: admin.colour: unknown field ignored",
		"envoy.yaml: static_resources.clusters[0].flavour: unknown field ignored",
		"envoy.yaml: static_resources.clusters[0].transport_socket.typed_config.sni_typo: unknown field ignored",
	}
	if diff := cmp.Diff(want, l.Warnings); diff != "" {
		t.Errorf("Warnings (-want +got):\n%s", diff)
	}
	if got := l.Bootstrap.GetStaticResources().GetClusters()[0].GetName(); got != "web" {
		t.Errorf("cluster name = %q; want web", got)
	}
}
