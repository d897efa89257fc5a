package e2e

import (
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	adminv3 "github.com/envoyproxy/go-control-plane/envoy/admin/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	// Registers the extension types that config dumps may carry.
	_ "github.com/legateproxy/legate/bootstrap"
)

// strict decodes body into m, rejecting unknown fields.
func strict(t *testing.T, body string, m proto.Message) {
	t.Helper()
	if err := (protojson.UnmarshalOptions{DiscardUnknown: false}).Unmarshal([]byte(body), m); err != nil {
		t.Fatalf("decoding into %s: %v\nbody:\n%s", m.ProtoReflect().Descriptor().FullName(), err, body)
	}
}

// strictServerInfo decodes a /server_info body into info after checking and
// removing command_line_options.hot_restart_version, a field of the spec
// (Envoy's v2 field) that v3's message no longer has.
func strictServerInfo(t *testing.T, body string, info *adminv3.ServerInfo) {
	t.Helper()
	const line = "  \"hot_restart_version\": false,\n"
	_, rest, ok := strings.Cut(body, "\n  \"log_path\": ")
	_, rest, _ = strings.Cut(rest, "\n")
	after, found := strings.CutPrefix(rest, line)
	if !ok || !found {
		t.Errorf("command_line_options.hot_restart_version: false not found right after log_path:\n%s", body)
	} else {
		body = body[:len(body)-len(rest)] + after
	}
	strict(t, body, info)
}

func TestAdminEndpoints(t *testing.T) {
	cfg := writeConfig(t, minimalConfig)
	p := start(t, "-c", cfg, "--service-zone", "zone-a")

	t.Run("ready", func(t *testing.T) {
		code, h, body := p.get("/ready")
		if code != 200 || body != "LIVE\n" {
			t.Errorf("GET /ready = %d %q; want 200 \"LIVE\\n\"", code, body)
		}
		if got := h.Get("Content-Type"); got != "text/plain; charset=UTF-8" {
			t.Errorf("Content-Type = %q", got)
		}
		if got := h.Get("Cache-Control"); got != "no-cache, max-age=0" {
			t.Errorf("Cache-Control = %q", got)
		}
		if got := h.Get("X-Content-Type-Options"); got != "nosniff" {
			t.Errorf("X-Content-Type-Options = %q", got)
		}
	})
	t.Run("server_info", func(t *testing.T) {
		code, h, body := p.get("/server_info")
		if code != 200 || h.Get("Content-Type") != "application/json" {
			t.Fatalf("GET /server_info = %d %s", code, h.Get("Content-Type"))
		}
		var info adminv3.ServerInfo
		strictServerInfo(t, body, &info)
		if info.State != adminv3.ServerInfo_LIVE {
			t.Errorf("state = %v, want LIVE", info.State)
		}
		if !strings.Contains(body, "\"state\": \"LIVE\"") {
			t.Errorf("body does not print the LIVE state (all fields printed):\n%s", body)
		}
		if got := info.GetCommandLineOptions().GetConfigPath(); got != cfg {
			t.Errorf("command_line_options.config_path = %q, want %q", got, cfg)
		}
		if info.GetNode().GetId() != "e2e-node" || info.GetNode().GetCluster() != "e2e-cluster" {
			t.Errorf("node = %v", info.GetNode())
		}
		if got := info.GetNode().GetLocality().GetZone(); got != "zone-a" {
			t.Errorf("node.locality.zone = %q, want the --service-zone value", got)
		}
		if !strings.HasSuffix(body, "}\n") || !strings.HasPrefix(body, "{\n \"version\": ") {
			t.Errorf("not Envoy's pretty JSON layout:\n%s", body)
		}
	})
	t.Run("memory", func(t *testing.T) {
		_, _, body := p.get("/memory")
		var m adminv3.Memory
		strict(t, body, &m)
		if m.Allocated == 0 || m.HeapSize == 0 {
			t.Errorf("memory = %v; want allocated and heap_size filled", &m)
		}
	})
	t.Run("hot_restart_version", func(t *testing.T) {
		code, _, body := p.get("/hot_restart_version")
		if code != 200 || body == "" || strings.HasSuffix(body, "\n") {
			t.Errorf("GET /hot_restart_version = %d %q; want 200, a version, no newline", code, body)
		}
	})
	t.Run("init_dump", func(t *testing.T) {
		_, _, body := p.get("/init_dump")
		if body != "{}\n" {
			t.Errorf("GET /init_dump when nothing is pending = %q, want {}\\n", body)
		}
		var d adminv3.UnreadyTargetsDumps
		strict(t, body, &d)
	})
	t.Run("config_dump", func(t *testing.T) {
		code, _, body := p.get("/config_dump")
		if code != 200 {
			t.Fatalf("GET /config_dump = %d\n%s", code, body)
		}
		var d adminv3.ConfigDump
		strict(t, body, &d)
		if len(d.Configs) == 0 || d.Configs[0].GetTypeUrl() != "type.googleapis.com/envoy.admin.v3.BootstrapConfigDump" {
			t.Fatalf("first config is not the bootstrap: %v", d.Configs)
		}
		var b adminv3.BootstrapConfigDump
		if err := d.Configs[0].UnmarshalTo(&b); err != nil {
			t.Fatal(err)
		}
		if got := b.GetBootstrap().GetStaticResources().GetClusters()[0].GetName(); got != "backend" {
			t.Errorf("bootstrap cluster = %q, want backend", got)
		}
	})
	t.Run("config_dump mask", func(t *testing.T) {
		code, _, body := p.get("/config_dump?mask=bootstrap.node.id")
		if code != 200 {
			t.Fatalf("GET /config_dump?mask=… = %d\n%s", code, body)
		}
		if !strings.Contains(body, "\"id\": \"e2e-node\"") || strings.Contains(body, "static_resources") {
			t.Errorf("mask not applied:\n%s", body)
		}
	})
	t.Run("help", func(t *testing.T) {
		_, _, body := p.get("/help")
		for _, want := range []string{"admin commands are:\n", "  /quitquitquit (POST): exit the server\n", "  /ready: print server state"} {
			if !strings.Contains(body, want) {
				t.Errorf("/help lacks %q:\n%s", want, body)
			}
		}
	})
	t.Run("home page", func(t *testing.T) {
		code, h, body := p.get("/")
		if code != 200 || h.Get("Content-Type") != "text/html; charset=UTF-8" {
			t.Fatalf("GET / = %d %s", code, h.Get("Content-Type"))
		}
		for _, want := range []string{"<title>Envoy Admin</title>", "<a href='server_info'>server_info</a>", "<form action='quitquitquit' method='post'"} {
			if !strings.Contains(body, want) {
				t.Errorf("home page lacks %q", want)
			}
		}
	})
	t.Run("unknown path", func(t *testing.T) {
		code, _, body := p.get("/nope")
		if code != 404 || !strings.HasPrefix(body, "invalid path. admin commands are:\n") {
			t.Errorf("GET /nope = %d %q", code, firstLine(body))
		}
		if code, _, _ := p.get("/ready/"); code != 404 {
			t.Errorf("GET /ready/ = %d; want 404 (exact match only)", code)
		}
	})
	t.Run("reopen_logs", func(t *testing.T) {
		if code, _, body := p.post("/reopen_logs"); code != 200 || body != "OK\n" {
			t.Errorf("POST /reopen_logs = %d %q", code, body)
		}
	})
}

func firstLine(s string) string {
	l, _, _ := strings.Cut(s, "\n")
	return l
}

// Every mutation requested with GET gets 400 and has no effect.
func TestMutationsRefuseGET(t *testing.T) {
	p := start(t, "-c", writeConfig(t, minimalConfig))
	_, _, help := p.get("/help")
	var mutating []string
	for _, l := range lines(help) {
		if strings.HasPrefix(l, "  /") && strings.Contains(l, " (POST):") {
			mutating = append(mutating, strings.Fields(l)[0])
		}
	}
	if len(mutating) < 4 {
		t.Fatalf("found only %v as mutating endpoints in /help", mutating)
	}
	for _, path := range mutating {
		t.Run(path, func(t *testing.T) {
			code, _, body := p.get(path)
			if code != http.StatusBadRequest || body != "Method GET not allowed, POST required." {
				t.Errorf("GET %s = %d %q; want 400", path, code, body)
			}
		})
	}
	// No effect: still LIVE (no /healthcheck/fail), still running (no quit).
	if code, _, body := p.get("/ready"); code != 200 || body != "LIVE\n" {
		t.Errorf("after GETs on mutations /ready = %d %q; want 200 LIVE", code, body)
	}
}

func TestHealthCheckFailMakesDraining(t *testing.T) {
	p := start(t, "-c", writeConfig(t, minimalConfig))
	if code, _, _ := p.post("/healthcheck/fail"); code != 200 {
		t.Fatalf("POST /healthcheck/fail = %d", code)
	}
	if code, _, body := p.get("/ready"); code != 503 || body != "DRAINING\n" {
		t.Errorf("/ready after fail = %d %q; want 503 DRAINING", code, body)
	}
	p.post("/healthcheck/ok")
	if code, _, body := p.get("/ready"); code != 200 || body != "LIVE\n" {
		t.Errorf("/ready after ok = %d %q; want 200 LIVE", code, body)
	}
}

func TestQuitQuitQuit(t *testing.T) {
	p := start(t, "-c", writeConfig(t, minimalConfig))
	if code, _, body := p.post("/quitquitquit"); code != 200 || body != "OK\n" {
		t.Fatalf("POST /quitquitquit = %d %q", code, body)
	}
	if code := p.wait(20 * time.Second); code != 0 {
		t.Errorf("exit code after /quitquitquit = %d, want 0", code)
	}
}

func TestSignalsShutDownCleanly(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
		t.Run(sig.String(), func(t *testing.T) {
			p := start(t, "-c", writeConfig(t, minimalConfig))
			p.signal(sig)
			if code := p.wait(20 * time.Second); code != 0 {
				t.Errorf("exit code after %v = %d, want 0", sig, code)
			}
		})
	}
}

func TestAdminAccessLogAndReopen(t *testing.T) {
	dir := t.TempDir()
	logPath := filepath.Join(dir, "admin.log")
	cfg := strings.Replace(minimalConfig, "admin:\n", "admin:\n  access_log_path: "+logPath+"\n", 1)
	p := start(t, "-c", writeConfig(t, cfg))
	p.get("/server_info")
	// logrotate's move, then a reopen: new lines go to a new file.
	if err := os.Rename(logPath, logPath+".1"); err != nil {
		t.Fatal(err)
	}
	p.post("/reopen_logs")
	p.get("/help")
	old, _ := os.ReadFile(logPath + ".1")
	if !strings.Contains(string(old), "\"GET /server_info HTTP/1.1\" 200") {
		t.Errorf("rotated admin log lacks the /server_info line:\n%s", old)
	}
	cur, err := os.ReadFile(logPath)
	if err != nil {
		t.Fatalf("admin log not reopened: %v", err)
	}
	if !strings.Contains(string(cur), "\"GET /help HTTP/1.1\" 200") {
		t.Errorf("reopened admin log lacks the /help line:\n%s", cur)
	}
}

func TestSecondInstanceOnSameAdminPortFails(t *testing.T) {
	first := start(t, "-c", writeConfig(t, minimalConfig))
	port := first.admin[strings.LastIndex(first.admin, ":")+1:]
	cfg := strings.Replace(minimalConfig, "port_value: 0}", "port_value: "+port+"}", 1)
	second := launch(t, "-c", writeConfig(t, cfg))
	if code := second.wait(20 * time.Second); code != 1 {
		t.Errorf("second instance exit code = %d, want 1", code)
	}
	if out := second.stderr.String(); !strings.Contains(out, "admin: cannot bind 127.0.0.1:"+port) {
		t.Errorf("second instance did not say why:\n%s", out)
	}
	if code, _, _ := first.get("/ready"); code != 200 {
		t.Errorf("first instance no longer ready")
	}
}

func TestValidateMode(t *testing.T) {
	// A port that is free now; validate must not bind it.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	good := strings.Replace(minimalConfig, "port_value: 0}", "port_value: "+strconv.Itoa(port)+"}", 1)

	t.Run("good", func(t *testing.T) {
		path := writeConfig(t, good)
		code, stdout, stderr := runOnce(t, "--mode", "validate", "-c", path)
		if code != 0 || stdout != "configuration '"+path+"' OK\n" {
			t.Errorf("validate = %d %q %q", code, stdout, stderr)
		}
	})
	bad := []struct{ name, yaml, want string }{
		{"unknown field", good + "bogus_field: 1\n", "bogus_field"},
		{"duplicate cluster", good + `  - name: backend
    connect_timeout: 1s
    load_assignment: {cluster_name: backend}
`, "duplicate"},
		{"bad duration", strings.Replace(good, "0.25s", "5x", 1), "connect_timeout"},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			code, _, stderr := runOnce(t, "--mode", "validate", "-c", writeConfig(t, tc.yaml))
			if code != 1 || !strings.Contains(stderr, tc.want) {
				t.Errorf("validate = %d, stderr %q; want 1 mentioning %q", code, stderr, tc.want)
			}
			ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port))
			if err != nil {
				t.Errorf("validate left port %d bound: %v", port, err)
				return
			}
			ln.Close()
		})
	}
}

func TestCommandLine(t *testing.T) {
	t.Run("version", func(t *testing.T) {
		code, stdout, _ := runOnce(t, "--version")
		if code != 0 || !strings.Contains(stdout, "version: ") {
			t.Errorf("--version = %d %q", code, stdout)
		}
	})
	t.Run("help", func(t *testing.T) {
		code, stdout, _ := runOnce(t, "--help")
		if code != 0 || !strings.Contains(stdout, "--config-path") {
			t.Errorf("--help = %d %q", code, firstLine(stdout))
		}
	})
	t.Run("bad value", func(t *testing.T) {
		code, _, stderr := runOnce(t, "--mode", "bogus")
		if code != 1 || !strings.Contains(stderr, "--mode") || !strings.Contains(stderr, "bogus") {
			t.Errorf("--mode bogus = %d %q", code, stderr)
		}
	})
	t.Run("config-yaml merged over file", func(t *testing.T) {
		path := writeConfig(t, minimalConfig)
		p := start(t, "-c", path, "--config-yaml", "node: {id: merged-id}")
		_, _, body := p.get("/server_info")
		var info adminv3.ServerInfo
		strictServerInfo(t, body, &info)
		if info.GetNode().GetId() != "merged-id" || info.GetNode().GetCluster() != "e2e-cluster" {
			t.Errorf("node after merge = %v", info.GetNode())
		}
	})
}

func TestCertsWithoutTLS(t *testing.T) {
	p := start(t, "-c", writeConfig(t, minimalConfig))
	_, h, body := p.get("/certs")
	if body != "{\n \"certificates\": []\n}\n" || h.Get("Content-Type") != "application/json" {
		t.Errorf("GET /certs = %q (%s)", body, h.Get("Content-Type"))
	}
}
