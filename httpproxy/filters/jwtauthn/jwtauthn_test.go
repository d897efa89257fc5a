package jwtauthn

import (
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	jwtv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/jwt_authn/v3"
	jose "github.com/go-jose/go-jose/v4"

	"github.com/legateproxy/legate/httpproxy/filter"
	"github.com/legateproxy/legate/httpproxy/filters/filtertest"
	"github.com/legateproxy/legate/httpproxy/route"
	"github.com/legateproxy/legate/internal/registry"
)

// keys is a signing key and its public JWKS.
type keys struct {
	signer jose.Signer
	jwks   string
}

func newKeys(t testing.TB, kid string) *keys {
	t.Helper()
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	s, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.RS256, Key: k}, (&jose.SignerOptions{}).WithHeader("kid", kid).WithType("JWT"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: &k.PublicKey, KeyID: kid, Algorithm: "RS256", Use: "sig"}}})
	if err != nil {
		t.Fatal(err)
	}
	return &keys{signer: s, jwks: string(b)}
}

// token signs claims.
func (k *keys) token(t testing.TB, claims map[string]any) string {
	t.Helper()
	b, _ := json.Marshal(claims)
	o, err := k.signer.Sign(b)
	if err != nil {
		t.Fatal(err)
	}
	s, err := o.CompactSerialize()
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func build(t testing.TB, y string) (*Filter, error) {
	t.Helper()
	var pb jwtv3.JwtAuthentication
	filtertest.FromYAML(t, y, &pb)
	return New(&pb, &filter.Context{})
}

func TestNewErrors(t *testing.T) {
	k := newKeys(t, "k1")
	local := `{local_jwks: {inline_string: '` + k.jwks + `'}}`
	tests := []struct{ name, yaml, want string }{
		{"no jwks", `providers: {p: {issuer: i}}`, "JwksSourceSpecifier"},
		{"bad jwks", `providers: {p: {local_jwks: {inline_string: "nope"}}}`, "not a JWKS"},
		{"unknown provider", `providers: {p: ` + local + `}
rules: [{match: {prefix: /}, requires: {provider_name: q}}]`, `provider_name = "q": no such provider`},
		{"unknown requirement", `providers: {p: ` + local + `}
rules: [{match: {prefix: /}, requirement_name: r}]`, `requirement_name = "r"`},
		{"extract only", `providers: {p: ` + local + `}
requirement_map: {r: {extract_only_without_validation: {}}}`, "extract_only_without_validation"},
		{"filter state rules", `filter_state_rules: {name: x}`, "filter_state_rules"},
		{"claim to headers", `providers: {p: {local_jwks: {inline_string: '` + k.jwks + `'}, claim_to_headers: [{header_name: x, claim_name: sub}]}}`, "claim_to_headers"},
		{"async fetch", `providers: {p: {remote_jwks: {http_uri: {uri: "http://j/k", cluster: j, timeout: 1s}, async_fetch: {}}}}`, "async_fetch"},
		{"relative uri", `providers: {p: {remote_jwks: {http_uri: {uri: "/k", cluster: j, timeout: 1s}}}}`, "not an absolute URI"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := build(t, tt.yaml)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("New() error = %v; want one containing %q", err, tt.want)
			}
		})
	}
}

// TestDefaults: without from_* a provider reads the Bearer token of Authorization and the
// access_token parameter, with 60 s of clock skew and a 5 min JWKS cache.
func TestDefaults(t *testing.T) {
	f, err := build(t, `providers: {p: {remote_jwks: {http_uri: {uri: "http://j/k", cluster: j, timeout: 1s}}}}`)
	if err != nil {
		t.Fatal(err)
	}
	p := f.providers["p"]
	if len(p.locations) != 2 || p.locations[0].header != "Authorization" || p.locations[0].prefix != "Bearer " || p.locations[1].param != "access_token" {
		t.Errorf("locations = %+v", p.locations)
	}
	if p.skew != time.Minute || p.keys.(*remoteKeys).cacheFor != 5*time.Minute {
		t.Errorf("skew %v cache %v", p.skew, p.keys.(*remoteKeys).cacheFor)
	}
}

func exchange(path string, h http.Header) *filter.Exchange {
	if h == nil {
		h = http.Header{}
	}
	return &filter.Exchange{Request: &route.Request{Authority: "example.com", Method: "GET", Path: path, Scheme: "http", Header: h}}
}

// TestRequirements: requires_any, requires_all and allow_missing_or_failed over two
// providers with local JWKS, tokens from a header, a parameter and a cookie.
func TestRequirements(t *testing.T) {
	a, b := newKeys(t, "a"), newKeys(t, "b")
	f, err := build(t, `
providers:
  pa: {issuer: ia, local_jwks: {inline_string: '`+a.jwks+`'}, from_headers: [{name: x-a}], payload_in_metadata: a}
  pb: {issuer: ib, local_jwks: {inline_string: '`+b.jwks+`'}, from_params: [tok], from_cookies: [session]}
requirement_map:
  any: {requires_any: {requirements: [{provider_name: pa}, {provider_name: pb}]}}
  all: {requires_all: {requirements: [{provider_name: pa}, {provider_name: pb}]}}
  lax: {allow_missing_or_failed: {}}
rules:
- {match: {prefix: /any}, requirement_name: any}
- {match: {prefix: /all}, requirement_name: all}
- {match: {prefix: /lax}, requirement_name: lax}
`)
	if err != nil {
		t.Fatal(err)
	}
	exp := float64(time.Now().Add(time.Hour).Unix())
	ta := a.token(t, map[string]any{"iss": "ia", "sub": "alice", "exp": exp})
	tb := b.token(t, map[string]any{"iss": "ib", "exp": exp})
	bad := a.token(t, map[string]any{"iss": "ib", "exp": exp}) // pb's issuer, pa's key
	tests := []struct {
		name, path string
		hdr        http.Header
		want       string // "" allowed
	}{
		{"any with a", "/any", http.Header{"X-A": {ta}}, ""},
		{"any with b cookie", "/any", http.Header{"Cookie": {"x=1; session=" + tb}}, ""},
		{"any with none", "/any", nil, "Jwt is missing"},
		{"all with one", "/all", http.Header{"X-A": {ta}}, "Jwt is missing"},
		{"all with both", "/all?tok=" + tb, http.Header{"X-A": {ta}}, ""},
		{"all with a bad b", "/all?tok=" + bad, http.Header{"X-A": {ta}}, "Jwks doesn't have key to match kid or alg from Jwt"},
		{"lax with a bad token", "/lax?tok=" + bad, nil, ""},
		{"no rule", "/other", nil, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			x := exchange(tt.path, tt.hdr)
			r := f.OnRequest(x)
			got := ""
			if r != nil {
				got = r.Body
			}
			if got != tt.want {
				t.Errorf("OnRequest() = %q; want %q", got, tt.want)
			}
			if tt.want == "" && tt.hdr.Get("X-A") != "" {
				if sub := x.Metadata[Name].GetFields()["a"].GetStructValue().GetFields()["sub"].GetStringValue(); sub != "alice" {
					t.Errorf("payload_in_metadata sub = %q; want alice", sub)
				}
			}
		})
	}
}

// TestThroughProxy: a real listener, a real upstream and a real JWKS server (net/http)
// reached through its cluster: a missing, expired or foreign-audience token is refused with
// Envoy's status, body and challenge; a good one reaches the upstream with the payload
// forwarded and the token removed; the JWKS is fetched once and cached.
func TestThroughProxy(t *testing.T) {
	k := newKeys(t, "k1")
	var fetches atomic.Int32
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/.well-known/jwks.json" {
			http.NotFound(w, r)
			return
		}
		fetches.Add(1)
		w.Write([]byte(k.jwks))
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	up := filtertest.Upstream(t, "authorization", "x-jwt-payload")
	p := filtertest.Start(t, filtertest.Options{
		Clusters: []string{filtertest.StaticCluster("web", "", up), filtertest.StaticCluster("jwks", "", ln.Addr().String())},
		HCM: filtertest.HCM(`- name: envoy.filters.http.jwt_authn
  typed_config:
    "@type": type.googleapis.com/envoy.extensions.filters.http.jwt_authn.v3.JwtAuthentication
    providers:
      example:
        issuer: https://issuer.example
        audiences: [api]
        forward_payload_header: x-jwt-payload
        remote_jwks:
          http_uri: {uri: "http://jwks.example/.well-known/jwks.json", cluster: jwks, timeout: 5s}
          cache_duration: 300s
    rules:
    - match: {prefix: /public}
    - match: {prefix: /}
      requires: {provider_name: example}
`, `      typed_per_filter_config:
        envoy.filters.http.jwt_authn:
          "@type": type.googleapis.com/envoy.extensions.filters.http.jwt_authn.v3.PerRouteConfig
          disabled: true`),
		Register: []func(*registry.Builder){Register},
	})
	c := p.Client()
	now := time.Now()
	good := k.token(t, map[string]any{"iss": "https://issuer.example", "aud": "api", "sub": "alice", "exp": now.Add(time.Hour).Unix()})
	expired := k.token(t, map[string]any{"iss": "https://issuer.example", "aud": "api", "exp": now.Add(-time.Hour).Unix()})
	foreign := k.token(t, map[string]any{"iss": "https://issuer.example", "aud": "other", "exp": now.Add(time.Hour).Unix()})

	resp, body := p.Get(c, "/api/x")
	if resp.StatusCode != 401 || body != "Jwt is missing" || resp.Header.Get("Www-Authenticate") != `Bearer realm="http://`+p.Addr+`/api/x"` {
		t.Errorf("no token: %d %q %q", resp.StatusCode, body, resp.Header.Get("Www-Authenticate"))
	}
	resp, body = p.Get(c, "/api/x", "authorization", "Bearer "+good)
	if resp.StatusCode != 200 || body != "upstream" {
		t.Fatalf("good token: %d %q", resp.StatusCode, body)
	}
	if resp.Header.Get("Echo-Authorization") != "" {
		t.Errorf("the upstream got the token; forward is false")
	}
	payload, err := base64.RawURLEncoding.DecodeString(resp.Header.Get("Echo-X-Jwt-Payload"))
	if err != nil || !strings.Contains(string(payload), `"sub":"alice"`) {
		t.Errorf("x-jwt-payload = %q (%v); want the payload", payload, err)
	}
	resp, body = p.Get(c, "/api/x", "authorization", "Bearer "+expired)
	if resp.StatusCode != 401 || body != "Jwt is expired" || !strings.Contains(resp.Header.Get("Www-Authenticate"), `error="invalid_token"`) {
		t.Errorf("expired: %d %q %q", resp.StatusCode, body, resp.Header.Get("Www-Authenticate"))
	}
	if resp, body := p.Get(c, "/api/x", "authorization", "Bearer "+foreign); resp.StatusCode != 403 || body != "Audiences in Jwt are not allowed" {
		t.Errorf("foreign audience: %d %q", resp.StatusCode, body)
	}
	if resp, _ := p.Get(c, "/public/x"); resp.StatusCode != 200 {
		t.Errorf("/public without a token = %d; the rule requires nothing", resp.StatusCode)
	}
	if resp, _ := p.Get(c, "/other"); resp.StatusCode != 200 {
		t.Errorf("/other without a token = %d; the route disables the filter", resp.StatusCode)
	}
	if n := fetches.Load(); n != 1 {
		t.Errorf("JWKS fetched %d times; want 1 (cached)", n)
	}
	for name, want := range map[string]uint64{
		"http.ingress.jwt_authn.allowed": 1, "http.ingress.jwt_authn.denied": 3, "http.ingress.jwt_authn.jwks_fetch_success": 1,
	} {
		if got := p.Stat(name); got != want {
			t.Errorf("%s = %d; want %d", name, got, want)
		}
	}
}

func BenchmarkVerify(b *testing.B) {
	k := newKeys(b, "k1")
	f, err := build(b, `
providers: {p: {issuer: i, local_jwks: {inline_string: '`+k.jwks+`'}}}
rules: [{match: {prefix: /}, requires: {provider_name: p}}]`)
	if err != nil {
		b.Fatal(err)
	}
	tok := k.token(b, map[string]any{"iss": "i", "exp": time.Now().Add(time.Hour).Unix()})
	h := http.Header{"Authorization": {"Bearer " + tok}}
	b.ReportAllocs()
	for b.Loop() {
		h.Set("Authorization", "Bearer "+tok)
		if r := f.OnRequest(exchange("/x", h)); r != nil {
			b.Fatal(r.Body)
		}
	}
}

// TestJWKSUnreachable: when the JWKS cannot be fetched the request is refused with Envoy's
// "Jwks remote fetch is failed" and the failure is counted; a JWKS server answering 500
// counts as a failure too.
func TestJWKSUnreachable(t *testing.T) {
	k := newKeys(t, "k1")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "broken", http.StatusInternalServerError)
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	p := filtertest.Start(t, filtertest.Options{
		Clusters: []string{filtertest.StaticCluster("web", "", filtertest.Upstream(t)), filtertest.StaticCluster("jwks", "", ln.Addr().String())},
		HCM: filtertest.HCM(`- name: envoy.filters.http.jwt_authn
  typed_config:
    "@type": type.googleapis.com/envoy.extensions.filters.http.jwt_authn.v3.JwtAuthentication
    providers:
      p: {remote_jwks: {http_uri: {uri: "http://jwks/keys", cluster: jwks, timeout: 5s}}}
    rules: [{match: {prefix: /}, requires: {provider_name: p}}]
`, ""),
		Register: []func(*registry.Builder){Register},
	})
	tok := k.token(t, map[string]any{"exp": time.Now().Add(time.Hour).Unix()})
	resp, body := p.Get(p.Client(), "/x", "authorization", "Bearer "+tok)
	if resp.StatusCode != 401 || body != "Jwks remote fetch is failed" {
		t.Errorf("GET = %d %q; want 401 Jwks remote fetch is failed", resp.StatusCode, body)
	}
	if got := p.Stat("http.ingress.jwt_authn.jwks_fetch_failed"); got != 1 {
		t.Errorf("jwks_fetch_failed = %d; want 1", got)
	}
}
