package admin

import (
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
)

// RefuseCrossOrigin wraps the admin handler so that a web page cannot drive
// it: Envoy's admin has no such guard (envoy#2763, #2769), so any page a
// browser on the same host opens could POST /quitquitquit.
//
// A request that may change state (any method but GET, HEAD and OPTIONS;
// every admin mutation is a POST) is refused with 403 and the body
// "cross-origin request refused: <origin>\n" when the browser marks it as
// coming from elsewhere:
//   - it carries an Origin header whose host:port is not the request's Host
//     (an opaque "null" origin or an unparsable one never matches), or
//   - Sec-Fetch-Site is "cross-site", or
//   - Sec-Fetch-Site is "same-site" (another port or subdomain of the same
//     site) without an Origin that matches Host.
//
// Requests without Origin and Sec-Fetch-Site (curl, scripts, other
// programs) pass, as do same-origin requests and every safe method. onRefuse,
// when not nil, is called with each refused request before the reply is
// written, so the server can log and count it; it runs on the request's
// goroutine. The returned handler is safe for concurrent use.
func RefuseCrossOrigin(next http.Handler, onRefuse func(r *http.Request)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		from, refuse := crossOrigin(r)
		if !refuse {
			next.ServeHTTP(w, r)
			return
		}
		if onRefuse != nil {
			onRefuse(r)
		}
		forbid(w, "cross-origin request refused: "+from+"\n")
	})
}

// forbid answers 403 with a one-line reason and the admin's usual headers
// (the guards run before the admin's response writer adds them).
func forbid(w http.ResponseWriter, reason string) {
	h := w.Header()
	h.Set("Content-Type", "text/plain; charset=UTF-8")
	h.Set("Cache-Control", "no-cache, max-age=0")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusForbidden)
	io.WriteString(w, reason)
}

// crossOrigin decides whether r must be refused and names where it came
// from: the Origin header, or the Sec-Fetch-Site value when there is no
// Origin.
func crossOrigin(r *http.Request) (from string, refuse bool) {
	switch r.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
		return "", false
	}
	site := strings.ToLower(strings.TrimSpace(r.Header.Get("Sec-Fetch-Site")))
	origins := r.Header.Values("Origin")
	from = strings.Join(origins, ", ")
	if len(origins) == 0 {
		from = "Sec-Fetch-Site: " + site
	}
	if site == "cross-site" {
		return from, true
	}
	for _, o := range origins {
		if !sameHost(o, r) {
			return from, true
		}
	}
	if site == "same-site" && len(origins) == 0 {
		return from, true
	}
	return from, false
}

// sameHost reports whether origin ("scheme://host[:port]") names the
// host:port the request was sent to, with default ports filled in from the
// schemes.
func sameHost(origin string, r *http.Request) bool {
	u, err := url.Parse(strings.TrimSpace(origin))
	if err != nil || u.Host == "" || u.Opaque != "" || u.User != nil || (u.Path != "" && u.Path != "/") {
		return false // includes "null"
	}
	def := defaultPort(u.Scheme)
	if def == "" {
		return false // no scheme, or one a web page on this host cannot have
	}
	oHost, oPort := splitHostPort(u.Host, def)
	reqScheme := "http"
	if r.TLS != nil {
		reqScheme = "https"
	}
	rHost, rPort := splitHostPort(r.Host, defaultPort(reqScheme))
	return oHost != "" && strings.EqualFold(oHost, rHost) && oPort == rPort
}

func defaultPort(scheme string) string {
	switch strings.ToLower(scheme) {
	case "http", "ws":
		return "80"
	case "https", "wss":
		return "443"
	}
	return ""
}

// splitHostPort splits "host", "host:port", "[v6]" or "[v6]:port", giving
// port def when none is written. The host is returned without brackets.
func splitHostPort(hostport, def string) (host, port string) {
	if h, p, err := net.SplitHostPort(hostport); err == nil {
		if p == "" {
			p = def
		}
		return h, p
	}
	return strings.TrimSuffix(strings.TrimPrefix(hostport, "["), "]"), def
}
