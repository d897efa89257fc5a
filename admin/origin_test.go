package admin

import (
	"crypto/tls"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestRefuseCrossOrigin(t *testing.T) {
	tests := []struct {
		name    string
		method  string
		host    string
		tls     bool
		headers map[string][]string
		refuse  bool
		body    string // of a refusal
	}{
		{name: "curl POST without browser headers", method: "POST", host: "127.0.0.1:9901"},
		{name: "GET with a foreign origin", method: "GET", host: "127.0.0.1:9901",
			headers: map[string][]string{"Origin": {"https://evil.example"}, "Sec-Fetch-Site": {"cross-site"}}},
		{name: "HEAD cross-site", method: "HEAD", host: "127.0.0.1:9901",
			headers: map[string][]string{"Sec-Fetch-Site": {"cross-site"}}},
		{name: "same-origin POST", method: "POST", host: "127.0.0.1:9901",
			headers: map[string][]string{"Origin": {"http://127.0.0.1:9901"}, "Sec-Fetch-Site": {"same-origin"}}},
		{name: "same origin, host case differs", method: "POST", host: "LocalHost:9901",
			headers: map[string][]string{"Origin": {"http://localhost:9901"}}},
		{name: "same origin on the default port, written and not", method: "POST", host: "admin.internal",
			headers: map[string][]string{"Origin": {"http://admin.internal:80"}}},
		{name: "same origin over TLS on the default port", method: "POST", host: "admin.internal", tls: true,
			headers: map[string][]string{"Origin": {"https://admin.internal"}}},
		{name: "same origin IPv6", method: "POST", host: "[::1]:9901",
			headers: map[string][]string{"Origin": {"http://[::1]:9901"}}},
		{name: "user-initiated navigation", method: "POST", host: "127.0.0.1:9901",
			headers: map[string][]string{"Sec-Fetch-Site": {"none"}}},
		{name: "same-site with a matching origin", method: "POST", host: "127.0.0.1:9901",
			headers: map[string][]string{"Origin": {"http://127.0.0.1:9901"}, "Sec-Fetch-Site": {"same-site"}}},

		{name: "foreign origin", method: "POST", host: "127.0.0.1:9901", refuse: true,
			headers: map[string][]string{"Origin": {"https://evil.example"}},
			body:    "cross-origin request refused: https://evil.example\n"},
		{name: "same host, another port", method: "POST", host: "127.0.0.1:9901", refuse: true,
			headers: map[string][]string{"Origin": {"http://127.0.0.1:8080"}, "Sec-Fetch-Site": {"same-site"}},
			body:    "cross-origin request refused: http://127.0.0.1:8080\n"},
		{name: "origin without port against a non-default port", method: "POST", host: "127.0.0.1:9901", refuse: true,
			headers: map[string][]string{"Origin": {"http://127.0.0.1"}},
			body:    "cross-origin request refused: http://127.0.0.1\n"},
		{name: "localhost page against 127.0.0.1", method: "POST", host: "127.0.0.1:9901", refuse: true,
			headers: map[string][]string{"Origin": {"http://localhost:9901"}},
			body:    "cross-origin request refused: http://localhost:9901\n"},
		{name: "opaque null origin", method: "POST", host: "127.0.0.1:9901", refuse: true,
			headers: map[string][]string{"Origin": {"null"}},
			body:    "cross-origin request refused: null\n"},
		{name: "unparsable origin", method: "POST", host: "127.0.0.1:9901", refuse: true,
			headers: map[string][]string{"Origin": {"http://%zz"}},
			body:    "cross-origin request refused: http://%zz\n"},
		{name: "cross-site without origin", method: "POST", host: "127.0.0.1:9901", refuse: true,
			headers: map[string][]string{"Sec-Fetch-Site": {"cross-site"}},
			body:    "cross-origin request refused: Sec-Fetch-Site: cross-site\n"},
		{name: "cross-site even with a matching origin", method: "POST", host: "127.0.0.1:9901", refuse: true,
			headers: map[string][]string{"Origin": {"http://127.0.0.1:9901"}, "Sec-Fetch-Site": {"Cross-Site"}},
			body:    "cross-origin request refused: http://127.0.0.1:9901\n"},
		{name: "same-site without origin", method: "POST", host: "127.0.0.1:9901", refuse: true,
			headers: map[string][]string{"Sec-Fetch-Site": {"same-site"}},
			body:    "cross-origin request refused: Sec-Fetch-Site: same-site\n"},
		{name: "one of two origins foreign", method: "POST", host: "127.0.0.1:9901", refuse: true,
			headers: map[string][]string{"Origin": {"http://127.0.0.1:9901", "http://evil.example"}},
			body:    "cross-origin request refused: http://127.0.0.1:9901, http://evil.example\n"},
		{name: "PUT is guarded like POST", method: "PUT", host: "127.0.0.1:9901", refuse: true,
			headers: map[string][]string{"Origin": {"http://evil.example"}},
			body:    "cross-origin request refused: http://evil.example\n"},
		{name: "scheme-relative origin", method: "POST", host: "127.0.0.1:9901", refuse: true,
			headers: map[string][]string{"Origin": {"//127.0.0.1:9901"}},
			body:    "cross-origin request refused: //127.0.0.1:9901\n"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var served, refused int
			h := RefuseCrossOrigin(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				served++
				io.WriteString(w, "OK\n")
			}), func(*http.Request) { refused++ })
			r := httptest.NewRequest(tc.method, "/quitquitquit", nil)
			r.Host = tc.host
			if tc.tls {
				r.TLS = &tls.ConnectionState{}
			}
			for k, vs := range tc.headers {
				for _, v := range vs {
					r.Header.Add(k, v)
				}
			}
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			if !tc.refuse {
				if served != 1 || refused != 0 || w.Code != http.StatusOK {
					t.Errorf("served %d, refused %d, status %d; want the request passed through", served, refused, w.Code)
				}
				return
			}
			if served != 0 || refused != 1 {
				t.Errorf("served %d, refused %d; want 0 and 1", served, refused)
			}
			if w.Code != http.StatusForbidden {
				t.Errorf("status = %d; want 403", w.Code)
			}
			if got := w.Body.String(); got != tc.body {
				t.Errorf("body = %q; want %q", got, tc.body)
			}
			if got := w.Header().Get("Content-Type"); got != "text/plain; charset=UTF-8" {
				t.Errorf("Content-Type = %q; want text/plain; charset=UTF-8", got)
			}
		})
	}
}

// TestRefuseCrossOriginServer drives the wrapper around the real admin
// server: a cross-origin /quitquitquit never reaches the endpoint, a plain
// one does.
func TestRefuseCrossOriginServer(t *testing.T) {
	quits := 0
	reg := NewRegistry()
	if err := reg.Register(Endpoint{Path: "/quitquitquit", Help: "exit the server", Mutates: true,
		Handle: func(w http.ResponseWriter, _ *http.Request, _ Query) { quits++; io.WriteString(w, "OK\n") }}); err != nil {
		t.Fatal(err)
	}
	var refusals []string
	srv := httptest.NewServer(RefuseCrossOrigin(New(Config{}, reg), func(r *http.Request) {
		refusals = append(refusals, r.Method+" "+r.URL.Path)
	}))
	defer srv.Close()
	post := func(origin string) (int, string) {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/quitquitquit", nil)
		if origin != "" {
			req.Header.Set("Origin", origin)
		}
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := post("http://attacker.example:8000"); code != http.StatusForbidden || !strings.HasPrefix(body, "cross-origin request refused: ") {
		t.Errorf("cross-origin POST = %d %q; want 403 refusal", code, body)
	}
	if quits != 0 {
		t.Errorf("quit handler ran %d times after a cross-origin POST; want 0", quits)
	}
	if code, _ := post(srv.URL); code != http.StatusOK {
		t.Errorf("same-origin POST = %d; want 200", code)
	}
	if code, _ := post(""); code != http.StatusOK {
		t.Errorf("POST without Origin = %d; want 200", code)
	}
	if quits != 2 {
		t.Errorf("quit handler ran %d times; want 2", quits)
	}
	if want := []string{"POST /quitquitquit"}; strings.Join(refusals, "|") != strings.Join(want, "|") {
		t.Errorf("onRefuse saw %v; want %v", refusals, want)
	}
}

func FuzzCrossOrigin(f *testing.F) {
	for _, s := range []string{"http://127.0.0.1:9901", "null", "http://[::1]:9901", "https://x", "http://%zz", "//a:1", "http://u@127.0.0.1:9901"} {
		f.Add(s, "127.0.0.1:9901")
	}
	f.Fuzz(func(t *testing.T, origin, host string) {
		r := httptest.NewRequest(http.MethodPost, "/", nil)
		r.Host = host
		r.Header.Set("Origin", origin)
		_, refuse := crossOrigin(r)
		if !refuse && !strings.Contains(strings.ToLower(origin), strings.ToLower(strings.Trim(hostOnly(host), "[]"))) {
			t.Errorf("origin %q accepted for Host %q", origin, host)
		}
		r.Header.Del("Origin")
		if _, refuse := crossOrigin(r); refuse {
			t.Errorf("request without Origin refused")
		}
	})
}

func hostOnly(hostport string) string {
	h, _ := splitHostPort(hostport, "")
	return h
}
