package buffer

import (
	"net/http"
	"strings"
	"testing"

	bufferv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/buffer/v3"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/legateproxy/legate/httpproxy/filter"
	"github.com/legateproxy/legate/httpproxy/filters/filtertest"
	"github.com/legateproxy/legate/httpproxy/route"
)

func TestConfig(t *testing.T) {
	tests := []struct {
		name    string
		cfg     *anypb.Any
		want    int64
		wantErr string
	}{
		{name: "max bytes", cfg: filtertest.MustAny(t, &bufferv3.Buffer{MaxRequestBytes: wrapperspb.UInt32(1024)}), want: 1024},
		{name: "missing max", cfg: filtertest.MustAny(t, &bufferv3.Buffer{}), wantErr: "MaxRequestBytes"},
		{name: "zero max", cfg: filtertest.MustAny(t, &bufferv3.Buffer{MaxRequestBytes: wrapperspb.UInt32(0)}), wantErr: "MaxRequestBytes"},
		{name: "no typed_config", cfg: nil, wantErr: "want " + TypeURL},
		{name: "per-route type", cfg: filtertest.MustAny(t, &bufferv3.BufferPerRoute{}), wantErr: "want " + TypeURL},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, err := FromAny(tt.cfg, nil)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("FromAny error = %v; want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || f.maxBytes != tt.want {
				t.Fatalf("FromAny = %+v, %v; want max %d", f, err, tt.want)
			}
		})
	}
	perRoute := []struct {
		name    string
		cfg     *bufferv3.BufferPerRoute
		want    PerRoute
		wantErr string
	}{
		{name: "disabled", cfg: &bufferv3.BufferPerRoute{Override: &bufferv3.BufferPerRoute_Disabled{Disabled: true}}, want: PerRoute{Disabled: true}},
		{name: "own limit", cfg: &bufferv3.BufferPerRoute{Override: &bufferv3.BufferPerRoute_Buffer{Buffer: &bufferv3.Buffer{MaxRequestBytes: wrapperspb.UInt32(5)}}}, want: PerRoute{MaxBytes: 5}},
		{name: "empty", cfg: &bufferv3.BufferPerRoute{}, wantErr: "Override"},
		{name: "disabled false", cfg: &bufferv3.BufferPerRoute{Override: &bufferv3.BufferPerRoute_Disabled{}}, wantErr: "Disabled"},
	}
	for _, tt := range perRoute {
		t.Run("per route "+tt.name, func(t *testing.T) {
			p, err := PerRouteFromAny(filtertest.MustAny(t, tt.cfg))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("PerRouteFromAny error = %v; want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || *p != tt.want {
				t.Fatalf("PerRouteFromAny = %+v, %v; want %+v", p, err, tt.want)
			}
		})
	}
}

// TestOnRequest: a body over the limit is answered 413; one within it, or a connection
// manager that cannot buffer, lets the request go on.
func TestOnRequest(t *testing.T) {
	f := &Filter{name: Name, maxBytes: 10}
	req := &route.Request{Path: "/", Method: "POST", Header: http.Header{}}
	if r := f.OnRequest(&filter.Exchange{Request: req, Downstream: filtertest.Routed{Err: filter.ErrBodyTooLarge}}); r == nil || r.Status != 413 || r.Body != tooLargeBody || r.Details != tooLargeDetails {
		t.Errorf("OnRequest over the limit = %+v; want 413 %q %q", r, tooLargeBody, tooLargeDetails)
	}
	if r := f.OnRequest(&filter.Exchange{Request: req, Downstream: filtertest.Routed{}}); r != nil {
		t.Errorf("OnRequest within the limit = %+v; want nil", r)
	}
	if r := f.OnRequest(&filter.Exchange{Request: req}); r != nil {
		t.Errorf("OnRequest without a Downstream = %+v; want nil", r)
	}
}

// BenchmarkBuffer is the filter's own cost per request (the body read is the connection
// manager's).
func BenchmarkBuffer(b *testing.B) {
	f := &Filter{name: Name, maxBytes: 1 << 20}
	req := &route.Request{Path: "/", Method: "POST", Header: http.Header{}}
	b.ReportAllocs()
	for b.Loop() {
		x := filter.Exchange{Request: req, Downstream: filtertest.Routed{}}
		if f.OnRequest(&x) != nil {
			b.Fatal("reply")
		}
	}
}
