package route

import (
	"math/rand/v2"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/legateproxy/legate/internal/headermatch"
)

// Request is the read-only view of a downstream request that routing needs. It is built by
// the connection manager for each request and is not retained by the table.
type Request struct {
	// Authority is :authority (the Host header in HTTP/1.1), port included if sent.
	Authority string
	// Path is :path, query included.
	Path string
	// Method is :method.
	Method string
	// Scheme is the request's scheme as Envoy sees it (x-forwarded-proto, else :scheme):
	// "http" or "https". require_tls and redirects read it.
	Scheme string
	// Header holds the other request headers in canonical MIME form (net/http's form). Read
	// it through Headers: while Fill is set, the map is not filled yet.
	Header http.Header
	// Fill, when set, fills Header (the connection manager fills an HTTP/1 request's map only
	// when something reads it: most proxied requests are routed without reading a header).
	// Headers calls it once.
	Fill func()
	// Random is the per-request random value used by weighted clusters and runtime_fraction.
	// Read it through random: while DrawRandom is set, it is drawn at its first use (most
	// requests never use it, and a draw is about 60 instructions).
	Random     uint64
	DrawRandom bool
	// AddCookie, when set, is called by a cookie hash policy with a ttl when the cookie is
	// absent: it must generate a value, arrange a Set-Cookie on the response and return the
	// value (Envoy's generated hash cookie). Nil means no cookie is generated.
	AddCookie func(name, path string, ttl time.Duration) string
}

// Headers returns Header, filled.
func (r *Request) Headers() http.Header {
	if r.Fill != nil {
		f := r.Fill
		r.Fill = nil
		f()
	}
	return r.Header
}

// random returns Random, drawn first if DrawRandom is set.
func (r *Request) random() uint64 {
	if r.DrawRandom {
		r.Random, r.DrawRandom = rand.Uint64(), false
	}
	return r.Random
}

// pseudo returns the value of a pseudo-header key; ok is false for other keys.
func (r *Request) pseudo(key string) (v string, ok bool) {
	switch key {
	case ":authority":
		return r.Authority, true
	case ":path":
		return r.Path, true
	case ":method":
		return r.Method, true
	case ":scheme":
		return r.Scheme, true
	}
	return "", false
}

// header returns a header's value as Envoy's header matchers see it: several values are
// joined with ','. ok is false when the header is absent. key is a canonical MIME key or a
// lower-case pseudo-header name.
func (r *Request) header(key string) (string, bool) {
	if v, isPseudo := r.pseudo(key); isPseudo {
		return v, v != ""
	}
	return headermatch.Value(r.Headers()[key])
}

// PathOnly is :path without its query and fragment.
func (r *Request) PathOnly() string { return pathOnly(r.Path) }

// pathOnly strips the query and fragment from a :path value.
func pathOnly(p string) string {
	for i := 0; i < len(p); i++ {
		if p[i] == '?' || p[i] == '#' {
			return p[:i]
		}
	}
	return p
}

// queryParam returns the first value of the query parameter name in path, percent-decoded
// ('+' as space) as Envoy's parseAndDecodeQueryString does for route matching. It allocates
// only when a value or a key must be decoded.
func queryParam(path, name string) (string, bool) {
	return scanQuery(path, name, decode)
}

// rawQueryParam is queryParam without decoding (Envoy's parseQueryString, which the
// query_parameter hash policy uses).
func rawQueryParam(path, name string) (string, bool) {
	return scanQuery(path, name, func(s string) string { return s })
}

func scanQuery(path, name string, decode func(string) string) (string, bool) {
	q := strings.IndexByte(path, '?')
	if q < 0 {
		return "", false
	}
	rest := path[q+1:]
	if h := strings.IndexByte(rest, '#'); h >= 0 {
		rest = rest[:h]
	}
	for rest != "" {
		var pair string
		pair, rest, _ = strings.Cut(rest, "&")
		if pair == "" {
			continue
		}
		key, value, _ := strings.Cut(pair, "=")
		if decode(key) != name {
			continue
		}
		return decode(value), true
	}
	return "", false
}

func decode(s string) string {
	if strings.IndexByte(s, '%') < 0 && strings.IndexByte(s, '+') < 0 {
		return s
	}
	d, err := url.QueryUnescape(s)
	if err != nil {
		return s
	}
	return d
}

// cookieValue returns the value of cookie name from the Cookie headers (quotes stripped,
// leading spaces of the pair ignored, as Envoy parses cookies).
func cookieValue(h http.Header, name string) (string, bool) {
	for _, line := range h["Cookie"] {
		for line != "" {
			var part string
			part, line, _ = strings.Cut(line, ";")
			k, v, ok := strings.Cut(strings.TrimLeft(part, " "), "=")
			if !ok || k != name {
				continue
			}
			if len(v) >= 2 && v[0] == '"' && v[len(v)-1] == '"' {
				v = v[1 : len(v)-1]
			}
			return v, true
		}
	}
	return "", false
}

// HeaderValue is a header's value as Envoy's header matchers see it (pseudo-headers
// included, several values joined with ','); ok is false when it is absent. key is as
// headermatch.Key makes it.
func (r *Request) HeaderValue(key string) (string, bool) { return r.header(key) }
