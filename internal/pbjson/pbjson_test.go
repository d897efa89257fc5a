package pbjson_test

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/cncf/xds/go/udpa/annotations"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/legateproxy/legate/internal/pbjson"
)

func mustAny(t testing.TB, m proto.Message) *anypb.Any {
	t.Helper()
	a, err := anypb.New(m)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func TestMarshal(t *testing.T) {
	tests := []struct {
		name string
		msg  proto.Message
		mode pbjson.Mode
		want string
	}{
		{name: "nil message", msg: nil, want: "{}\n"},
		{name: "empty message", msg: &corev3.Locality{}, want: "{}\n"},
		{name: "empty message all fields", msg: &corev3.Locality{}, mode: pbjson.AllFields,
			want: "{\n \"region\": \"\",\n \"zone\": \"\",\n \"sub_zone\": \"\"\n}\n"},
		{name: "oneof member at zero is printed",
			msg:  &corev3.SocketAddress{PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: 0}},
			want: "{\n \"port_value\": 0\n}\n"},
		{name: "set empty message field is printed",
			msg:  &corev3.Node{Locality: &corev3.Locality{}},
			want: "{\n \"locality\": {}\n}\n"},
		{name: "wrappers print bare",
			msg:  &corev3.RuntimeDouble{DefaultValue: 0.25, RuntimeKey: "k"},
			want: "{\n \"default_value\": 0.25,\n \"runtime_key\": \"k\"\n}\n"},
		{name: "uint32 wrapper and bool wrapper",
			msg:  &corev3.HealthCheck{HealthyThreshold: wrapperspb.UInt32(0), ReuseConnection: wrapperspb.Bool(false)},
			want: "{\n \"healthy_threshold\": 0,\n \"reuse_connection\": false\n}\n"},
		{name: "durations",
			msg: &corev3.HealthCheck{
				Timeout:           durationpb.New(10 * time.Second),
				Interval:          durationpb.New(500 * time.Millisecond),
				IntervalJitter:    durationpb.New(time.Second + time.Microsecond),
				InitialJitter:     durationpb.New(time.Nanosecond),
				NoTrafficInterval: &durationpb.Duration{Nanos: -500000000},
				UnhealthyInterval: &durationpb.Duration{},
			},
			want: `{
 "timeout": "10s",
 "interval": "0.500s",
 "interval_jitter": "1.000001s",
 "no_traffic_interval": "-0.500s",
 "unhealthy_interval": "0s",
 "initial_jitter": "0.000000001s"
}
`},
		{name: "int64 quoted", msg: wrapperspb.Int64(-5), want: "\"-5\"\n"},
		{name: "uint64 quoted", msg: wrapperspb.UInt64(math.MaxUint64), want: "\"18446744073709551615\"\n"},
		{name: "bytes base64", msg: wrapperspb.Bytes([]byte("[redacted]")), want: "\"W3JlZGFjdGVkXQ==\"\n"},
		{name: "timestamp whole", msg: timestamppb.New(time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)), want: "\"2025-01-02T03:04:05Z\"\n"},
		{name: "timestamp millis", msg: timestamppb.New(time.Date(2025, 1, 2, 3, 4, 5, 123e6, time.UTC)), want: "\"2025-01-02T03:04:05.123Z\"\n"},
		{name: "timestamp micros", msg: timestamppb.New(time.Date(1, 1, 1, 0, 0, 0, 120e3, time.UTC)), want: "\"0001-01-01T00:00:00.000120Z\"\n"},
		{name: "timestamp nanos", msg: timestamppb.New(time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.UTC)), want: "\"9999-12-31T23:59:59.999999999Z\"\n"},
		{name: "top-level struct", msg: mustStruct(t, map[string]any{"z": 1, "a": map[string]any{"y": nil, "b": []any{"s", 2.5}}}), want: `{
 "a": {
  "b": [
   "s",
   2.5
  ],
  "y": null
 },
 "z": 1
}
`},
		{name: "empty struct and list", msg: mustStruct(t, map[string]any{"s": map[string]any{}, "l": []any{}}),
			want: "{\n \"l\": [],\n \"s\": {}\n}\n"},
		{name: "top-level empty value", msg: &structpb.Value{}, want: "\n"},
		{name: "empty any", msg: &corev3.TypedExtensionConfig{Name: "x", TypedConfig: &anypb.Any{}},
			want: "{\n \"name\": \"x\",\n \"typed_config\": {}\n}\n"},
		{name: "any of message", msg: mustAny(t, &corev3.Locality{Region: "r"}),
			want: "{\n \"@type\": \"type.googleapis.com/envoy.config.core.v3.Locality\",\n \"region\": \"r\"\n}\n"},
		{name: "any of empty message", msg: mustAny(t, &corev3.Locality{}),
			want: "{\n \"@type\": \"type.googleapis.com/envoy.config.core.v3.Locality\"\n}\n"},
		{name: "any of empty message all fields", msg: mustAny(t, &corev3.Locality{}), mode: pbjson.AllFields,
			want: "{\n \"@type\": \"type.googleapis.com/envoy.config.core.v3.Locality\",\n \"region\": \"\",\n \"zone\": \"\",\n \"sub_zone\": \"\"\n}\n"},
		{name: "any of duration", msg: mustAny(t, durationpb.New(time.Second)),
			want: "{\n \"@type\": \"type.googleapis.com/google.protobuf.Duration\",\n \"value\": \"1s\"\n}\n"},
		{name: "any of struct", msg: mustAny(t, mustStruct(t, map[string]any{"k": "v"})),
			want: "{\n \"@type\": \"type.googleapis.com/google.protobuf.Struct\",\n \"value\": {\n  \"k\": \"v\"\n }\n}\n"},
		{name: "any of any", msg: mustAny(t, mustAny(t, &corev3.Locality{Zone: "z"})),
			want: "{\n \"@type\": \"type.googleapis.com/google.protobuf.Any\",\n \"value\": {\n  \"@type\": \"type.googleapis.com/envoy.config.core.v3.Locality\",\n  \"zone\": \"z\"\n }\n}\n"},
		{name: "any with custom host", msg: &anypb.Any{TypeUrl: "example.com/x/envoy.config.core.v3.Locality", Value: mustBytes(t, &corev3.Locality{Zone: "z"})},
			want: "{\n \"@type\": \"example.com/x/envoy.config.core.v3.Locality\",\n \"zone\": \"z\"\n}\n"},
		{name: "proto2 extension and explicit default", msg: func() proto.Message {
			opts := &descriptorpb.FieldOptions{Deprecated: proto.Bool(false)}
			proto.SetExtension(opts, annotations.E_Sensitive, true)
			return opts
		}(), want: "{\n \"deprecated\": false,\n \"[udpa.annotations.sensitive]\": true\n}\n"},
		{name: "unknown enum number", msg: &corev3.HealthStatusSet{Statuses: []corev3.HealthStatus{corev3.HealthStatus_HEALTHY, 42}},
			want: "{\n \"statuses\": [\n  \"HEALTHY\",\n  42\n ]\n}\n"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, mustMarshal(t, tc.msg, tc.mode)); diff != "" {
				t.Errorf("Marshal mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func mustStruct(t testing.TB, v map[string]any) *structpb.Struct {
	t.Helper()
	s, err := structpb.NewStruct(v)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func mustBytes(t testing.TB, m proto.Message) []byte {
	t.Helper()
	b, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestMarshalErrors(t *testing.T) {
	tests := []struct {
		name string
		msg  proto.Message
		want string
	}{
		{name: "unresolvable any",
			msg:  &corev3.TypedExtensionConfig{TypedConfig: &anypb.Any{TypeUrl: "type.googleapis.com/no.such.Type"}},
			want: `pbjson: typed_config: google.protobuf.Any type_url "type.googleapis.com/no.such.Type": proto: not found`},
		{name: "any without slash",
			msg:  &anypb.Any{TypeUrl: "envoy.config.core.v3.Locality"},
			want: `pbjson: google.protobuf.Any type_url "envoy.config.core.v3.Locality": must contain a host and a '/'`},
		{name: "any without type url",
			msg:  &anypb.Any{Value: []byte{1}},
			want: "pbjson: google.protobuf.Any has a value but no type_url"},
		{name: "any with bad bytes",
			msg:  &anypb.Any{TypeUrl: "type.googleapis.com/envoy.config.core.v3.Locality", Value: []byte{0x0a, 0x05}},
			want: `pbjson: google.protobuf.Any value of type "type.googleapis.com/envoy.config.core.v3.Locality": proto: cannot parse invalid wire-format data`},
		{name: "nested path",
			msg: &corev3.Node{Extensions: []*corev3.Extension{{}, {Version: &corev3.BuildVersion{
				Metadata: &structpb.Struct{Fields: map[string]*structpb.Value{"k": structpb.NewNumberValue(math.NaN())}},
			}}}},
			want: "pbjson: extensions[1].version.metadata[k]: google.protobuf.Value number_value = NaN; JSON has no such number"},
		{name: "duration too long", msg: &durationpb.Duration{Seconds: 315576000001},
			want: "pbjson: google.protobuf.Duration seconds = 315576000001; must be within ±315576000000"},
		{name: "duration signs", msg: &durationpb.Duration{Seconds: 1, Nanos: -1},
			want: "pbjson: google.protobuf.Duration seconds = 1, nanos = -1; signs must match"},
		{name: "timestamp too early", msg: &timestamppb.Timestamp{Seconds: -62135596801},
			want: "pbjson: google.protobuf.Timestamp seconds = -62135596801; must be within 0001-01-01T00:00:00Z and 9999-12-31T23:59:59Z"},
		{name: "timestamp negative nanos", msg: &timestamppb.Timestamp{Nanos: -1},
			want: "pbjson: google.protobuf.Timestamp nanos = -1; must be within [0, 999999999]"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out, err := pbjson.Marshal(tc.msg, pbjson.OmitDefaults)
			if err == nil {
				t.Fatalf("Marshal() = %q, nil; want error %q", out, tc.want)
			}
			var pe *pbjson.PathError
			if !errors.As(err, &pe) {
				t.Errorf("Marshal() error type %T; want *pbjson.PathError", err)
			}
			if got := strings.ReplaceAll(err.Error(), "\u00a0", " "); got != tc.want {
				t.Errorf("Marshal() error = %q; want %q", got, tc.want)
			}
		})
	}
}

// failingWriter fails on its n-th Write.
type failingWriter struct {
	n      int
	writes int
}

func (w *failingWriter) Write(p []byte) (int, error) {
	w.writes++
	if w.writes >= w.n {
		return 0, errors.New("broken pipe")
	}
	return len(p), nil
}

func TestWrite(t *testing.T) {
	// Enough extensions to pass the flush threshold several times.
	node := &corev3.Node{Id: "n"}
	for i := range 3000 {
		node.Extensions = append(node.Extensions, &corev3.Extension{Name: fmt.Sprintf("envoy.ext.%04d", i), TypeUrls: []string{"x"}})
	}
	want := mustMarshal(t, node, pbjson.AllFields)
	t.Run("matches Marshal", func(t *testing.T) {
		var buf bytes.Buffer
		if err := pbjson.Write(&buf, node, pbjson.AllFields); err != nil {
			t.Fatalf("Write() error: %v", err)
		}
		if buf.String() != want {
			t.Errorf("Write() output differs from Marshal(): got %d bytes; want %d", buf.Len(), len(want))
		}
	})
	t.Run("writer error", func(t *testing.T) {
		w := &failingWriter{n: 2}
		if err := pbjson.Write(w, node, pbjson.AllFields); err == nil || err.Error() != "broken pipe" {
			t.Errorf("Write() error = %v; want broken pipe", err)
		}
	})
}
