package lua

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	luav3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/lua/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/legateproxy/legate/httpproxy/filter"
	"github.com/legateproxy/legate/httpproxy/filters/filtertest"
	"github.com/legateproxy/legate/httpproxy/route"
	"github.com/legateproxy/legate/internal/nettest"
	"github.com/legateproxy/legate/internal/registry"
)

func anyOf(t testing.TB, y string, m proto.Message) *anypb.Any {
	t.Helper()
	filtertest.FromYAML(t, y, m)
	a, err := anypb.New(m)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func TestConfig(t *testing.T) {
	for _, tc := range []struct{ yaml, want string }{
		{`inline_code: "function envoy_on_request(h) h:headers(:add() end"`, "inline_code: inline_code line:1"},
		{`inline_code: "error('at load')"`, "inline_code: inline_code:1: at load"},
		{`inline_code: "x = 1"
default_source_code: {inline_string: "y = 1"}`, "only one of inline_code and default_source_code may be set"},
		{`clear_route_cache: false`, "clear_route_cache: false is not implemented by Legate"},
		{`source_codes: {a: {filename: /nonexistent/legate.lua}}`, `source_codes["a"].filename: open /nonexistent/legate.lua`},
		{`source_codes: {a: {inline_string: "end"}}`, `source_codes["a"]: a line:1`},
		{`default_source_code: {environment_variable: X}`, "default_source_code: *corev3.DataSource_EnvironmentVariable is not implemented by Legate"},
	} {
		if _, err := FromAny(anyOf(t, tc.yaml, &luav3.Lua{}), nil); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("FromAny(%s) = %v; want an error containing %q", tc.yaml, err, tc.want)
		}
	}
	for _, tc := range []struct{ yaml, want string }{
		{`source_code: {inline_string: "function envoy_on_request("}`, "typed_per_filter_config.source_code: route source_code"},
		{`{name: x, filter_context: {}}`, "typed_per_filter_config.filter_context: not implemented by Legate"},
		{`{}`, "one of disabled, name and source_code is required"},
	} {
		if _, err := PerRouteFromAny(anyOf(t, tc.yaml, &luav3.LuaPerRoute{})); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("PerRouteFromAny(%s) = %v; want an error containing %q", tc.yaml, err, tc.want)
		}
	}
	f, err := FromAny(anyOf(t, `inline_code: "function envoy_on_response(h) end"
clear_route_cache: true`, &luav3.Lua{}), nil)
	if err != nil {
		t.Fatal(err)
	}
	if f.def.hasRequest || !f.def.hasResponse {
		t.Errorf("script has request %v response %v; want only envoy_on_response", f.def.hasRequest, f.def.hasResponse)
	}
	f.Close()
}

// echoUpstream serves on 127.0.0.1: it answers 200 with "upstream <method> <path>
// <body>", echoing the request headers as "Echo-<name>" response headers.
func echoUpstream(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for k, vs := range r.Header {
			w.Header()["Echo-"+k] = vs
		}
		b, _ := io.ReadAll(r.Body)
		fmt.Fprintf(w, "upstream %s %s %s", r.Method, r.URL.Path, b)
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return ln.Addr().String()
}

// luaHCM is a connection manager running the Lua filter configured by filterYAML (indented
// fields of its typed_config) with routes (YAML list items, the last a catch-all to web).
func luaHCM(filterYAML, routes string) string {
	return `stat_prefix: ingress
route_config:
  virtual_hosts:
  - name: all
    domains: ["*"]
    routes:
` + routes + `
    - match: {prefix: "/"}
      route: {cluster: web}
http_filters:
- name: envoy.filters.http.lua
  typed_config:
    "@type": type.googleapis.com/envoy.extensions.filters.http.lua.v3.Lua
` + filterYAML + `
- name: envoy.filters.http.router
  typed_config: {"@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router}
`
}

func startLua(t testing.TB, filterYAML, routes string, clusters ...string) *filtertest.Proxy {
	t.Helper()
	return filtertest.Start(t, filtertest.Options{
		Clusters: append([]string{filtertest.StaticCluster("web", "", echoUpstream(t))}, clusters...),
		Register: []func(*registry.Builder){Register},
		HCM:      luaHCM(filterYAML, routes),
	})
}

const headersScript = `
    inline_code: |
      function envoy_on_request(handle)
        local h = handle:headers()
        h:add("x-lua-added", "yes")
        h:replace("x-replace", "new")
        h:remove("x-remove")
        handle:streamInfo():dynamicMetadata():set("acme", "path", h:get(":path"))
        handle:streamInfo():dynamicMetadata():set("acme", "n", h:getNumValues("x-multi"))
        if h:get(":path") == "/deny" then
          handle:respond({[":status"] = "403", ["x-why"] = "lua", ["content-type"] = "text/lua"}, "denied by lua")
        end
        if h:get(":path") == "/error" then
          error("boom")
        end
        if h:get(":path") == "/rewrite" then
          h:replace(":path", "/rewritten")
        end
        h:add("x-req-trailers", tostring(handle:trailers()))
      end
      function envoy_on_response(handle)
        local h = handle:headers()
        h:add("x-status-seen", h:get(":status"))
        local md = handle:streamInfo():dynamicMetadata():get("acme")
        if md then
          h:add("x-path-md", md.path .. " " .. md.n)
        end
        h:add("x-trailers", tostring(handle:trailers()))
        local ok, err = pcall(function() handle:clearRouteCache() end)
        h:add("x-unimplemented", tostring(err))
      end`

// TestHeaders drives a script through a listener with a real upstream: header changes reach
// the upstream, respond() answers with its status, headers and body, a Lua error is counted
// and the request goes on, :path rewrites route the request, dynamic metadata set on the
// request is read on the response, trailers() is nil for a request and a response without
// trailers, and an unimplemented method raises a Lua error naming it.
func TestHeaders(t *testing.T) {
	p := startLua(t, headersScript, "")
	c := p.Client()
	resp, body := p.Get(c, "/a", "x-replace", "old", "x-remove", "gone", "x-multi", "1", "x-multi", "2")
	if resp.StatusCode != 200 || body != "upstream GET /a " {
		t.Fatalf("GET /a = %d %q; want 200 from the upstream", resp.StatusCode, body)
	}
	for k, want := range map[string]string{
		"Echo-X-Lua-Added": "yes", "Echo-X-Replace": "new", "Echo-X-Remove": "",
		"X-Status-Seen": "200", "X-Path-Md": "/a 2",
		"Echo-X-Req-Trailers": "nil",
		"X-Trailers":          "nil", "X-Unimplemented": "inline_code:27: handle:clearRouteCache() is not implemented by Legate",
	} {
		if got := resp.Header.Get(k); got != want {
			t.Errorf("GET /a: %s = %q; want %q", k, got, want)
		}
	}
	resp, body = p.Get(c, "/deny")
	if resp.StatusCode != 403 || body != "denied by lua" || resp.Header.Get("X-Why") != "lua" ||
		strings.Join(resp.Header.Values("Content-Type"), ",") != "text/lua" || resp.Header.Get("X-Status-Seen") != "" {
		t.Errorf("GET /deny = %d %q %v; want the script's 403 reply, no response script", resp.StatusCode, body, resp.Header)
	}
	resp, body = p.Get(c, "/error")
	if resp.StatusCode != 200 || body != "upstream GET /error " || resp.Header.Get("Echo-X-Lua-Added") != "yes" {
		t.Errorf("GET /error = %d %q; want the request to go on after the error, with the changes made before it", resp.StatusCode, body)
	}
	if got := p.Stat("http.ingress.lua.errors"); got != 1 {
		t.Errorf("http.ingress.lua.errors = %d; want 1", got)
	}
	if resp, body = p.Get(c, "/rewrite"); body != "upstream GET /rewritten " {
		t.Errorf("GET /rewrite = %d %q; want the upstream to see /rewritten", resp.StatusCode, body)
	}
}

// TestIterationAndInfo: pairs() walks the headers and the dynamic metadata, streamInfo
// reports the connection, and metadata() reads the route's filter_metadata under the
// filter's name.
func TestIterationAndInfo(t *testing.T) {
	p := startLua(t, `
    inline_code: |
      function envoy_on_request(handle)
        local seen = {}
        for k, v in pairs(handle:headers()) do
          if k:sub(1, 1) == ":" or k:sub(1, 3) == "x-i" then
            seen[#seen + 1] = k .. "=" .. v
          end
        end
        local si = handle:streamInfo()
        si:dynamicMetadata():set("b", "k", {1, 2})
        si:dynamicMetadata():set("a", "k", {nested = true})
        local ns = {}
        for name, t in pairs(si:dynamicMetadata()) do
          ns[#ns + 1] = name
        end
        local h = handle:headers()
        h:add("x-seen", table.concat(seen, ";"))
        h:add("x-ns", table.concat(ns, ","))
        h:add("x-proto", si:protocol())
        h:add("x-remote", si:downstreamDirectRemoteAddress())
        h:add("x-route", si:routeName())
        h:add("x-ssl", tostring(handle:connection():ssl()))
        h:add("x-md", tostring(handle:metadata():get("team")))
        h:add("x-b64", handle:base64Escape("hi!"))
        h:add("x-ts", tostring(handle:timestamp() > 0))
      end`, `    - match: {prefix: "/md"}
      name: md-route
      route: {cluster: web}
      metadata: {filter_metadata: {envoy.filters.http.lua: {team: core}}}`)
	resp, _ := p.Get(p.Client(), "/md", "x-i1", "a", "x-i1", "b", "x-i0", "c")
	for k, want := range map[string]string{
		"Echo-X-Seen":  ":authority=" + p.Addr + ";:path=/md;:method=GET;:scheme=http;x-i0=c;x-i1=a;x-i1=b",
		"Echo-X-Ns":    "a,b",
		"Echo-X-Proto": "HTTP/1.1", "Echo-X-Route": "md-route", "Echo-X-Ssl": "nil", "Echo-X-Md": "core",
		"Echo-X-B64": "aGkh", "Echo-X-Ts": "true",
	} {
		if got := resp.Header.Get(k); got != want {
			t.Errorf("%s = %q; want %q", k, got, want)
		}
	}
	if got := resp.Header.Get("Echo-X-Remote"); !strings.HasPrefix(got, "127.0.0.1:") {
		t.Errorf("downstreamDirectRemoteAddress = %q; want 127.0.0.1:port", got)
	}
}

// TestBody: body() reads the request body whole, which still reaches the upstream, or
// with setBytes replaces it; a body over the limit answers 413; in envoy_on_response body()
// gives the response body, whose setBytes replaces what the client gets, the headers held
// for the script after it, and the stream's info out of reach (a Lua error, counted).
func TestBody(t *testing.T) {
	p := startLua(t, `
    inline_code: |
      function envoy_on_request(handle)
        local path = handle:headers():get(":path")
        handle:streamInfo():dynamicMetadata():set("t", "path", path)
        local b = handle:body()
        if b == nil then
          handle:headers():add("x-body", "none")
          return
        end
        local chunks = 0
        for c in handle:bodyChunks() do chunks = chunks + 1 end
        handle:headers():add("x-body", b:length() .. " " .. b:getBytes(0, 5) .. " " .. chunks)
        if path == "/upper" then
          b:setBytes(string.upper(b:getBytes(0, b:length())))
        end
      end
      function envoy_on_response(handle)
        local path = handle:streamInfo():dynamicMetadata():get("t").path
        if path ~= "/resp" and path ~= "/late" then return end
        local b = handle:body()
        b:setBytes("rewritten(" .. b:length() .. "): " .. b:getBytes(0, b:length()))
        if path == "/late" then
          handle:headers():add("x-late", b:length())
          handle:streamInfo()
        end
      end`, "")
	c := p.Client()
	post := func(path, body string) (*http.Response, string) {
		req, _ := http.NewRequest(http.MethodPost, "http://"+p.Addr+path, strings.NewReader(body))
		return p.Do(c, req)
	}
	resp, body := post("/up", "hello lua")
	if resp.StatusCode != 200 || body != "upstream POST /up hello lua" || resp.Header.Get("Echo-X-Body") != "9 hello 1" {
		t.Errorf("POST = %d %q x-body %q; want the body upstream and x-body \"9 hello 1\"", resp.StatusCode, body, resp.Header.Get("Echo-X-Body"))
	}
	if resp, body := post("/upper", "hello lua"); body != "upstream POST /upper HELLO LUA" || resp.Header.Get("Echo-Content-Length") != "9" {
		t.Errorf("POST /upper = %q content-length %q; want the upstream to get HELLO LUA with its length", body, resp.Header.Get("Echo-Content-Length"))
	}
	if resp, _ := p.Get(c, "/none"); resp.Header.Get("Echo-X-Body") != "none" {
		t.Errorf("GET x-body = %q; want none (body() is nil without a body)", resp.Header.Get("Echo-X-Body"))
	}
	if _, body := post("/resp", "abcdef"); body != "rewritten(26): upstream POST /resp abcdef" {
		t.Errorf("POST /resp = %q; want the response body rewritten by the script", body)
	}
	resp, body = post("/late", "abcdef")
	if body != "rewritten(26): upstream POST /late abcdef" || resp.Header.Get("X-Late") != "41" || resp.ContentLength != int64(len(body)) {
		t.Errorf("POST /late = %q x-late %q length %d; want the rewritten body with its length and x-late 41, the length after setBytes (headers held for the script)", body, resp.Header.Get("X-Late"), resp.ContentLength)
	}
	if got := p.Stat("http.ingress.lua.errors"); got != 1 {
		t.Errorf("lua.errors = %d; want 1 (streamInfo after body() in envoy_on_response)", got)
	}
	if resp, body := post("/big", strings.Repeat("x", maxBody+1)); resp.StatusCode != 413 || body != "Payload Too Large" {
		t.Errorf("POST over 1 MiB = %d %q; want 413 Payload Too Large", resp.StatusCode, body)
	}
}

// TestHTTPCall: httpCall reaches a real HTTP service behind a cluster and returns its
// status, headers and body; a cluster whose host refuses connections looks like a 503
// "upstream failure"; an asynchronous call reaches the service while the request goes on.
func TestHTTPCall(t *testing.T) {
	asyncSeen := make(chan string, 1)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		if r.URL.Path == "/async" {
			asyncSeen <- string(b)
			return
		}
		if r.Header.Get("X-User") != "alice" {
			w.WriteHeader(http.StatusForbidden)
			io.WriteString(w, "who are you")
			return
		}
		w.Header().Set("X-Auth-Id", "42")
		fmt.Fprintf(w, "%s %s %s", r.Method, r.Host, b)
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	deadAddr := nettest.ClosedAddr(t)
	p := startLua(t, `
    inline_code: |
      function envoy_on_request(handle)
        local path = handle:headers():get(":path")
        if path == "/async" then
          handle:httpCall("auth", {[":method"] = "POST", [":path"] = "/async", [":authority"] = "auth"}, "fire", 5000, true)
          return
        end
        local cluster = "auth"
        if path == "/dead" then cluster = "dead" end
        local h, body = handle:httpCall(cluster, {
          [":method"] = "POST", [":path"] = "/check", [":authority"] = "auth.local",
          ["x-user"] = handle:headers():get("x-user") or "",
        }, "payload", 5000)
        if h[":status"] ~= "200" then
          handle:respond({[":status"] = h[":status"]}, body)
        end
        handle:headers():add("x-auth", h["x-auth-id"] .. " " .. body)
      end`, "",
		filtertest.StaticCluster("auth", "", ln.Addr().String()),
		filtertest.StaticCluster("dead", "", deadAddr))
	c := p.Client()
	resp, body := p.Get(c, "/ok", "x-user", "alice")
	if resp.StatusCode != 200 || resp.Header.Get("Echo-X-Auth") != "42 POST auth.local payload" {
		t.Errorf("GET /ok = %d %q x-auth %q; want 200 with the service's answer", resp.StatusCode, body, resp.Header.Get("Echo-X-Auth"))
	}
	if resp, body := p.Get(c, "/no", "x-user", "bob"); resp.StatusCode != 403 || body != "who are you" {
		t.Errorf("GET /no = %d %q; want the service's 403 passed on", resp.StatusCode, body)
	}
	if resp, body := p.Get(c, "/dead"); resp.StatusCode != 503 || body != "upstream failure" {
		t.Errorf("GET /dead = %d %q; want 503 upstream failure", resp.StatusCode, body)
	}
	if resp, body := p.Get(c, "/async"); resp.StatusCode != 200 || body != "upstream GET /async " {
		t.Errorf("GET /async = %d %q; want 200 from the upstream", resp.StatusCode, body)
	}
	select {
	case b := <-asyncSeen:
		if b != "fire" {
			t.Errorf("asynchronous call body = %q; want fire", b)
		}
	case <-timeAfter(t):
		t.Fatal("the asynchronous httpCall never reached the service")
	}
}

// TestPerRoute: a route's LuaPerRoute disables the filter, names a source_codes entry, or
// brings its own source_code; other routes run the default script.
func TestPerRoute(t *testing.T) {
	perRoute := func(prefix, cfg string) string {
		return fmt.Sprintf(`    - match: {prefix: "%s"}
      route: {cluster: web}
      typed_per_filter_config:
        envoy.filters.http.lua:
          "@type": type.googleapis.com/envoy.extensions.filters.http.lua.v3.LuaPerRoute
          %s
`, prefix, cfg)
	}
	p := startLua(t, `
    default_source_code:
      inline_string: function envoy_on_request(h) h:headers():add("x-script", "default") end
    source_codes:
      named:
        inline_string: function envoy_on_request(h) h:headers():add("x-script", "named") end`,
		perRoute("/off", "disabled: true")+perRoute("/named", "name: named")+perRoute("/missing", "name: missing")+
			perRoute("/inline", `source_code: {inline_string: 'function envoy_on_request(h) h:headers():add("x-script", "route") end'}`))
	c := p.Client()
	for path, want := range map[string]string{"/x": "default", "/off": "", "/named": "named", "/missing": "", "/inline": "route"} {
		if resp, _ := p.Get(c, path); resp.Header.Get("Echo-X-Script") != want {
			t.Errorf("GET %s ran script %q; want %q", path, resp.Header.Get("Echo-X-Script"), want)
		}
	}
}

// TestConcurrentStreams: parallel requests each see their own headers through the pool of
// states (run with -race).
func TestConcurrentStreams(t *testing.T) {
	p := startLua(t, `
    inline_code: |
      function envoy_on_request(handle)
        last = handle:headers():get("x-n")
        handle:headers():add("x-copy", last)
      end`, "")
	c := p.Client()
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 10 {
				n := fmt.Sprint(g*100 + i)
				resp, err := c.Get("http://" + p.Addr + "/?n=" + n)
				if err == nil {
					resp.Body.Close()
				}
				req, _ := http.NewRequest(http.MethodGet, "http://"+p.Addr+"/", nil)
				req.Header.Set("x-n", n)
				resp, err = c.Do(req)
				if err != nil {
					t.Error(err)
					return
				}
				resp.Body.Close()
				if got := resp.Header.Get("Echo-X-Copy"); got != n {
					t.Errorf("x-copy = %q; want %q", got, n)
				}
			}
		}()
	}
	wg.Wait()
}

// BenchmarkLua is the filter's cost for a request whose script reads one header and adds
// another, on a pooled state.
func BenchmarkLua(b *testing.B) {
	f, err := FromAny(anyOf(b, `inline_code: |
  function envoy_on_request(handle)
    local h = handle:headers()
    h:add("x-seen", h:get("x-in") or "none")
  end`, &luav3.Lua{}), nil)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	b.ReportAllocs()
	for b.Loop() {
		x := filter.Exchange{Request: &route.Request{Path: "/", Method: "GET", Header: http.Header{"X-In": {"v"}}}}
		f.OnRequest(&x)
	}
}

func timeAfter(t *testing.T) <-chan time.Time {
	t.Helper()
	return time.After(filtertest.Wait)
}

// TestStatusChange: a response script's :status change is the status the client gets (and
// the one counted); a value that is not a status code raises a Lua error and the response
// keeps its status.
func TestStatusChange(t *testing.T) {
	p := startLua(t, `
    inline_code: |
      function envoy_on_response(handle)
        local h = handle:headers()
        h:add("x-upstream-status", h:get(":status"))
        h:replace(":status", handle:streamInfo():dynamicMetadata():get("s") and "" or "418")
      end
      function envoy_on_request(handle)
        if handle:headers():get(":path") == "/bad" then
          handle:streamInfo():dynamicMetadata():set("s", "bad", "1")
        end
      end`, "")
	c := p.Client()
	resp, _ := p.Get(c, "/a")
	if resp.StatusCode != 418 || resp.Header.Get("X-Upstream-Status") != "200" {
		t.Errorf("GET /a = %d, x-upstream-status %q; want 418 after the upstream's 200", resp.StatusCode, resp.Header.Get("X-Upstream-Status"))
	}
	if got := p.Stat("http.ingress.downstream_rq_4xx"); got != 1 {
		t.Errorf("downstream_rq_4xx = %d; want 1 (the status sent is the one counted)", got)
	}
	resp, _ = p.Get(c, "/bad")
	if resp.StatusCode != 200 {
		t.Errorf("GET /bad = %d; want the upstream's 200 after the script's error", resp.StatusCode)
	}
	if got := p.Stat("http.ingress.lua.errors"); got != 1 {
		t.Errorf("http.ingress.lua.errors = %d; want 1", got)
	}
}
