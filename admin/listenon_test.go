package admin

import (
	"context"
	"io"
	"net"
	"net/http"
	"testing"
)

// TestListenOnInheritedSocket serves on a socket bound elsewhere, as a
// hot-restart child does with the admin socket its parent passed on.
func TestListenOnInheritedSocket(t *testing.T) {
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	reg := NewRegistry()
	if err := reg.Register(Endpoint{Path: "/ready", Help: "ready", Handle: func(w http.ResponseWriter, _ *http.Request, _ Query) {
		io.WriteString(w, "LIVE\n")
	}}); err != nil {
		t.Fatal(err)
	}
	srv := New(Config{Address: "127.0.0.1:9"}, reg) // Address is not bound
	srv.ListenOn(ln)
	if srv.Listener() != ln || srv.Addr().String() != ln.Addr().String() {
		t.Errorf("Listener() = %v, Addr() = %v; want the given socket %v", srv.Listener(), srv.Addr(), ln.Addr())
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve() }()
	resp, err := http.Get("http://" + ln.Addr().String() + "/ready")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(body) != "LIVE\n" {
		t.Errorf("GET /ready = %q; want LIVE", body)
	}
	srv.Shutdown(context.Background())
	if err := <-served; err != nil {
		t.Errorf("Serve() = %v; want nil after Shutdown", err)
	}
}
