package admin

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
)

func TestHostPolicy(t *testing.T) {
	bound := &net.TCPAddr{IP: net.ParseIP("127.0.0.1"), Port: 9901}
	boundV4 := &net.TCPAddr{IP: net.ParseIP("192.0.2.7"), Port: 9901}
	hostname, _ := os.Hostname()
	tests := []struct {
		name  string
		bound net.Addr
		extra []string
		host  string
		allow bool
	}{
		{"loopback address", bound, nil, "127.0.0.1:9901", true},
		{"other loopback address", bound, nil, "127.8.9.10:9901", true},
		{"IPv6 loopback", bound, nil, "[::1]:9901", true},
		{"localhost any case", bound, nil, "LocalHost:9901", true},
		{"localhost with a trailing dot", bound, nil, "localhost.:9901", true},
		{"no Host (HTTP/1.0)", bound, nil, "", true},
		{"the machine's hostname", bound, nil, hostname + ":9901", hostname != ""},
		{"the bound address", boundV4, nil, "192.0.2.7:9901", true},
		{"a rebound name", bound, nil, "evil.example:9901", false},
		{"a rebound name without port", bound, nil, "evil.example", false},
		{"another machine's address", boundV4, nil, "192.0.2.8:9901", false},
		{"a subdomain of localhost is a name like any other", bound, nil, "a.localhost:9901", false},
		{"a name the operator allowed", bound, []string{"Admin.Internal"}, "admin.internal:9901", true},
		{"an IPv6 address the operator allowed", bound, []string{"[2001:db8::1]"}, "[2001:db8::1]:9901", true},
		{"a name the operator did not allow", bound, []string{"admin.internal"}, "evil.example:9901", false},
		{"any name allowed", bound, []string{"*"}, "evil.example:9901", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := newHostPolicy(tc.bound, tc.extra).allows(tc.host); got != tc.allow {
				t.Errorf("allows(%q) = %v; want %v", tc.host, got, tc.allow)
			}
		})
	}
}

func TestHostPolicyBoundToAll(t *testing.T) {
	p := newHostPolicy(&net.TCPAddr{IP: net.IPv4zero, Port: 9901}, nil)
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Skip("no interface addresses:", err)
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && !p.allows(net.JoinHostPort(n.IP.String(), "9901")) {
			t.Errorf("interface address %s refused for an admin bound to 0.0.0.0", n.IP)
		}
	}
	if p.allows("198.51.100.1:9901") {
		t.Errorf("an address of no interface allowed")
	}
}

func TestParseAllowedHosts(t *testing.T) {
	got := ParseAllowedHosts(" admin.internal, ,*,proxy-1 ")
	if want := "admin.internal|*|proxy-1"; strings.Join(got, "|") != want {
		t.Errorf("ParseAllowedHosts = %q; want %q", got, want)
	}
	if got := ParseAllowedHosts(""); got != nil {
		t.Errorf("ParseAllowedHosts(\"\") = %q; want nil", got)
	}
}

// TestRefuseForeignHostServer drives the admin server over a socket with the
// DNS-rebinding request of issue 18: Host and Origin both name the attacker.
func TestRefuseForeignHostServer(t *testing.T) {
	quits := 0
	reg := NewRegistry()
	if err := reg.Register(Endpoint{Path: "/quitquitquit", Help: "exit the server", Mutates: true,
		Handle: func(w http.ResponseWriter, _ *http.Request, _ Query) { quits++; io.WriteString(w, "OK\n") }}); err != nil {
		t.Fatal(err)
	}
	if err := reg.Register(Endpoint{Path: "/config_dump", Help: "dump",
		Handle: func(w http.ResponseWriter, _ *http.Request, _ Query) { io.WriteString(w, "{}\n") }}); err != nil {
		t.Fatal(err)
	}
	var refused []string
	s := New(Config{Address: "127.0.0.1:0", OnForeignHost: func(r *http.Request) { refused = append(refused, r.Host) }}, reg)
	if err := s.Listen(); err != nil {
		t.Fatal(err)
	}
	go s.Serve()
	defer s.Shutdown(t.Context())
	addr := s.Addr().String()
	_, port, _ := net.SplitHostPort(addr)
	do := func(method, path, host, origin string) (int, string) {
		req := httptest.NewRequest(method, "http://"+addr+path, nil)
		req.RequestURI = ""
		req.Host = host
		if origin != "" {
			req.Header.Set("Origin", origin)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	evil := "evil.example:" + port
	wantBody := `admin request refused: Host "` + evil + `" is not an address of this admin (allow it with LEGATE_ADMIN_ALLOWED_HOSTS)` + "\n"
	if code, body := do("POST", "/quitquitquit", evil, "http://"+evil); code != http.StatusForbidden || body != wantBody {
		t.Errorf("rebound POST /quitquitquit = %d %q; want 403 %q", code, body, wantBody)
	}
	if code, _ := do("GET", "/config_dump", evil, ""); code != http.StatusForbidden {
		t.Errorf("rebound GET /config_dump = %d; want 403", code)
	}
	if quits != 0 {
		t.Errorf("quit handler ran %d times; want 0", quits)
	}
	if code, _ := do("POST", "/quitquitquit", "localhost:"+port, "http://localhost:"+port); code != http.StatusOK {
		t.Errorf("POST /quitquitquit from localhost = %d; want 200", code)
	}
	if code, _ := do("GET", "/config_dump", addr, ""); code != http.StatusOK {
		t.Errorf("GET /config_dump by address = %d; want 200", code)
	}
	if strings.Join(refused, "|") != evil+"|"+evil {
		t.Errorf("OnForeignHost saw %q; want the two rebound requests", refused)
	}
}
