package admin

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseQuery(t *testing.T) {
	tests := []struct {
		name string
		raw  string
		want Query
	}{
		{"empty", "", Query{}},
		{"flag without value", "usedonly", Query{"usedonly": {""}}},
		{"split at first equals", "filter=a=b", Query{"filter": {"a=b"}}},
		{"percent decoded, plus kept", "filter=a%2Bb+c%3d", Query{"filter": {"a+b+c="}}},
		{"bad escape kept", "x=%zz%4", Query{"x": {"%zz%4"}}},
		{"repeated keys kept in order", "a=1&a=2&b", Query{"a": {"1", "2"}, "b": {""}}},
		{"empty pieces skipped", "&&a=1&", Query{"a": {"1"}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, ParseQuery(tc.raw)); diff != "" {
				t.Errorf("ParseQuery(%q) (-want +got):\n%s", tc.raw, diff)
			}
		})
	}
	q := ParseQuery("format=&usedonly=0&a=1&a=2")
	if _, ok := q.NonEmpty("format"); ok {
		t.Error("NonEmpty(format) true for an empty value")
	}
	if !q.Has("usedonly") {
		t.Error("Has(usedonly) false for usedonly=0; Envoy's flags count presence")
	}
	if got := q.Get("a"); got != "1" {
		t.Errorf("Get(a) = %q, want the first value", got)
	}
}

func FuzzParseQuery(f *testing.F) {
	for _, s := range []string{"", "a=b&c", "%41=%zz", "filter=^x$&&=", "a=%"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		q := ParseQuery(raw)
		for k, vs := range q {
			if len(vs) == 0 {
				t.Errorf("key %q with no values", k)
			}
		}
	})
}

func testServer(t *testing.T, eps ...Endpoint) (*httptest.Server, *Registry) {
	t.Helper()
	reg := NewRegistry()
	for _, e := range append(HomeEndpoints(reg), eps...) {
		if err := reg.Register(e); err != nil {
			t.Fatal(err)
		}
	}
	srv := httptest.NewServer(New(Config{}, reg))
	t.Cleanup(srv.Close)
	return srv, reg
}

func fetch(t *testing.T, method, url, contentType, body string) (int, http.Header, string) {
	t.Helper()
	req, _ := http.NewRequestWithContext(context.Background(), method, url, strings.NewReader(body))
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(b)
}

func TestRouting(t *testing.T) {
	var calls int
	var lastQuery Query
	mutate := Endpoint{Path: "/mutate", Help: "change things", Mutates: true, Handle: func(w http.ResponseWriter, _ *http.Request, q Query) {
		calls++
		lastQuery = q
		io.WriteString(w, "OK\n")
	}}
	read := Endpoint{Path: "/stats", Help: "read things", QueryOnly: true, Handle: func(w http.ResponseWriter, _ *http.Request, q Query) {
		lastQuery = q
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, "{}")
	}}
	srv, reg := testServer(t, mutate, read)

	t.Run("GET on a mutation is 400 with no effect", func(t *testing.T) {
		for _, m := range []string{http.MethodGet, http.MethodPut, http.MethodHead} {
			code, _, body := fetch(t, m, srv.URL+"/mutate", "", "")
			if code != http.StatusBadRequest {
				t.Errorf("%s /mutate = %d, want 400", m, code)
			}
			if m == http.MethodGet && body != "Method GET not allowed, POST required." {
				t.Errorf("body = %q", body)
			}
		}
		if calls != 0 {
			t.Errorf("handler ran %d times for refused methods", calls)
		}
	})
	t.Run("POST runs the mutation with form-body parameters", func(t *testing.T) {
		code, _, _ := fetch(t, http.MethodPost, srv.URL+"/mutate", "application/x-www-form-urlencoded", "level=debug")
		if code != 200 || calls != 1 {
			t.Fatalf("POST /mutate = %d, calls %d", code, calls)
		}
		if diff := cmp.Diff(Query{"level": {"debug"}}, lastQuery); diff != "" {
			t.Errorf("query (-want +got):\n%s", diff)
		}
	})
	t.Run("QueryOnly endpoints ignore the form body", func(t *testing.T) {
		fetch(t, http.MethodPost, srv.URL+"/stats", "application/x-www-form-urlencoded", "filter=x")
		if len(lastQuery) != 0 {
			t.Errorf("query = %v, want none", lastQuery)
		}
	})
	t.Run("default headers and handler content type", func(t *testing.T) {
		_, h, _ := fetch(t, http.MethodGet, srv.URL+"/stats", "", "")
		want := map[string]string{"Content-Type": "application/json", "Cache-Control": "no-cache, max-age=0", "X-Content-Type-Options": "nosniff"}
		for k, v := range want {
			if got := h.Get(k); got != v {
				t.Errorf("%s = %q, want %q", k, got, v)
			}
		}
	})
	t.Run("unknown path is 404 with help", func(t *testing.T) {
		code, h, body := fetch(t, http.MethodGet, srv.URL+"/stats/", "", "")
		if code != 404 || body != "invalid path. "+reg.HelpText() {
			t.Errorf("GET /stats/ = %d %q", code, body)
		}
		if h.Get("Content-Type") != "text/plain; charset=UTF-8" {
			t.Errorf("404 Content-Type = %q", h.Get("Content-Type"))
		}
	})
	t.Run("duplicate registration is an error", func(t *testing.T) {
		if err := reg.Register(read); err == nil {
			t.Error("registering /stats twice succeeded")
		}
	})
}

func TestHelpText(t *testing.T) {
	reg := NewRegistry()
	noop := func(http.ResponseWriter, *http.Request, Query) {}
	reg.Register(Endpoint{Path: "/z", Help: "last", Handle: noop})
	reg.Register(Endpoint{Path: "/logging", Help: "query/change logging levels", Mutates: true, Handle: noop, Params: []Param{
		{Name: "level", Help: "desired logging level", Kind: ParamEnum, Choices: []string{"", "trace", "debug"}},
		{Name: "paths", Help: "several", Kind: ParamString},
	}})
	want := "admin commands are:\n" +
		"  /logging (POST): query/change logging levels\n" +
		"      level: desired logging level; One of (, trace, debug)\n" +
		"      paths: several\n" +
		"  /z: last\n"
	if got := reg.HelpText(); got != want {
		t.Errorf("HelpText() =\n%s\nwant\n%s", got, want)
	}
}

func TestHomePage(t *testing.T) {
	noop := func(http.ResponseWriter, *http.Request, Query) {}
	srv, _ := testServer(t,
		Endpoint{Path: "/quitquitquit", Help: "exit the server", Mutates: true, Handle: noop},
		Endpoint{Path: "/stats", Help: "print <server> stats", Handle: noop, Params: []Param{{Name: "usedonly", Help: "only used", Kind: ParamBool}}},
	)
	_, _, body := fetch(t, http.MethodGet, srv.URL+"/", "", "")
	for _, want := range []string{
		"<!DOCTYPE html>\n<html lang='en'>\n<head>\n",
		"<a href='help'>help</a>",
		"<form action='quitquitquit' method='post' id='quitquitquit' class='home-form'>\n    <button>quitquitquit</button>\n  </form>",
		"<form action='stats' method='get' id='stats' class='home-form'>\n    <button class='button-as-link'>stats</button>",
		"print &lt;server&gt; stats",
		// "/" is index 1, /help 2, /quitquitquit 3, /stats 4.
		"<input type='checkbox' name='usedonly' id='param-4-stats-usedonly' form='stats'>",
		"</body>\n</html>\n",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("home page lacks %q", want)
		}
	}
}

func TestLoopbackWarning(t *testing.T) {
	tests := []struct {
		addr net.Addr
		want bool
	}{
		{&net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)}, true},
		{&net.TCPAddr{IP: net.IPv6loopback}, true},
		{&net.TCPAddr{IP: net.IPv4zero}, false},
		{&net.TCPAddr{IP: net.IPv4(192, 0, 2, 1)}, false},
		{&net.UnixAddr{Name: "/tmp/x"}, false},
	}
	for _, tc := range tests {
		if got := loopback(tc.addr); got != tc.want {
			t.Errorf("loopback(%v) = %v, want %v", tc.addr, got, tc.want)
		}
	}
	var warned []string
	srv := New(Config{Address: "localhost:0", Warnf: func(f string, a ...any) { warned = append(warned, f) }}, NewRegistry())
	if err := srv.Listen(); err != nil {
		t.Fatal(err)
	}
	defer srv.Shutdown(context.Background())
	if len(warned) != 0 {
		t.Errorf("binding localhost warned: %v", warned)
	}
}

// A slow handler must not delay /ready: every request has its own goroutine.
func TestSlowHandlerDoesNotBlockReady(t *testing.T) {
	release := make(chan struct{})
	entered := make(chan struct{})
	slow := Endpoint{Path: "/slow", Help: "blocks", Handle: func(w http.ResponseWriter, _ *http.Request, _ Query) {
		close(entered)
		<-release
	}}
	ready := Endpoint{Path: "/ready", Help: "ready", Handle: func(w http.ResponseWriter, _ *http.Request, _ Query) {
		io.WriteString(w, "LIVE\n")
	}}
	srv, _ := testServer(t, slow, ready)
	done := make(chan struct{})
	go func() {
		defer close(done)
		fetch(t, http.MethodGet, srv.URL+"/slow", "", "")
	}()
	<-entered
	if code, _, body := fetch(t, http.MethodGet, srv.URL+"/ready", "", ""); code != 200 || body != "LIVE\n" {
		t.Errorf("/ready while /slow runs = %d %q", code, body)
	}
	close(release)
	<-done
}
