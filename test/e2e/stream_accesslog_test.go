package e2e

import (
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"testing"
	"time"
)

// routeAllToUp is the virtual host of exampleHCM that routes every path to the cluster "up".
const routeAllToUp = `            - name: all
              domains: ["*"]
              routes:
              - match: {prefix: "/"}
                route: {cluster: up}`

// TestStdoutStderrAccessLogs runs the binary with an HTTP listener that logs each request to
// stdout (log_format json_format, typed values) and to stderr (text_format), and checks that
// both lines appear on the process's output once the file flush interval has passed.
func TestStdoutStderrAccessLogs(t *testing.T) {
	up := named(t, "up")
	logs := `
          access_log:
          - name: envoy.access_loggers.stdout
            typed_config:
              "@type": type.googleapis.com/envoy.extensions.access_loggers.stream.v3.StdoutAccessLog
              log_format:
                json_format: {stream: "stdout", path: "%REQ(:PATH)%", code: "%RESPONSE_CODE%"}
          - name: envoy.access_loggers.stderr
            typed_config:
              "@type": type.googleapis.com/envoy.extensions.access_loggers.stream.v3.StderrAccessLog
              log_format:
                text_format: "stderr %REQ(:METHOD)% %REQ(:PATH)% %RESPONSE_CODE%\n"`
	p := start(t, "--file-flush-interval-msec", "50", "-c", writeConfig(t, exampleBootstrap(exampleHCM("ingress_http", routeAllToUp, logs),
		exampleCluster("up", "", addrOf(up)))))
	expectBody(t, noRedirect, "http://"+p.listenerAddr("example")+"/logged", http.StatusOK, "up /logged")
	p.waitOutput(regexp.MustCompile(`(?m)^\{"code":200,"path":"/logged","stream":"stdout"\}$`))
	p.waitOutput(regexp.MustCompile(`(?m)^stderr GET /logged 200$`))
}

// TestListenerAccessLog runs the binary with a listener that serves only TLS and logs, in its
// listener-level access_log (a file), the connections no filter chain matched; a plain-text
// connection must be closed and logged with NR and filter_chain_not_found, as Envoy logs it.
func TestListenerAccessLog(t *testing.T) {
	logPath := filepath.Join(t.TempDir(), "listener.log")
	cfg := `
admin: {address: {socket_address: {address: 127.0.0.1, port_value: 0}}}
static_resources:
  listeners:
  - name: tls_only
    address: {socket_address: {address: 127.0.0.1, port_value: 0}}
    listener_filters:
    - name: envoy.filters.listener.tls_inspector
      typed_config: {"@type": type.googleapis.com/envoy.extensions.filters.listener.tls_inspector.v3.TlsInspector}
    access_log:
    - name: envoy.access_loggers.file
      typed_config:
        "@type": type.googleapis.com/envoy.extensions.access_loggers.file.v3.FileAccessLog
        path: ` + logPath + `
        log_format: {text_format: "%RESPONSE_FLAGS% %RESPONSE_CODE_DETAILS% %DOWNSTREAM_REMOTE_ADDRESS%\n"}
    filter_chains:
    - filter_chain_match: {transport_protocol: tls}
      filters:
      - name: envoy.filters.network.tcp_proxy
        typed_config:
          "@type": type.googleapis.com/envoy.extensions.filters.network.tcp_proxy.v3.TcpProxy
          stat_prefix: tls
          cluster: backend
  clusters:` + exampleCluster("backend", "", "127.0.0.1:1")
	p := start(t, "--file-flush-interval-msec", "50", "-c", writeConfig(t, cfg))
	c, err := net.DialTimeout("tcp", p.listenerAddr("tls_only"), 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.Write([]byte("plain text\n"))
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if n, err := c.Read(make([]byte, 1)); n != 0 || err == nil {
		t.Fatalf("read = %d, %v; want the connection closed", n, err)
	}
	want := "NR filter_chain_not_found " + c.LocalAddr().String() + "\n"
	deadline := time.Now().Add(10 * time.Second)
	for {
		b, _ := os.ReadFile(logPath)
		if string(b) == want {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("listener access log = %q; want %q", b, want)
		}
		time.Sleep(20 * time.Millisecond) // the file is flushed on a timer, not an event
	}
}
