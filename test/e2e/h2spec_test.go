package e2e

import (
	"context"
	"crypto/tls"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/http2"

	"github.com/legateproxy/legate/tlsutil/tlstest"
)

// h2specLegateFails are the h2spec cases Legate fails on every HTTP/2 listener, by id
// (section/case), with why: none. The test fails when another case fails, and when one of
// the expected failures passes (drop it from its list). x/net/http2 alone fails 4.2/3
// (it advertises 1 MiB frames), 6.5.3/1 (it refuses a repeated SETTINGS parameter) and
// 8.1.2.2/1-2 (it answers connection-specific request fields 400), which Legate's wire layer
// fixes (httpproxy/h2gate.go), and 3.5/2 (it resets the connection after a wrong preface).
var h2specLegateFails = map[string]string{}

// h2specAutoFails are the cases Legate fails only on a listener with codec_type AUTO.
var h2specAutoFails = map[string]string{
	"http2/3.5/2": "with codec_type AUTO a connection that does not begin with the HTTP/2 preface " +
		"is HTTP/1, as in Envoy: h2spec's \"INVALID CONNECTION PREFACE\" gets 400 Bad Request",
}

// h2specTool returns the path of h2spec, from PATH or where go install puts it
// (scripts/install-e2e-deps.sh installs it). Without it the test is skipped, unless
// LEGATE_E2E_TOOLS=1 (make e2e) makes a missing tool a failure.
func h2specTool(t *testing.T) string {
	t.Helper()
	if path, err := exec.LookPath("h2spec"); err == nil {
		return path
	}
	out, err := exec.Command("go", "env", "GOBIN", "GOPATH").Output()
	if err == nil {
		dirs := strings.Split(string(out), "\n")
		bin := dirs[0]
		if bin == "" && len(dirs) > 1 {
			bin = filepath.Join(dirs[1], "bin")
		}
		path := filepath.Join(bin, "h2spec")
		if _, err = os.Stat(path); err == nil {
			return path
		}
	}
	if os.Getenv("LEGATE_E2E_TOOLS") == "1" {
		t.Fatalf("LEGATE_E2E_TOOLS=1 but h2spec is missing: %v", err)
	}
	t.Skipf("h2spec not installed (%v); make e2e installs it", err)
	return ""
}

// h2specReport is the part of h2spec's JUnit report the test reads.
type h2specReport struct {
	Suites []struct {
		Package string `xml:"package,attr"`
		Cases   []struct {
			Name    string    `xml:"classname,attr"`
			Error   *struct{} `xml:"error"`
			Failure *struct{} `xml:"failure"`
			Skipped *struct{} `xml:"skipped"`
		} `xml:"testcase"`
	} `xml:"testsuite"`
}

// h2specResult is one h2spec run: the ids of the cases that failed, with their titles, and
// how many passed.
type h2specResult struct {
	failed map[string]string
	passed int
}

// runH2spec runs every h2spec case against 127.0.0.1:port.
func runH2spec(t *testing.T, tool string, port int, useTLS bool) h2specResult {
	t.Helper()
	report := filepath.Join(t.TempDir(), "report.xml")
	args := []string{"-h", "127.0.0.1", "-p", strconv.Itoa(port), "-o", "2", "-j", report}
	if useTLS {
		args = append(args, "-t", "-k")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, tool, args...).CombinedOutput()
	var ee *exec.ExitError
	if err != nil && !(errors.As(err, &ee) && ee.ExitCode() == 1) { // 1: some case failed
		t.Fatalf("h2spec %v: %v\n%s", args, err, out)
	}
	raw, err := os.ReadFile(report)
	if err != nil {
		t.Fatalf("h2spec report: %v\n%s", err, out)
	}
	var rep h2specReport
	if err := xml.Unmarshal(raw, &rep); err != nil {
		t.Fatalf("h2spec report: %v", err)
	}
	res := h2specResult{failed: map[string]string{}}
	for _, s := range rep.Suites {
		for i, c := range s.Cases {
			switch {
			case c.Error != nil || c.Failure != nil:
				res.failed[fmt.Sprintf("%s/%d", s.Package, i+1)] = c.Name
			case c.Skipped == nil:
				res.passed++
			}
		}
	}
	if res.passed == 0 {
		t.Fatalf("h2spec passed no case:\n%s", out)
	}
	return res
}

// plainH2 serves HTTP/2 with golang.org/x/net/http2 and nothing else, prior knowledge on one
// port and TLS on another, for comparison; it returns the two ports.
func plainH2(t *testing.T, cert tls.Certificate) (h2c, h2tls int) {
	t.Helper()
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		io.WriteString(w, "ok")
	})
	srv := &http2.Server{}
	serve := func(ln net.Listener) {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				if tc, ok := c.(*tls.Conn); ok && tc.Handshake() != nil {
					c.Close()
					return
				}
				srv.ServeConn(c, &http2.ServeConnOpts{Handler: h})
			}()
		}
	}
	plain := listen(t)
	go serve(plain)
	tl := tls.NewListener(listen(t), &tls.Config{Certificates: []tls.Certificate{cert}, NextProtos: []string{"h2"}})
	go serve(tl)
	return plain.Addr().(*net.TCPAddr).Port, tl.Addr().(*net.TCPAddr).Port
}

func listen(t *testing.T) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return ln
}

// TestH2spec runs h2spec against the binary's HTTP/2 listeners, prior knowledge (h2c) and
// TLS with ALPN, in front of a real upstream, and against a plain x/net/http2 server: Legate
// fails only the cases listed in h2specLegateFails and passes at least as many as the plain
// server.
func TestH2spec(t *testing.T) {
	tool := h2specTool(t)
	ca := tlstest.NewCA(t, tlstest.Options{CommonName: "e2e h2spec ca"})
	leaf := ca.Issue(t, tlstest.Options{CommonName: "proxy", IPs: []string{"127.0.0.1"}})
	dir := t.TempDir()
	up := listen(t)
	go http.Serve(up, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		io.WriteString(w, "ok")
	}))
	hcm := `
      - name: envoy.filters.network.http_connection_manager
        typed_config:
          "@type": type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager
          stat_prefix: %s
          codec_type: %s
          route_config:
            virtual_hosts:
            - name: all
              domains: ["*"]
              routes: [{match: {prefix: "/"}, route: {cluster: up}}]
          http_filters:
          - name: envoy.filters.http.router
            typed_config: {"@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router}`
	cfg := `
admin: {address: {socket_address: {address: 127.0.0.1, port_value: 0}}}
static_resources:
  listeners:
  - name: auto
    address: {socket_address: {address: 127.0.0.1, port_value: 0}}
    filter_chains:
    - filters:` + fmt.Sprintf(hcm, "auto", "AUTO") + `
  - name: h2c
    address: {socket_address: {address: 127.0.0.1, port_value: 0}}
    filter_chains:
    - filters:` + fmt.Sprintf(hcm, "h2c", "HTTP2") + `
  - name: h2tls
    address: {socket_address: {address: 127.0.0.1, port_value: 0}}
    filter_chains:
    - transport_socket:
        name: envoy.transport_sockets.tls
        typed_config:
          "@type": type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.DownstreamTlsContext
          common_tls_context:
            alpn_protocols: [h2, http/1.1]
            tls_certificates:
            - certificate_chain: {filename: ` + writePEM(t, dir, "proxy.pem", leaf.CertPEM) + `}
              private_key: {filename: ` + writePEM(t, dir, "proxy-key.pem", leaf.KeyPEM) + `}
      filters:` + fmt.Sprintf(hcm, "h2tls", "AUTO") + `
  clusters:
  - name: up
    connect_timeout: 1s
    load_assignment:
      cluster_name: up
      endpoints: [{lb_endpoints: [{endpoint: {address: {socket_address: {address: 127.0.0.1, port_value: ` + strconv.Itoa(up.Addr().(*net.TCPAddr).Port) + `}}}}]}]
`
	p := start(t, "-c", writeConfig(t, cfg))
	// The listeners bind ports the kernel picks (port_value 0), read back from /listeners.
	autoPort, h2cPort, tlsPort := p.boundListenerPort("auto"), p.boundListenerPort("h2c"), p.boundListenerPort("h2tls")
	plainC, plainTLS := plainH2(t, tlsCert(leaf))
	for _, tc := range []struct {
		name         string
		legate, base int
		tls          bool
		expected     map[string]string
	}{
		{name: "h2c, codec AUTO", legate: autoPort, base: plainC, expected: merged(h2specLegateFails, h2specAutoFails)},
		{name: "h2c, codec HTTP2", legate: h2cPort, base: plainC, expected: h2specLegateFails},
		{name: "tls", legate: tlsPort, base: plainTLS, tls: true, expected: h2specLegateFails},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := runH2spec(t, tool, tc.legate, tc.tls)
			base := runH2spec(t, tool, tc.base, tc.tls)
			t.Logf("Legate: %d passed, failed %v; x/net/http2: %d passed, failed %v",
				got.passed, sortedKeys(got.failed), base.passed, sortedKeys(base.failed))
			for _, id := range sortedKeys(got.failed) {
				if _, ok := tc.expected[id]; !ok {
					t.Errorf("h2spec %s (%s) fails; not an expected failure", id, got.failed[id])
				}
			}
			for _, id := range sortedKeys(tc.expected) {
				if _, ok := got.failed[id]; !ok {
					t.Errorf("h2spec %s now passes: drop it from the expected failures", id)
				}
			}
			if got.passed < base.passed {
				t.Errorf("Legate passes %d h2spec cases; the plain x/net/http2 server %d", got.passed, base.passed)
			}
		})
	}
}

func merged(a, b map[string]string) map[string]string {
	m := maps.Clone(a)
	maps.Copy(m, b)
	return m
}

func sortedKeys(m map[string]string) []string { return slices.Sorted(maps.Keys(m)) }
