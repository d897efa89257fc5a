package resource

import (
	"strings"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/types/known/durationpb"
)

func adsSource() *corev3.ConfigSource {
	return &corev3.ConfigSource{ConfigSourceSpecifier: &corev3.ConfigSource_Ads{Ads: &corev3.AggregatedConfigSource{}}}
}

func grpcAPI(api corev3.ApiConfigSource_ApiType) *corev3.ApiConfigSource {
	return &corev3.ApiConfigSource{
		ApiType: api,
		GrpcServices: []*corev3.GrpcService{{TargetSpecifier: &corev3.GrpcService_EnvoyGrpc_{
			EnvoyGrpc: &corev3.GrpcService_EnvoyGrpc{ClusterName: "xds"},
		}}},
	}
}

func TestSourceFromProto(t *testing.T) {
	apiSrc := func(a *corev3.ApiConfigSource) *corev3.ConfigSource {
		return &corev3.ConfigSource{ConfigSourceSpecifier: &corev3.ConfigSource_ApiConfigSource{ApiConfigSource: a}}
	}
	tests := []struct {
		name    string
		in      *corev3.ConfigSource
		want    Source
		wantErr string
	}{
		{name: "ads", in: adsSource(), want: Source{ADS: true, InitialFetchTimeout: DefaultInitialFetchTimeout}},
		{name: "grpc with timeout 0", in: func() *corev3.ConfigSource {
			s := apiSrc(grpcAPI(corev3.ApiConfigSource_GRPC))
			s.InitialFetchTimeout = durationpb.New(0)
			return s
		}(), want: Source{API: &APISource{Type: GRPC, Cluster: "xds", RequestTimeout: DefaultRequestTimeout}}},
		{name: "delta", in: apiSrc(grpcAPI(corev3.ApiConfigSource_DELTA_GRPC)),
			want: Source{API: &APISource{Type: DeltaGRPC, Cluster: "xds", RequestTimeout: DefaultRequestTimeout}, InitialFetchTimeout: DefaultInitialFetchTimeout}},
		{name: "rest", in: apiSrc(&corev3.ApiConfigSource{ApiType: corev3.ApiConfigSource_REST, ClusterNames: []string{"xds"}, RefreshDelay: durationpb.New(time.Second)}),
			want: Source{API: &APISource{Type: REST, Cluster: "xds", RefreshDelay: time.Second, RequestTimeout: DefaultRequestTimeout}, InitialFetchTimeout: DefaultInitialFetchTimeout}},
		{name: "path", in: &corev3.ConfigSource{ConfigSourceSpecifier: &corev3.ConfigSource_PathConfigSource{PathConfigSource: &corev3.PathConfigSource{Path: "/x.yaml"}}},
			want: Source{Path: "/x.yaml", InitialFetchTimeout: DefaultInitialFetchTimeout}},
		{name: "path with watched_directory", in: &corev3.ConfigSource{ConfigSourceSpecifier: &corev3.ConfigSource_PathConfigSource{PathConfigSource: &corev3.PathConfigSource{
			Path: "/etc/xds/lds.yaml", WatchedDirectory: &corev3.WatchedDirectory{Path: "/etc/xds"},
		}}}, want: Source{Path: "/etc/xds/lds.yaml", WatchedDirectory: "/etc/xds", InitialFetchTimeout: DefaultInitialFetchTimeout}},
		{name: "empty watched_directory", in: &corev3.ConfigSource{ConfigSourceSpecifier: &corev3.ConfigSource_PathConfigSource{PathConfigSource: &corev3.PathConfigSource{
			Path: "/x.yaml", WatchedDirectory: &corev3.WatchedDirectory{},
		}}}, wantErr: "path_config_source.watched_directory.path is empty"},
		{name: "rate limit", in: func() *corev3.ConfigSource {
			a := grpcAPI(corev3.ApiConfigSource_GRPC)
			a.RateLimitSettings = &corev3.RateLimitSettings{}
			return apiSrc(a)
		}(), want: Source{API: &APISource{Type: GRPC, Cluster: "xds", RequestTimeout: DefaultRequestTimeout, RateLimit: &RateLimit{MaxTokens: 100, FillRate: 10}}, InitialFetchTimeout: DefaultInitialFetchTimeout}},
		{name: "nothing", in: &corev3.ConfigSource{}, wantErr: "config_source_specifier is not set"},
		{name: "v2 transport", in: func() *corev3.ConfigSource {
			a := grpcAPI(corev3.ApiConfigSource_GRPC)
			a.TransportApiVersion = corev3.ApiVersion_V2
			return apiSrc(a)
		}(), wantErr: "api_config_source.transport_api_version = V2; only V3 is supported"},
		{name: "google grpc", in: apiSrc(&corev3.ApiConfigSource{ApiType: corev3.ApiConfigSource_GRPC, GrpcServices: []*corev3.GrpcService{{
			TargetSpecifier: &corev3.GrpcService_GoogleGrpc_{GoogleGrpc: &corev3.GrpcService_GoogleGrpc{TargetUri: "x"}},
		}}}), wantErr: "grpc_services[0].google_grpc is not supported"},
		{name: "two grpc services", in: func() *corev3.ConfigSource {
			a := grpcAPI(corev3.ApiConfigSource_GRPC)
			a.GrpcServices = append(a.GrpcServices, a.GrpcServices[0])
			return apiSrc(a)
		}(), wantErr: "grpc_services has 2 entries"},
		{name: "rest without refresh", in: apiSrc(&corev3.ApiConfigSource{ApiType: corev3.ApiConfigSource_REST, ClusterNames: []string{"xds"}}),
			wantErr: "a REST source needs a refresh_delay > 0"},
		{name: "aggregated", in: apiSrc(&corev3.ApiConfigSource{ApiType: corev3.ApiConfigSource_AGGREGATED_GRPC}),
			wantErr: "api_config_source.api_type = AGGREGATED_GRPC; supported: GRPC, DELTA_GRPC, REST"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := SourceFromProto(tc.in)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Errorf("SourceFromProto() error = %v; want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("SourceFromProto() error: %v", err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("SourceFromProto() (-want +got):\n%s", diff)
			}
		})
	}
}

func TestParseResponseFile(t *testing.T) {
	yaml := "version_info: \"7\"\nresources:\n- \"@type\": type.googleapis.com/envoy.config.cluster.v3.Cluster\n  name: a\n  connect_timeout: 1s\n"
	json := `{"version_info":"7","resources":[{"@type":"type.googleapis.com/envoy.config.cluster.v3.Cluster","name":"a","connect_timeout":"1s"}]}`
	// Envoy's loader rules: a single resource for the list, the enum in lower case.
	lenient := "version_info: \"7\"\nresources:\n  \"@type\": type.googleapis.com/envoy.config.cluster.v3.Cluster\n  name: a\n  connect_timeout: {seconds: 1}\n  lb_policy: round_robin\n"
	for _, tc := range []struct{ name, file, data string }{{"yaml", "cds.yaml", yaml}, {"json", "cds.json", json}, {"lenient yaml", "cds.yml", lenient}} {
		t.Run(tc.name, func(t *testing.T) {
			resp, err := ParseResponseFile(tc.file, []byte(tc.data))
			if err != nil {
				t.Fatalf("ParseResponseFile error: %v", err)
			}
			rc := &clusterv3.Cluster{}
			err = resp.GetResources()[0].UnmarshalTo(rc)
			if err != nil || resp.GetVersionInfo() != "7" || rc.GetName() != "a" || rc.GetConnectTimeout().AsDuration() != time.Second {
				t.Errorf("got version %q, cluster %v, error %v; want 7, a with a 1s connect_timeout, nil", resp.GetVersionInfo(), rc, err)
			}
		})
	}
	if _, err := ParseResponseFile("cds.yaml", []byte("bogus_field: 1\n")); err == nil || !strings.Contains(err.Error(), "cds.yaml: not a DiscoveryResponse") {
		t.Errorf("ParseResponseFile(unknown field) error = %v; want a DiscoveryResponse error naming the file", err)
	}
}
