package tracing

import (
	"testing"
	"time"

	commonv1 "go.opentelemetry.io/proto/otlp/common/v1"
	tracev1 "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

// TestOTLPSpan: a span in OTLP carries its ids, times, kind, tags in order, error status and
// events; its messages are made a kind at a time (6 allocations for a span of 16 tags and a
// parent, where one a tag and its message's three took 57).
func TestOTLPSpan(t *testing.T) {
	start := time.Unix(1700000000, 5)
	s := &Span{Name: "ingress", Start: start, End: start.Add(time.Millisecond), Client: true, Error: true,
		Events: []Event{{Time: start.Add(time.Microsecond), Name: EventFirstUpstreamTx}}}
	for i := range s.TraceID {
		s.TraceID[i] = byte(i + 1)
	}
	for i := range s.SpanID {
		s.SpanID[i], s.Parent[i] = byte(i+101), byte(i+201)
	}
	want := &tracev1.Span{
		TraceId: s.TraceID[:], SpanId: s.SpanID[:], ParentSpanId: s.Parent[:], Name: "ingress",
		Kind:              tracev1.Span_SPAN_KIND_CLIENT,
		StartTimeUnixNano: uint64(start.UnixNano()), EndTimeUnixNano: uint64(start.Add(time.Millisecond).UnixNano()),
		Status: &tracev1.Status{Code: tracev1.Status_STATUS_CODE_ERROR},
		Events: []*tracev1.Span_Event{{TimeUnixNano: uint64(start.Add(time.Microsecond).UnixNano()), Name: EventFirstUpstreamTx}},
	}
	for _, kv := range [][2]string{{"component", "proxy"}, {"http.method", "GET"}, {"http.status_code", "200"}} {
		s.Tags = append(s.Tags, Tag{Key: kv[0], Value: kv[1]})
		want.Attributes = append(want.Attributes, &commonv1.KeyValue{Key: kv[0], Value: &commonv1.AnyValue{Value: &commonv1.AnyValue_StringValue{StringValue: kv[1]}}})
	}
	if got := otlpSpan(s); !proto.Equal(got, want) {
		t.Errorf("otlpSpan =\n%v\nwant\n%v", got, want)
	}
	if got := otlpSpan(&Span{Context: s.Context}); len(got.ParentSpanId) != 0 || got.Attributes != nil || got.Kind != tracev1.Span_SPAN_KIND_SERVER {
		t.Errorf("root span without tags: parent %x, attributes %v, kind %v; want none, none, SERVER", got.ParentSpanId, got.Attributes, got.Kind)
	}

	s.Error, s.Events, s.Tags = false, nil, s.Tags[:0]
	for range 16 {
		s.Tags = append(s.Tags, Tag{Key: "k", Value: "v"})
	}
	if n := testing.AllocsPerRun(100, func() { otlpSpan(s) }); n != 6 {
		t.Errorf("otlpSpan of 16 tags allocates %v times; want 6", n)
	}
}
