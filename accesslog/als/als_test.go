package als

import (
	"context"
	"errors"
	"math/bits"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	accesslogdatav3 "github.com/envoyproxy/go-control-plane/envoy/data/accesslog/v3"
	grpcalsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/access_loggers/grpc/v3"
	otelalsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/access_loggers/open_telemetry/v3"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/legateproxy/legate/accesslog"
	"github.com/legateproxy/legate/internal/filterstate"
	"github.com/legateproxy/legate/stats"
)

func TestResponseFlags(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   accesslog.ResponseFlags
		want *accesslogdatav3.ResponseFlags
	}{
		{"none", 0, nil},
		{"LH", accesslog.FailedLocalHealthCheck, &accesslogdatav3.ResponseFlags{FailedLocalHealthcheck: true}},
		{"UH UF", accesslog.NoHealthyUpstream | accesslog.UpstreamConnectionFailure, &accesslogdatav3.ResponseFlags{NoHealthyUpstream: true, UpstreamConnectionFailure: true}},
		{"NR", accesslog.NoRouteFound, &accesslogdatav3.ResponseFlags{NoRouteFound: true}},
		{"UAEX", accesslog.UnauthorizedExternalService, &accesslogdatav3.ResponseFlags{UnauthorizedDetails: &accesslogdatav3.ResponseFlags_Unauthorized{Reason: accesslogdatav3.ResponseFlags_Unauthorized_EXTERNAL_SERVICE}}},
		{"URX", accesslog.UpstreamRetryLimitExceeded, &accesslogdatav3.ResponseFlags{UpstreamRetryLimitExceeded: true}},
		{"UPE", accesslog.UpstreamProtocolError, &accesslogdatav3.ResponseFlags{UpstreamProtocolError: true}},
		{"NC", accesslog.NoClusterFound, &accesslogdatav3.ResponseFlags{NoClusterFound: true}},
		{"DR", accesslog.DownstreamRemoteReset, &accesslogdatav3.ResponseFlags{DownstreamRemoteReset: true}},
		{"DF OM", accesslog.DNSResolutionFailed | accesslog.OverloadManager, &accesslogdatav3.ResponseFlags{DnsResolutionFailure: true, OverloadManager: true}},
		{"DO has no field", accesslog.DropOverload, &accesslogdatav3.ResponseFlags{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, responseFlags(tc.in), protocmp.Transform()); diff != "" {
				t.Errorf("responseFlags(%v) (-want +got):\n%s", tc.in, diff)
			}
		})
	}
}

// TestFlagFieldsNameRealFields: every name in flagFields is a bool field of ResponseFlags.
func TestFlagFieldsNameRealFields(t *testing.T) {
	if got, want := len(flagFields), bits.Len64(uint64(accesslog.UnconditionalDropOverload)); got != want {
		t.Fatalf("len(flagFields) = %d; want %d (one per flag)", got, want)
	}
	fields := (&accesslogdatav3.ResponseFlags{}).ProtoReflect().Descriptor().Fields()
	for bit, name := range flagFields {
		if name == "" {
			continue
		}
		if fd := fields.ByName(name); fd == nil {
			t.Errorf("flagFields[%d] = %q; not a field of ResponseFlags", bit, name)
		}
	}
}

func TestSettingsErrors(t *testing.T) {
	cfg := func(y string) *grpcalsv3.HttpGrpcAccessLogConfig {
		pb := &grpcalsv3.HttpGrpcAccessLogConfig{}
		if err := protoUnmarshalText(y, pb); err != nil {
			t.Fatal(err)
		}
		return pb
	}
	for _, tc := range []struct {
		name, in, want string
	}{
		{"google_grpc", `common_config: {log_name: "a", transport_api_version: V3, grpc_service: {google_grpc: {target_uri: "x", stat_prefix: "s"}}}`,
			"c.common_config.grpc_service: only envoy_grpc is supported"},
		{"v2", `common_config: {log_name: "a", grpc_service: {envoy_grpc: {cluster_name: "als"}}}`,
			"c.common_config.transport_api_version = AUTO; only V3 is supported"},
		{"metadata tag", `common_config: {log_name: "a", transport_api_version: V3, grpc_service: {envoy_grpc: {cluster_name: "als"}}, custom_tags: [{tag: "m", metadata: {kind: {request: {}}, metadata_key: {key: "k", path: [{key: "p"}]}}}]}`,
			`c.common_config.custom_tags[0] ("m"): only literal, environment and request_header tags are supported`},
		{"unknown cluster", `common_config: {log_name: "a", transport_api_version: V3, grpc_service: {envoy_grpc: {cluster_name: "nope"}}}`,
			`c.common_config.grpc_service.envoy_grpc.cluster_name = "nope"; unknown cluster`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := settingsFromProto("c", cfg(tc.in).GetCommonConfig(), func(n string) bool { return n == "als" })
			if err == nil || err.Error() != tc.want {
				t.Errorf("settingsFromProto() error = %v; want %q", err, tc.want)
			}
		})
	}
}

// FuzzSettings: any HttpGrpcAccessLogConfig is accepted or refused with an error, never a
// panic, and an accepted one has a cluster and a positive flush interval.
func FuzzSettings(f *testing.F) {
	ok, _ := proto.Marshal(&grpcalsv3.HttpGrpcAccessLogConfig{CommonConfig: &grpcalsv3.CommonGrpcAccessLogConfig{LogName: "a"}})
	f.Add(ok)
	f.Fuzz(func(t *testing.T, b []byte) {
		pb := &grpcalsv3.HttpGrpcAccessLogConfig{}
		if proto.Unmarshal(b, pb) != nil {
			return
		}
		if pb.ValidateAll() != nil {
			return
		}
		s, err := settingsFromProto("c", pb.GetCommonConfig(), nil)
		if err == nil && (s.cluster == "" || s.interval <= 0) {
			t.Errorf("accepted %v as %+v", pb, s)
		}
	})
}

func protoUnmarshalText(s string, m proto.Message) error { return prototext.Unmarshal([]byte(s), m) }

func TestCustomTags(t *testing.T) {
	t.Setenv("ALS_TEST_ZONE", "z1")
	pb := &grpcalsv3.HttpGrpcAccessLogConfig{}
	if err := protoUnmarshalText(`common_config: {log_name: "a", transport_api_version: V3, grpc_service: {envoy_grpc: {cluster_name: "als"}}, custom_tags: [
		{tag: "lit", literal: {value: "v"}},
		{tag: "env", environment: {name: "ALS_TEST_ZONE"}},
		{tag: "env-default", environment: {name: "ALS_TEST_UNSET", default_value: "d"}},
		{tag: "hdr", request_header: {name: "x-tenant"}},
		{tag: "hdr-default", request_header: {name: "x-absent", default_value: "none"}},
		{tag: "host", request_header: {name: "host"}},
		{tag: "method", request_header: {name: ":method"}}]}`, pb); err != nil {
		t.Fatal(err)
	}
	s, err := settingsFromProto("c", pb.GetCommonConfig(), nil)
	if err != nil {
		t.Fatal(err)
	}
	l := &HTTPLogger{client: &client[*accesslogdatav3.HTTPAccessLogEntry]{s: s}}
	got := l.entry(&accesslog.Entry{Authority: "a.example", Method: "GET", RequestHeaders: http.Header{"X-Tenant": {"acme"}}}).GetCommonProperties().GetCustomTags()
	want := map[string]string{"lit": "v", "env": "z1", "env-default": "d", "hdr": "acme", "hdr-default": "none", "host": "a.example", "method": "GET"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("custom_tags (-want +got):\n%s", diff)
	}
}

func TestTCPEntry(t *testing.T) {
	l := &TCPLogger{client: &client[*accesslogdatav3.TCPAccessLogEntry]{s: settings{tags: []customTag{{name: "tenant", header: "X-Tenant", def: "none"}}}}}
	start := time.Unix(1700000000, 0)
	for _, tc := range []struct {
		name string
		typ  accesslog.Type
		want *accesslogdatav3.AccessLogCommon
	}{
		{"end", accesslog.TypeTCPConnectionEnd, &accesslogdatav3.AccessLogCommon{
			SampleRate: 1, StartTime: timestamppb.New(start), Duration: durationpb.New(2 * time.Second),
			DownstreamRemoteAddress: socketAddress("10.0.0.1:5000"), UpstreamCluster: "db",
			TlsProperties: &accesslogdatav3.TLSProperties{TlsSniHostname: "db.example.com"},
			CustomTags:    map[string]string{"tenant": "none"}, AccessLogType: accesslogdatav3.AccessLogType_TcpConnectionEnd,
		}},
		{"periodic", accesslog.TypeTCPPeriodic, &accesslogdatav3.AccessLogCommon{
			SampleRate: 1, StartTime: timestamppb.New(start),
			DownstreamRemoteAddress: socketAddress("10.0.0.1:5000"), UpstreamCluster: "db",
			TlsProperties: &accesslogdatav3.TLSProperties{TlsSniHostname: "db.example.com"},
			CustomTags:    map[string]string{"tenant": "none"}, AccessLogType: accesslogdatav3.AccessLogType_TcpPeriodic,
			IntermediateLogEntry: true,
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := l.entry(&accesslog.Entry{
				StartTime: start, Duration: 2 * time.Second, DownstreamRemoteAddress: "10.0.0.1:5000",
				UpstreamCluster: "db", RequestedServerName: "db.example.com", BytesReceived: 7, BytesSent: 9, Type: tc.typ,
			})
			want := &accesslogdatav3.TCPAccessLogEntry{CommonProperties: tc.want,
				ConnectionProperties: &accesslogdatav3.ConnectionProperties{ReceivedBytes: 7, SentBytes: 9}}
			if diff := cmp.Diff(want, got, protocmp.Transform()); diff != "" {
				t.Errorf("entry (-want +got):\n%s", diff)
			}
		})
	}
}

// TestOTelLoggerErrors checks that the OpenTelemetry logger refuses what it does not
// implement, and bad format strings, with the field's path.
func TestOTelLoggerErrors(t *testing.T) {
	store, err := stats.New(stats.Config{})
	if err != nil {
		t.Fatal(err)
	}
	m, err := NewManager(Config{Dial: func(context.Context, string) (net.Conn, error) { return nil, errors.New("no dial") }, Stats: store,
		ClusterExists: func(n string) bool { return n == "otel" }})
	if err != nil {
		t.Fatal(err)
	}
	const common = `common_config: {log_name: "a", transport_api_version: V3, grpc_service: {envoy_grpc: {cluster_name: "otel"}}} `
	for _, tc := range []struct{ name, in, want string }{
		{"http_service cluster", `http_service: {http_uri: {uri: "http://x/v1/logs", cluster: "nope", timeout: {seconds: 1}}}`, `c.http_service.http_uri.cluster = "nope": unknown cluster`},
		{"http_service and grpc", common + `http_service: {http_uri: {uri: "http://x/v1/logs", cluster: "otel", timeout: {seconds: 1}}}`, "c: a gRPC service and http_service are both set; set one"},
		{"formatters", common + `formatters: [{name: "f", typed_config: {[type.googleapis.com/google.protobuf.Empty]: {}}}]`, "c.formatters: custom formatter extensions are not implemented by Legate"},
		{"resource_detectors", common + `resource_detectors: [{name: "env", typed_config: {[type.googleapis.com/google.protobuf.Empty]: {}}}]`, `c.resource_detectors[0]: "env" (type.googleapis.com/google.protobuf.Empty): not implemented by Legate`},
		{"bad body", common + `body: {string_value: "%REQ(%"}`, "c.body.string_value:"},
		{"bad nested attribute", common + `attributes: {values: [{key: "k", value: {kvlist_value: {values: [{key: "n", value: {string_value: "%NOPE%"}}]}}}]}`, "c.attributes.values[0].kvlist_value.values[0].string_value:"},
		{"unknown cluster", `grpc_service: {envoy_grpc: {cluster_name: "nope"}}`, `c.common_config.grpc_service.envoy_grpc.cluster_name = "nope"; unknown cluster`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pb := &otelalsv3.OpenTelemetryAccessLogConfig{}
			if err := protoUnmarshalText(tc.in, pb); err != nil {
				t.Fatal(err)
			}
			_, err := m.OTelLogger("c", pb)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("OTelLogger() error = %v; want %q", err, tc.want)
			}
		})
	}
}

// TestFilterStateObjects: filter_state_objects_to_log packs each named object of the
// entry's filter state in an Any of its typed form (a string object's StringValue, a
// header map's HeaderMap, as Envoy's); a missing object is left out.
func TestFilterStateObjects(t *testing.T) {
	pb := &grpcalsv3.HttpGrpcAccessLogConfig{}
	if err := protoUnmarshalText(`common_config: {log_name: "a", transport_api_version: V3, grpc_service: {envoy_grpc: {cluster_name: "als"}},
		filter_state_objects_to_log: ["acme.tenant", "acme.headers", "acme.none"]}`, pb); err != nil {
		t.Fatal(err)
	}
	s, err := settingsFromProto("c", pb.GetCommonConfig(), nil)
	if err != nil {
		t.Fatal(err)
	}
	state := &filterstate.State{}
	state.Set("acme.tenant", filterstate.String("blue"), filterstate.Options{})
	state.Set("acme.headers", filterstate.HeaderMap{{Key: ":status", Value: "200"}}, filterstate.Options{})
	l := &HTTPLogger{client: &client[*accesslogdatav3.HTTPAccessLogEntry]{s: s}}
	got := l.entry(&accesslog.Entry{FilterState: state}).GetCommonProperties().GetFilterStateObjects()
	tenant, _ := anypb.New(wrapperspb.String("blue"))
	headers, _ := anypb.New(&corev3.HeaderMap{Headers: []*corev3.HeaderValue{{Key: ":status", Value: "200"}}})
	want := map[string]*anypb.Any{"acme.tenant": tenant, "acme.headers": headers}
	if diff := cmp.Diff(want, got, protocmp.Transform()); diff != "" {
		t.Errorf("filter_state_objects (-want +got):\n%s", diff)
	}
	if got := l.entry(&accesslog.Entry{}).GetCommonProperties().GetFilterStateObjects(); got != nil {
		t.Errorf("without filter state: %v; want none", got)
	}
}
