package jwtauthn

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	jwtv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/jwt_authn/v3"
	jose "github.com/go-jose/go-jose/v4"

	"github.com/legateproxy/legate/httpproxy/filter"
	"github.com/legateproxy/legate/internal/headermatch"
	"github.com/legateproxy/legate/pool"
)

// Envoy's failure messages (its jwt_verify_lib statuses), which are the reply bodies.
var (
	errMissing       = errors.New("Jwt is missing")
	errMalformed     = errors.New("Jwt is not in the form of Header.Payload.Signature with two dots and 3 sections")
	errExpired       = errors.New("Jwt is expired")
	errNotYetValid   = errors.New("Jwt not yet valid")
	errVerify        = errors.New("Jwt verification fails")
	errIssuer        = errors.New("Jwt issuer is not configured")
	errAudience      = errors.New("Audiences in Jwt are not allowed")
	errNoExp         = errors.New("Jwt doesn't have an expiration time")
	errSubject       = errors.New("Jwt subject is not allowed")
	errLifetime      = errors.New("Jwt lifetime exceeds the maximum allowed")
	errFetch         = errors.New("Jwks remote fetch is failed")
	errUnknownKID    = errors.New("Jwks doesn't have key to match kid or alg from Jwt")
	errUnsupportedAl = errors.New("Jwt algorithm is not supported")
)

// algorithms are the signature algorithms Envoy's jwt_verify_lib accepts.
var algorithms = []jose.SignatureAlgorithm{
	jose.RS256, jose.RS384, jose.RS512, jose.PS256, jose.PS384, jose.PS512,
	jose.ES256, jose.ES384, jose.ES512, jose.EdDSA, jose.HS256, jose.HS384, jose.HS512,
}

// location is one place a token is looked for.
type location struct {
	header, prefix string // from a header, after prefix
	param          string // from a query parameter
	cookie         string // from a cookie
}

// provider is one compiled JwtProvider.
type provider struct {
	name          string
	issuer        string
	audiences     []string
	subjects      *headermatch.String
	requireExp    bool
	maxLifetime   time.Duration
	skew          time.Duration
	forward       bool
	payloadHeader string
	padPayload    bool
	payloadInMD   string
	locations     []location
	keys          keySource
}

// keySource yields a provider's JWKS.
type keySource interface {
	keys(ctx context.Context) (*jose.JSONWebKeySet, error)
}

type localKeys struct{ set *jose.JSONWebKeySet }

func (l localKeys) keys(context.Context) (*jose.JSONWebKeySet, error) { return l.set, nil }

// remoteKeys fetches a JWKS through a cluster and keeps it for cache_duration. One fetch at a
// time: streams that need the keys while a fetch runs wait for it.
type remoteKeys struct {
	pools     *pool.Registry
	cluster   string
	uri       *url.URL
	timeout   time.Duration
	cacheFor  time.Duration
	now       func() time.Time
	onFetched func(ok bool)

	mu      sync.Mutex // guards set and expires; held across a fetch
	set     *jose.JSONWebKeySet
	expires time.Time
}

// maxJWKS bounds a fetched JWKS document.
const maxJWKS = 1 << 20

func (r *remoteKeys) keys(ctx context.Context) (*jose.JSONWebKeySet, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.set != nil && r.now().Before(r.expires) {
		return r.set, nil
	}
	ctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	host := r.uri.Host
	path := r.uri.RequestURI()
	resp, err := filter.Call(ctx, r.pools, r.cluster, &pool.Request{Method: "GET", Path: path, Host: host}, maxJWKS)
	if err == nil && resp.Status != 200 {
		err = fmt.Errorf("status %d", resp.Status)
	}
	var set *jose.JSONWebKeySet
	if err == nil {
		set, err = parseJWKS(resp.Body)
	}
	if r.onFetched != nil {
		r.onFetched(err == nil)
	}
	if err != nil {
		return nil, errFetch
	}
	r.set, r.expires = set, r.now().Add(r.cacheFor)
	return set, nil
}

func parseJWKS(b []byte) (*jose.JSONWebKeySet, error) {
	var set jose.JSONWebKeySet
	if err := json.Unmarshal(b, &set); err != nil {
		return nil, err
	}
	if len(set.Keys) == 0 {
		return nil, errors.New("no keys")
	}
	return &set, nil
}

// compileProvider compiles one JwtProvider; path names it in errors.
func compileProvider(name string, pb *jwtv3.JwtProvider, fctx *filter.Context, now func() time.Time, onFetched func(bool)) (*provider, error) {
	path := fmt.Sprintf("%s: providers[%q]", Name, name)
	refused := []struct {
		field string
		set   bool
	}{
		{"normalize_payload_in_metadata", pb.GetNormalizePayloadInMetadata() != nil},
		{"header_in_metadata", pb.GetHeaderInMetadata() != ""},
		{"failed_status_in_metadata", pb.GetFailedStatusInMetadata() != ""},
		{"jwt_cache_config", pb.GetJwtCacheConfig() != nil},
		{"claim_to_headers", len(pb.GetClaimToHeaders()) > 0},
	}
	for _, r := range refused {
		if r.set {
			return nil, fmt.Errorf("%s.%s: not implemented by Legate", path, r.field)
		}
	}
	p := &provider{
		name: name, issuer: pb.GetIssuer(), audiences: pb.GetAudiences(), requireExp: pb.GetRequireExpiration(),
		skew: 60 * time.Second, forward: pb.GetForward(), payloadHeader: pb.GetForwardPayloadHeader(),
		padPayload: pb.GetPadForwardPayloadHeader(), payloadInMD: pb.GetPayloadInMetadata(),
	}
	if pb.GetClockSkewSeconds() != 0 {
		p.skew = time.Duration(pb.GetClockSkewSeconds()) * time.Second
	}
	if pb.GetMaxLifetime() != nil {
		p.maxLifetime = pb.GetMaxLifetime().AsDuration()
	}
	if pb.GetSubjects() != nil {
		s, err := headermatch.CompileString(pb.GetSubjects(), path+".subjects")
		if err != nil {
			return nil, err
		}
		p.subjects = &s
	}
	for _, h := range pb.GetFromHeaders() {
		p.locations = append(p.locations, location{header: h.GetName(), prefix: h.GetValuePrefix()})
	}
	for _, q := range pb.GetFromParams() {
		p.locations = append(p.locations, location{param: q})
	}
	for _, c := range pb.GetFromCookies() {
		p.locations = append(p.locations, location{cookie: c})
	}
	if len(p.locations) == 0 {
		// Envoy's defaults: the Authorization header's Bearer token and access_token.
		p.locations = []location{{header: "Authorization", prefix: "Bearer "}, {param: "access_token"}}
	}
	switch {
	case pb.GetLocalJwks() != nil:
		b, err := dataSource(pb.GetLocalJwks().GetInlineString(), pb.GetLocalJwks().GetInlineBytes(), pb.GetLocalJwks().GetFilename())
		if err != nil {
			return nil, fmt.Errorf("%s.local_jwks: %w", path, err)
		}
		set, err := parseJWKS(b)
		if err != nil {
			return nil, fmt.Errorf("%s.local_jwks: not a JWKS: %w", path, err)
		}
		p.keys = localKeys{set}
	default: // remote_jwks: validation requires one of the two
		rj := pb.GetRemoteJwks()
		if rj.GetAsyncFetch() != nil || rj.GetRetryPolicy() != nil {
			return nil, fmt.Errorf("%s.remote_jwks: async_fetch and retry_policy are not implemented by Legate", path)
		}
		u, err := url.Parse(rj.GetHttpUri().GetUri())
		if err != nil || u.Host == "" {
			return nil, fmt.Errorf("%s.remote_jwks.http_uri.uri = %q: not an absolute URI", path, rj.GetHttpUri().GetUri())
		}
		rk := &remoteKeys{cluster: rj.GetHttpUri().GetCluster(), uri: u, timeout: rj.GetHttpUri().GetTimeout().AsDuration(),
			cacheFor: 5 * time.Minute, now: now, onFetched: onFetched}
		if fctx != nil {
			rk.pools = fctx.Pools
		}
		if rj.GetCacheDuration() != nil {
			rk.cacheFor = rj.GetCacheDuration().AsDuration()
		}
		p.keys = rk
	}
	return p, nil
}

func dataSource(inline string, inlineBytes []byte, file string) ([]byte, error) {
	switch {
	case inline != "":
		return []byte(inline), nil
	case len(inlineBytes) > 0:
		return inlineBytes, nil
	case file != "":
		return os.ReadFile(file)
	}
	return nil, errors.New("empty data source")
}

// extract finds the provider's token in the request: its value and where it was (so that
// forward: false can remove it). ok is false when there is none.
func (p *provider) extract(x *filter.Exchange) (token string, loc location, ok bool) {
	r := x.Request
	for _, l := range p.locations {
		switch {
		case l.header != "":
			v := r.Header.Get(l.header)
			if v == "" {
				continue
			}
			if l.prefix != "" {
				i := strings.Index(v, l.prefix)
				if i < 0 {
					continue
				}
				v = v[i+len(l.prefix):]
				if j := strings.IndexAny(v, ", "); j >= 0 {
					v = v[:j]
				}
			}
			return v, l, v != ""
		case l.param != "":
			_, q, _ := strings.Cut(r.Path, "?")
			vals, _ := url.ParseQuery(q)
			if v := vals.Get(l.param); v != "" {
				return v, l, true
			}
		case l.cookie != "":
			for _, line := range r.Header["Cookie"] {
				for _, part := range strings.Split(line, ";") {
					k, v, _ := strings.Cut(strings.TrimSpace(part), "=")
					if k == l.cookie && v != "" {
						return v, l, true
					}
				}
			}
		}
	}
	return "", location{}, false
}

// claims are the registered claims the filter checks.
type claims struct {
	Iss string          `json:"iss"`
	Sub string          `json:"sub"`
	Aud json.RawMessage `json:"aud"`
	Exp *float64        `json:"exp"`
	Nbf *float64        `json:"nbf"`
	Iat *float64        `json:"iat"`
}

func (c *claims) audiences() []string {
	var one string
	if json.Unmarshal(c.Aud, &one) == nil {
		return []string{one}
	}
	var many []string
	_ = json.Unmarshal(c.Aud, &many)
	return many
}

// verify checks token against the provider (signature, issuer, audiences, times, subject)
// and returns its payload; audiences overrides the provider's (provider_and_audiences).
func (p *provider) verify(ctx context.Context, token string, audiences []string, now time.Time) (payload []byte, err error) {
	if strings.Count(token, ".") != 2 {
		return nil, errMalformed
	}
	jws, err := jose.ParseSigned(token, algorithms)
	if err != nil {
		if strings.Contains(err.Error(), "algorithm") {
			return nil, errUnsupportedAl
		}
		return nil, errMalformed
	}
	parts := strings.Split(token, ".")
	raw, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return nil, errMalformed
	}
	var c claims
	if err := json.Unmarshal(raw, &c); err != nil {
		return nil, errMalformed
	}
	if p.issuer != "" && c.Iss != p.issuer {
		return nil, errIssuer
	}
	if err := p.checkTimes(&c, now); err != nil {
		return nil, err
	}
	if len(audiences) == 0 {
		audiences = p.audiences
	}
	if len(audiences) > 0 && !anyIn(c.audiences(), audiences) {
		return nil, errAudience
	}
	if p.subjects != nil && !p.subjects.Match(c.Sub) {
		return nil, errSubject
	}
	set, err := p.keys.keys(ctx)
	if err != nil {
		return nil, err
	}
	kid := jws.Signatures[0].Header.KeyID
	found := false
	for _, k := range set.Keys {
		if kid != "" && k.KeyID != "" && k.KeyID != kid {
			continue
		}
		found = true
		if out, err := jws.Verify(k); err == nil {
			return out, nil
		}
	}
	if !found {
		return nil, errUnknownKID
	}
	return nil, errVerify
}

func (p *provider) checkTimes(c *claims, now time.Time) error {
	unix := float64(now.Unix())
	skew := p.skew.Seconds()
	if c.Exp == nil {
		if p.requireExp || p.maxLifetime > 0 {
			return errNoExp
		}
	} else if unix > *c.Exp+skew {
		return errExpired
	}
	if c.Nbf != nil && unix+skew < *c.Nbf {
		return errNotYetValid
	}
	if p.maxLifetime > 0 && c.Exp != nil {
		start := unix
		if c.Iat != nil {
			start = *c.Iat
		}
		if *c.Exp-start > p.maxLifetime.Seconds() {
			return errLifetime
		}
	}
	return nil
}

func anyIn(have, want []string) bool {
	for _, h := range have {
		for _, w := range want {
			if h == w {
				return true
			}
		}
	}
	return false
}
