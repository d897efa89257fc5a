package e2e

import (
	"net/http"
	"regexp"
	"testing"
)

// TestStdoutStderrAccessLogs runs the binary with an HTTP listener that logs each request to
// stdout (log_format json_format, typed values) and to stderr (text_format), and checks that
// both lines appear on the process's output once the file flush interval has passed.
func TestStdoutStderrAccessLogs(t *testing.T) {
	up := named(t, "up")
	routes := `            - name: all
              domains: ["*"]
              routes:
              - match: {prefix: "/"}
                route: {cluster: up}`
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
	p := start(t, "--file-flush-interval-msec", "50", "-c", writeConfig(t, exampleBootstrap(exampleHCM("ingress_http", routes, logs),
		exampleCluster("up", "", addrOf(up)))))
	expectBody(t, noRedirect, "http://"+p.listenerAddr("example")+"/logged", http.StatusOK, "up /logged")
	p.waitOutput(regexp.MustCompile(`(?m)^\{"code":200,"path":"/logged","stream":"stdout"\}$`))
	p.waitOutput(regexp.MustCompile(`(?m)^stderr GET /logged 200$`))
}
