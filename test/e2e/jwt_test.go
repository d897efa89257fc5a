package e2e

import (
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
)

// TestJWTAuthnFilter: an Envoy-shaped jwt_authn configuration on the binary (a local JWKS,
// payload_in_metadata) followed by an RBAC policy on the payload's subject: a missing token
// gets 401 "Jwt is missing", alice's token reaches the upstream, bob's valid token is refused
// by RBAC.
func TestJWTAuthnFilter(t *testing.T) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	jwks, _ := json.Marshal(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: &key.PublicKey, KeyID: "k1", Algorithm: "RS256", Use: "sig"}}})
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.RS256, Key: key}, (&jose.SignerOptions{}).WithHeader("kid", "k1"))
	if err != nil {
		t.Fatal(err)
	}
	token := func(sub string) string {
		b, _ := json.Marshal(map[string]any{"iss": "e2e", "sub": sub, "exp": time.Now().Add(time.Hour).Unix()})
		o, err := signer.Sign(b)
		if err != nil {
			t.Fatal(err)
		}
		s, _ := o.CompactSerialize()
		return s
	}
	up := namedBackend(t, 0, "upstream")
	cfg := authzConfig(up, `
          - name: envoy.filters.http.jwt_authn
            typed_config:
              "@type": type.googleapis.com/envoy.extensions.filters.http.jwt_authn.v3.JwtAuthentication
              providers:
                e2e:
                  issuer: e2e
                  payload_in_metadata: jwt
                  local_jwks: {inline_string: `+strconv.Quote(string(jwks))+`}
              rules:
              - match: {prefix: /}
                requires: {provider_name: e2e}
          - name: envoy.filters.http.rbac
            typed_config:
              "@type": type.googleapis.com/envoy.extensions.filters.http.rbac.v3.RBAC
              rules:
                policies:
                  alice-only:
                    permissions: [{any: true}]
                    principals:
                    - metadata: {filter: envoy.filters.http.jwt_authn, path: [{key: jwt}, {key: sub}], value: {string_match: {exact: alice}}}`, "")
	p := start(t, "-c", writeConfig(t, cfg))
	client := &http.Client{Timeout: 10 * time.Second}
	url := "http://" + p.listenerAddr("authz") + "/x"
	if code, body := httpGet(t, client, url, nil); code != http.StatusUnauthorized || body != "Jwt is missing" {
		t.Errorf("no token: %d %q; want 401 Jwt is missing", code, body)
	}
	if code, body := httpGet(t, client, url, http.Header{"Authorization": {"Bearer " + token("alice")}}); code != http.StatusOK || body != "upstream" {
		t.Errorf("alice: %d %q; want 200 from the upstream", code, body)
	}
	if code, body := httpGet(t, client, url, http.Header{"Authorization": {"Bearer " + token("bob")}}); code != http.StatusForbidden || !strings.HasPrefix(body, "RBAC") {
		t.Errorf("bob: %d %q; want 403 from RBAC", code, body)
	}
	for name, want := range map[string]uint64{"http.authz.jwt_authn.allowed": 2, "http.authz.jwt_authn.denied": 1, "http.authz.rbac.denied": 1} {
		if v, _ := p.stat(name); v != want {
			t.Errorf("%s = %d; want %d", name, v, want)
		}
	}
}
