package config

import (
	"strings"
	"testing"

	bufferv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/buffer/v3"
	corsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/cors/v3"
	hmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/header_mutation/v3"
	upstreamcodecv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/upstream_codec/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
)

func upstreamFilter(t *testing.T, name string, m proto.Message) *hcmv3.HttpFilter {
	t.Helper()
	a, err := anypb.New(m)
	if err != nil {
		t.Fatal(err)
	}
	return &hcmv3.HttpFilter{Name: name, ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: a}}
}

// TestUpstreamFilters: an upstream filter chain ends with the codec and holds only the
// filters Legate runs upstream; each error names the entry.
func TestUpstreamFilters(t *testing.T) {
	codec := upstreamFilter(t, "envoy.filters.http.upstream_codec", &upstreamcodecv3.UpstreamCodec{})
	hm := upstreamFilter(t, "hm", &hmv3.HeaderMutation{})
	buf := upstreamFilter(t, "buf", &bufferv3.Buffer{})
	cors := upstreamFilter(t, "cors", &corsv3.Cors{})
	for _, tc := range []struct {
		name      string
		fs        []*hcmv3.HttpFilter
		wantNames []string
		wantErr   string
	}{
		{"none", nil, nil, ""},
		{"codec alone", []*hcmv3.HttpFilter{codec}, nil, ""},
		{"header_mutation and buffer", []*hcmv3.HttpFilter{hm, buf, codec}, []string{"hm", "buf"}, ""},
		{"no codec", []*hcmv3.HttpFilter{hm}, nil, `f[0] = "hm": the last upstream filter must be envoy.filters.http.upstream_codec`},
		{"codec first", []*hcmv3.HttpFilter{codec, hm, codec}, nil, `f[0] = "envoy.filters.http.upstream_codec": the last upstream filter must be`},
		{"cors", []*hcmv3.HttpFilter{cors, codec}, nil, `f[0] = "cors" (type.googleapis.com/envoy.extensions.filters.http.cors.v3.Cors): not implemented by Legate as an upstream filter`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := UpstreamFilters("f", tc.fs)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v; want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, f := range got {
				names = append(names, f.Name)
			}
			if strings.Join(names, ",") != strings.Join(tc.wantNames, ",") {
				t.Errorf("filters %v; want %v", names, tc.wantNames)
			}
		})
	}
}

// TestClusterUpstreamFilters: a cluster's HttpProtocolOptions.http_filters load into
// Cluster.UpstreamHTTPFilters; a filter Legate does not run upstream is refused with its path.
func TestClusterUpstreamFilters(t *testing.T) {
	const codec = `{name: envoy.filters.http.upstream_codec, typed_config: {'@type': type.googleapis.com/envoy.extensions.filters.http.upstream_codec.v3.UpstreamCodec}}`
	b, err := load(t, httpOptionsCluster(`explicit_http_config: {http_protocol_options: {}}, http_filters: [{name: hm, typed_config: {'@type': type.googleapis.com/envoy.extensions.filters.http.header_mutation.v3.HeaderMutation}}, `+codec+`]`), Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if fs := b.Clusters[0].UpstreamHTTPFilters; len(fs) != 1 || fs[0].Name != "hm" {
		t.Errorf("UpstreamHTTPFilters = %+v; want the header_mutation filter alone", fs)
	}
	_, err = load(t, httpOptionsCluster(`explicit_http_config: {http_protocol_options: {}}, http_filters: [{name: cors, typed_config: {'@type': type.googleapis.com/envoy.extensions.filters.http.cors.v3.Cors}}, `+codec+`]`), Limits{})
	if want := `typed_extension_protocol_options["envoy.extensions.upstreams.http.v3.HttpProtocolOptions"].http_filters[0] = "cors" (type.googleapis.com/envoy.extensions.filters.http.cors.v3.Cors): not implemented by Legate as an upstream filter`; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("error %v; want one containing %q", err, want)
	}
}
