package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestLoggingEndpoint(t *testing.T) {
	p := start(t, "-c", writeConfig(t, minimalConfig))
	code, _, body := p.post("/logging")
	if code != 200 || !strings.HasPrefix(body, "active loggers:\n") || !strings.Contains(body, "  admin: info\n") {
		t.Fatalf("POST /logging = %d\n%s", code, body)
	}
	if code, _, body := p.post("/logging?upstream=debug"); code != 200 || !strings.Contains(body, "  upstream: debug\n") {
		t.Errorf("POST /logging?upstream=debug = %d\n%s", code, body)
	}
	if code, _, body := p.post("/logging?paths=admin:trace,config:error"); code != 200 ||
		!strings.Contains(body, "  admin: trace\n") || !strings.Contains(body, "  config: error\n") {
		t.Errorf("POST /logging?paths=… = %d\n%s", code, body)
	}
	if code, _, body := p.post("/logging?level=warning"); code != 200 || strings.Contains(body, ": debug\n") {
		t.Errorf("POST /logging?level=warning = %d\n%s", code, body)
	}
	// Errors change nothing.
	for _, q := range []string{"?level=loud", "?nosuchlogger=info", "?paths=admin:loud"} {
		code, _, body := p.post("/logging" + q)
		if code != 400 || !strings.HasPrefix(body, "error: ") {
			t.Errorf("POST /logging%s = %d %q; want 400 with the reason", q, code, firstLine(body))
		}
	}
	_, _, body = p.post("/logging")
	if !strings.Contains(body, "  admin: warning\n") {
		t.Errorf("a refused update changed levels:\n%s", body)
	}
	if code, _, _ := p.get("/logging?level=debug"); code != 400 {
		t.Errorf("GET /logging?level=debug = %d, want 400", code)
	}
}

func TestLogPathReopenedOnSIGUSR1(t *testing.T) {
	dir := t.TempDir()
	logPath := filepath.Join(dir, "legate.log")
	p := start(t, "-c", writeConfig(t, minimalConfig), "--log-path", logPath, "--log-format", "%l|%n|%v")
	if err := os.Rename(logPath, logPath+".1"); err != nil {
		t.Fatal(err)
	}
	p.signal(syscall.SIGUSR1)
	// Any admin-level log line after the reopen must land in the new file;
	// a /logging change logs one.
	deadline := time.Now().Add(20 * time.Second)
	for {
		p.post("/logging?admin=info")
		if data, err := os.ReadFile(logPath); err == nil && strings.Contains(string(data), "|admin|") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no log line in the reopened %s", logPath)
		}
		time.Sleep(50 * time.Millisecond) // polling a file another process writes
	}
	old, _ := os.ReadFile(logPath + ".1")
	if !strings.Contains(string(old), "info|main|admin address: ") {
		t.Errorf("rotated log lacks the start-up lines in the --log-format layout:\n%s", old)
	}
}

func TestApplicationLogJSONFormat(t *testing.T) {
	dir := t.TempDir()
	logPath := filepath.Join(dir, "legate.log")
	cfg := minimalConfig + `
application_log_config:
  log_format:
    json_format: {level: "%l", logger: "%n", message: "%j"}
`
	p := start(t, "-c", writeConfig(t, cfg), "--log-path", logPath)
	p.post("/quitquitquit")
	p.wait(20 * time.Second)
	data, err := os.ReadFile(logPath)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(data), `{"level":"info","logger":"main","message":"admin address: `) {
		t.Errorf("log is not JSON lines in the configured shape:\n%s", data)
	}
	code, _, stderr := runOnce(t, "--mode", "validate", "-c", writeConfig(t, cfg), "--log-format", "%v")
	if code != 1 || !strings.Contains(stderr, "only one of application_log_config.log_format and --log-format") {
		t.Errorf("both formats = %d %q; want 1 with the reason", code, stderr)
	}
}
