package bootstrap

import (
	"errors"
	"os"
	"strings"
	"testing"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	"github.com/google/go-cmp/cmp"
)

func TestFormatOf(t *testing.T) {
	tests := []struct {
		path string
		want Format
	}{
		{"envoy.yaml", FormatYAML},
		{"/etc/envoy/Envoy.YML", FormatYAML},
		{"envoy.json", FormatJSON},
		{"envoy.conf", FormatAuto},
		{"envoy", FormatAuto},
	}
	for _, tc := range tests {
		t.Run(tc.path, func(t *testing.T) {
			if got := FormatOf(tc.path); got != tc.want {
				t.Errorf("FormatOf(%q) = %v; want %v", tc.path, got, tc.want)
			}
		})
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		name   string
		data   string
		format Format
		want   []string // the whole error, one line per FieldError
	}{
		{"json syntax", `{"admin": }`, FormatJSON,
			[]string{"t.json: invalid JSON: invalid character '}' looking for beginning of value"}},
		{"json trailing data", `{} {}`, FormatJSON,
			[]string{"t.json: invalid JSON: data after the top-level value"}},
		{"json top-level string", `"envoy"`, FormatJSON,
			[]string{`t.json: got a string ("envoy") at the top level; want an object`}},
		{"neither json nor yaml", "{: [", FormatAuto,
			[]string{"t.json: neither JSON (invalid JSON: invalid character ':') nor YAML (invalid YAML: yaml: did not find expected node content)"}},
		{"every error is reported", `{"colour": 1, "admin": {"profile_path": 5}, "stats_flush_interval": "soon"}`, FormatJSON,
			[]string{
				`t.json: admin.profile_path: got a number (5); want a string`,
				`t.json: colour: unknown field (not in envoy.config.bootstrap.v3.Bootstrap)`,
				`t.json: stats_flush_interval: invalid duration "soon"; want a duration string such as "5s" or "0.25s"`,
			}},
		{"repeated json key in a Struct", `{"node": {"metadata": {"a": 1, "a": 2}}}`, FormatAuto,
			[]string{`t.json: node.metadata["a"]: key appears twice in one object`}},
		{"too deep", strings.Repeat("[", maxDepth+2), FormatJSON,
			[]string{`t.json: ` + strings.Repeat("[0]", maxDepth+1) + `: nested more than 1000 levels deep`}},
		{"null in a list is a default element", `{"static_resources": {"clusters": [null]}}`, FormatJSON,
			[]string{`t.json: static_resources.clusters[0].name: value length must be at least 1 runes`}},
		{"any of a well-known type with extra keys", `{"static_resources": {"clusters": [{"name": "c", "metadata": {"typed_filter_metadata": {"k": {"@type": "type.googleapis.com/google.protobuf.Struct", "value": {}, "x": 1}}}}]}}`, FormatJSON,
			[]string{`t.json: static_resources.clusters[0].metadata.typed_filter_metadata["k"].x: unknown field; an Any of google.protobuf.Struct holds only "value"`}},
		{"enum number out of int32", `{"static_resources": {"clusters": [{"name": "c", "lb_policy": 3000000000}]}}`, FormatJSON,
			[]string{`t.json: static_resources.clusters[0].lb_policy: got a number (3000000000); want a value of enum LbPolicy (ROUND_ROBIN, LEAST_REQUEST, RING_HASH, RANDOM, MAGLEV, CLUSTER_PROVIDED, LOAD_BALANCING_POLICY_CONFIG)`}},
		{"bad v2 hosts shape", `{"static_resources": {"clusters": [{"name": "c", "hosts": {"a": 1}}]}}`, FormatJSON,
			[]string{`t.json: static_resources.clusters[0].hosts.a: unknown field (not in envoy.config.core.v3.Address)`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.data), tc.format, Options{Name: "t.json"})
			var errs Errors
			if !errors.As(err, &errs) {
				t.Fatalf("Parse error = %v (%T); want Errors", err, err)
			}
			var got []string
			for _, e := range errs {
				got = append(got, e.Error())
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
		})
	}
}

func TestParseAcceptsProtojsonForms(t *testing.T) {
	const cfg = `{
  "staticResources": {"clusters": [{
    "name": "c",
    "connectTimeout": "1.000000001s",
    "lbPolicy": 2,
    "ringHashLbConfig": {"minimumRingSize": "64", "maximumRingSize": 128},
    "perConnectionBufferLimitBytes": "1024",
    "commonLbConfig": {"healthyPanicThreshold": {"value": "12.5"}},
    "metadata": {"filterMetadata": {"a": {"k": [1, "x", null]}},
                 "typedFilterMetadata": {"b": {"@type": "type.googleapis.com/google.protobuf.Duration", "value": "3s"}}},
    "loadAssignment": {"clusterName": "c"},
    "healthChecks": null,
    "dnsLookupFamily": null
  }]},
  "admin": null
}`
	l, err := Parse([]byte(cfg), FormatJSON, Options{})
	if err != nil {
		t.Fatalf("Parse error:\n%v", err)
	}
	c := l.Bootstrap.GetStaticResources().GetClusters()[0]
	checks := []struct {
		name      string
		got, want any
	}{
		{"connect_timeout nanos", c.GetConnectTimeout().GetNanos(), int32(1)},
		{"lb_policy", c.GetLbPolicy(), clusterv3.Cluster_RING_HASH},
		{"minimum_ring_size", c.GetRingHashLbConfig().GetMinimumRingSize().GetValue(), uint64(64)},
		{"per_connection_buffer_limit_bytes", c.GetPerConnectionBufferLimitBytes().GetValue(), uint32(1024)},
		{"healthy_panic_threshold", c.GetCommonLbConfig().GetHealthyPanicThreshold().GetValue(), 12.5},
		{"admin", l.Bootstrap.GetAdmin() == nil, true},
	}
	for _, ch := range checks {
		if ch.got != ch.want {
			t.Errorf("%s = %v; want %v", ch.name, ch.got, ch.want)
		}
	}
}

func TestParseEmpty(t *testing.T) {
	for _, f := range []Format{FormatYAML, FormatAuto} {
		l, err := Parse(nil, f, Options{})
		if err != nil {
			t.Fatalf("Parse(empty, %v) error: %v", f, err)
		}
		if l.Bootstrap == nil {
			t.Errorf("Parse(empty, %v).Bootstrap = nil; want an empty bootstrap", f)
		}
	}
}

func TestFieldErrorFormat(t *testing.T) {
	_, err := Parse([]byte("admin: {profile_path: [1]}"), FormatYAML, Options{})
	var fe *FieldError
	if !errors.As(err, &fe) {
		t.Fatalf("errors.As(%v, *FieldError) = false; want true", err)
	}
	want := FieldError{File: "bootstrap", Path: "admin.profile_path", Rule: "got a list; want a string"}
	if diff := cmp.Diff(want, *fe); diff != "" {
		t.Errorf("FieldError (-want +got):\n%s", diff)
	}
}

func BenchmarkParse(b *testing.B) {
	for _, name := range []string{"v3.yaml", "v2.yaml"} {
		data, err := os.ReadFile(testdata(name))
		if err != nil {
			b.Fatal(err)
		}
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Parse(data, FormatYAML, Options{}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
