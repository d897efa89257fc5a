package csrf

import (
	"net/http"
	"strings"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	csrfv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/csrf/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/protobuf/proto"

	"github.com/legateproxy/legate/httpproxy/filter"
	"github.com/legateproxy/legate/httpproxy/filters/filtertest"
	"github.com/legateproxy/legate/httpproxy/route"
)

func pct(n uint32) *corev3.RuntimeFractionalPercent {
	return &corev3.RuntimeFractionalPercent{DefaultValue: &typev3.FractionalPercent{Numerator: n}}
}

func TestConfig(t *testing.T) {
	tests := []struct {
		name    string
		cfg     proto.Message
		wantErr string
	}{
		{name: "enabled", cfg: &csrfv3.CsrfPolicy{FilterEnabled: pct(100)}},
		{name: "no filter_enabled", cfg: &csrfv3.CsrfPolicy{}, wantErr: "FilterEnabled"},
		{name: "bad origin matcher", cfg: &csrfv3.CsrfPolicy{FilterEnabled: pct(100), AdditionalOrigins: []*matcherv3.StringMatcher{
			{MatchPattern: &matcherv3.StringMatcher_SafeRegex{SafeRegex: &matcherv3.RegexMatcher{Regex: "("}}}}}, wantErr: "additional_origins[0]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := FromAny(filtertest.MustAny(t, tt.cfg), nil)
			if (tt.wantErr == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tt.wantErr)) {
				t.Errorf("FromAny error = %v; want one containing %q", err, tt.wantErr)
			}
		})
	}
	if _, err := FromAny(nil, nil); err == nil || !strings.Contains(err.Error(), "want "+TypeURL) {
		t.Errorf("FromAny(nil) = %v; want a type error", err)
	}
}

func TestOnRequest(t *testing.T) {
	enforce, err := FromAny(filtertest.MustAny(t, &csrfv3.CsrfPolicy{FilterEnabled: pct(100), AdditionalOrigins: []*matcherv3.StringMatcher{
		{MatchPattern: &matcherv3.StringMatcher_Suffix{Suffix: ".partner.example"}}}}), nil)
	if err != nil {
		t.Fatal(err)
	}
	shadow, err := FromAny(filtertest.MustAny(t, &csrfv3.CsrfPolicy{FilterEnabled: pct(0), ShadowEnabled: pct(100)}), nil)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		f       *Filter
		method  string
		hdr     []string
		blocked bool
	}{
		{"same origin", enforce, "POST", []string{"Origin", "https://app.example"}, false},
		{"cross origin", enforce, "POST", []string{"Origin", "https://evil.example"}, true},
		{"referer", enforce, "DELETE", []string{"Referer", "https://app.example/page?x=1"}, false},
		{"additional origin", enforce, "PUT", []string{"Origin", "https://a.partner.example"}, false},
		{"no source", enforce, "PATCH", nil, true},
		{"null origin", enforce, "POST", []string{"Origin", "null"}, true},
		{"safe method", enforce, "GET", []string{"Origin", "https://evil.example"}, false},
		{"shadow", shadow, "POST", []string{"Origin", "https://evil.example"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := http.Header{}
			for i := 0; i+1 < len(tt.hdr); i += 2 {
				h.Set(tt.hdr[i], tt.hdr[i+1])
			}
			x := &filter.Exchange{Request: &route.Request{Authority: "app.example", Method: tt.method, Path: "/", Header: h}, Downstream: filtertest.Routed{}}
			r := tt.f.OnRequest(x)
			if (r != nil) != tt.blocked || (r != nil && (r.Status != 403 || r.Body != replyBody || r.Details != replyDetails)) {
				t.Errorf("OnRequest = %+v; want blocked %v (403 %q %q)", r, tt.blocked, replyBody, replyDetails)
			}
		})
	}
	if s := enforce.stats; s.MissingSourceOrigin.Value() != 1 || s.RequestInvalid.Value() != 3 || s.RequestValid.Value() != 3 {
		t.Errorf("missing %d invalid %d valid %d; want 1 3 3", s.MissingSourceOrigin.Value(), s.RequestInvalid.Value(), s.RequestValid.Value())
	}
	if s := shadow.stats; s.RequestInvalid.Value() != 1 {
		t.Errorf("shadow request_invalid = %d; want 1", s.RequestInvalid.Value())
	}
}

// BenchmarkCSRF is the filter's cost for a same-origin POST.
func BenchmarkCSRF(b *testing.B) {
	f, err := FromAny(filtertest.MustAny(b, &csrfv3.CsrfPolicy{FilterEnabled: pct(100)}), nil)
	if err != nil {
		b.Fatal(err)
	}
	req := &route.Request{Authority: "app.example", Method: "POST", Path: "/", Header: http.Header{"Origin": {"https://app.example"}}}
	b.ReportAllocs()
	for b.Loop() {
		x := filter.Exchange{Request: req, Downstream: filtertest.Routed{}}
		if f.OnRequest(&x) != nil {
			b.Fatal("blocked")
		}
	}
}
