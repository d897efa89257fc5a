package e2e

import (
	"net"
	"net/http"
	"strings"
	"testing"
)

// TestAdminRefusesReboundHost is issue 18's defect 1 on the binary: a page
// whose name an attacker rebinds to 127.0.0.1 sends Host and Origin both
// naming itself, which the Origin check alone lets through.
func TestAdminRefusesReboundHost(t *testing.T) {
	p := start(t, "-c", writeConfig(t, minimalConfig))
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(p.admin, "http://"))
	evil := "evil.example:" + port
	wantBody := `admin request refused: Host "` + evil + `" is not an address of this admin (allow it with LEGATE_ADMIN_ALLOWED_HOSTS)` + "\n"
	for _, r := range []struct{ method, path string }{
		{"POST", "/quitquitquit"},
		{"POST", "/runtime_modify?rebound=1"},
		{"POST", "/logging?level=trace"},
		{"POST", "/healthcheck/fail"},
		{"GET", "/config_dump"},
	} {
		if code, _, body := p.doHost(r.method, r.path, evil, "http://"+evil); code != http.StatusForbidden || body != wantBody {
			t.Errorf("rebound %s %s = %d %q; want 403 %q", r.method, r.path, code, body, wantBody)
		}
	}
	if code, _, body := p.get("/ready"); code != http.StatusOK || body != "LIVE\n" {
		t.Fatalf("after the rebound requests GET /ready = %d %q; want 200 LIVE (not quit, not failed)", code, body)
	}
	if _, _, body := p.get("/runtime"); strings.Contains(body, "rebound") {
		t.Errorf("the rebound /runtime_modify was applied:\n%s", body)
	}
	if v, _ := p.stat("admin.foreign_host_refused"); v != 5 {
		t.Errorf("admin.foreign_host_refused = %d; want 5", v)
	}
	for _, host := range []string{"localhost:" + port, "127.0.0.1:" + port, "[::1]:" + port} {
		if code, _, _ := p.doHost("GET", "/ready", host, ""); code != http.StatusOK {
			t.Errorf("GET /ready with Host %s = %d; want 200", host, code)
		}
	}
}

// TestAdminAllowedHostsEnv: the operator's LEGATE_ADMIN_ALLOWED_HOSTS names
// a Host the admin then answers (behind a reverse proxy, say); others are
// still refused.
func TestAdminAllowedHostsEnv(t *testing.T) {
	p := launchEnv(t, []string{"LEGATE_ADMIN_ALLOWED_HOSTS=admin.internal, ops.internal"}, "-c", writeConfig(t, minimalConfig))
	p.waitAdmin()
	if code, _, body := p.doHost("POST", "/healthcheck/fail", "ops.internal", "http://ops.internal"); code != http.StatusOK {
		t.Errorf("POST /healthcheck/fail with an allowed Host = %d %q; want 200", code, body)
	}
	if code, _, _ := p.doHost("GET", "/ready", "admin.internal:80", ""); code != http.StatusServiceUnavailable {
		t.Errorf("GET /ready with an allowed Host after /healthcheck/fail = %d; want 503", code)
	}
	if code, _, _ := p.doHost("POST", "/healthcheck/ok", "evil.example", ""); code != http.StatusForbidden {
		t.Errorf("POST /healthcheck/ok with a Host not listed = %d; want 403", code)
	}
}
