package lua

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"

	"golang.org/x/net/http2"

	"github.com/legateproxy/legate/httpproxy/filters/filtertest"
	"github.com/legateproxy/legate/internal/registry"
)

// grpcUpstream serves prior-knowledge HTTP/2 (h2c) with x/net/http2 on 127.0.0.1: it answers
// "reply" with gRPC-style trailers (grpc-status 7, grpc-message denied), or without trailers
// for the path /plain, and echoes the request's body length and trailers it got as
// "Echo-Length" and "Echo-Trailer-<name>" headers. It returns its address.
func grpcUpstream(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, _ := io.Copy(io.Discard, r.Body)
		w.Header().Set("Echo-Length", fmt.Sprint(n))
		for k, vs := range r.Trailer {
			w.Header()["Echo-Trailer-"+k] = vs
		}
		if r.URL.Path != "/plain" {
			w.Header().Set("Trailer", "Grpc-Status, Grpc-Message")
		}
		io.WriteString(w, "reply")
		if r.URL.Path != "/plain" {
			w.Header().Set("Grpc-Status", "7")
			w.Header().Set("Grpc-Message", "denied")
		}
	})
	srv := &http2.Server{}
	var wg sync.WaitGroup
	t.Cleanup(func() {
		ln.Close()
		wg.Wait()
	})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				srv.ServeConn(c, &http2.ServeConnOpts{Handler: h})
			}()
		}
	}()
	return ln.Addr().String()
}

// h2cClient is an x/net/http2 client speaking prior-knowledge HTTP/2 over plain TCP.
func h2cClient(t *testing.T) *http.Client {
	tr := &http2.Transport{AllowHTTP: true, DialTLSContext: func(ctx context.Context, network, addr string, _ *tls.Config) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, network, addr)
	}}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: filtertest.Wait}
}

// TestTrailers: trailers() waits for the body's end. In envoy_on_response it gives the
// HTTP/2 upstream's trailers, which the script reads, iterates, changes and adds to: the
// HTTP/2 client gets the changed trailers, with the body, and a header the script set from a
// trailer (the headers are held for it). In envoy_on_request it gives the HTTP/2 client's
// trailers, whose change the upstream gets with the body. A stream without trailers gives nil.
func TestTrailers(t *testing.T) {
	p := filtertest.Start(t, filtertest.Options{
		Clusters: []string{filtertest.StaticCluster("web", "http2_protocol_options: {}", grpcUpstream(t))},
		Register: []func(*registry.Builder){Register},
		HCM: luaHCM(`
    inline_code: |
      function envoy_on_request(handle)
        local t = handle:trailers()
        if t == nil then return end
        handle:headers():add("x-req-trailer", t:get("x-client"))
        t:replace("x-client", "changed " .. t:get("x-client"))
        handle:headers():add("x-req-body", handle:body():length())
      end
      function envoy_on_response(handle)
        local t = handle:trailers()
        if t == nil then
          handle:headers():add("x-trailers", "none")
          return
        end
        local names = ""
        for k, v in pairs(t) do names = names .. k .. "=" .. v .. ";" end
        handle:headers():add("x-trailers", names)
        t:add("x-lua-status", "seen " .. t:get("grpc-status"))
        t:replace("grpc-message", "changed")
        handle:headers():add("x-body", handle:body():getBytes(0, 5))
      end`, ""),
	})
	c := h2cClient(t)
	resp, body := p.Get(c, "/svc/Method")
	if resp.ProtoMajor != 2 || resp.StatusCode != 200 || body != "reply" {
		t.Fatalf("GET = %s %d %q; want HTTP/2 200 reply", resp.Proto, resp.StatusCode, body)
	}
	if got := resp.Header.Get("X-Trailers"); got != "grpc-message=denied;grpc-status=7;" {
		t.Errorf("x-trailers = %q; want the upstream's trailers as the script iterated them", got)
	}
	if got := resp.Header.Get("X-Body"); got != "reply" {
		t.Errorf("x-body = %q; want body() after trailers() to give the body", got)
	}
	for k, want := range map[string]string{"Grpc-Status": "7", "Grpc-Message": "changed", "X-Lua-Status": "seen 7"} {
		if got := resp.Trailer.Get(k); got != want {
			t.Errorf("trailer %s = %q; want %q (trailers %v)", k, got, want, resp.Trailer)
		}
	}
	resp, body = p.Get(c, "/plain")
	if body != "reply" || resp.Header.Get("X-Trailers") != "none" || len(resp.Trailer) != 0 {
		t.Errorf("GET /plain = %q x-trailers %q trailers %v; want nil from trailers() and no trailers", body, resp.Header.Get("X-Trailers"), resp.Trailer)
	}

	req, err := http.NewRequest(http.MethodPost, "http://"+p.Addr+"/svc/Upload", strings.NewReader("request body"))
	if err != nil {
		t.Fatal(err)
	}
	req.Trailer = http.Header{"X-Client": {"c1"}}
	resp, _ = p.Do(c, req)
	for k, want := range map[string]string{"Echo-Trailer-X-Client": "changed c1", "Echo-Length": "12"} {
		if got := resp.Header.Get(k); got != want {
			t.Errorf("POST: upstream's %s = %q; want %q (headers %v)", k, got, want, resp.Header)
		}
	}
	if got := p.Stat("http.ingress.lua.errors"); got != 0 {
		t.Errorf("lua.errors = %d; want 0", got)
	}
}

// TestKeptHeaderString: a header value a script keeps in a global stays what it read after
// later requests on the same HTTP/1 connection (whose header strings the connection manager
// reuses the memory of).
func TestKeptHeaderString(t *testing.T) {
	p := startLua(t, `
    inline_code: |
      function envoy_on_request(handle)
        local h = handle:headers()
        if kept == nil then
          kept = h:get("x-v")
          check = string.upper(kept)
        end
        if string.upper(kept) ~= check then
          h:add("x-corrupt", kept)
        end
      end`, "")
	c := p.Client()
	for i := range 100 {
		v := fmt.Sprintf("value-%03d", i)
		resp, _ := p.Get(c, "/"+v, "x-v", v)
		if got := resp.Header.Get("Echo-X-Corrupt"); got != "" {
			t.Fatalf("request %d: a kept header value changed to %q", i, got)
		}
	}
}
