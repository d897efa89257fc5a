package httpproxy

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestAccessLogDurations checks %REQUEST_DURATION% (to the request body's last byte),
// %RESPONSE_DURATION% (to the upstream's response head) and %RESPONSE_TX_DURATION% (from
// that head to the response's last byte) against a client that trickles its body and a real
// upstream that waits before its head and between body parts; a request without a body has a
// request duration of 0, and one that never reached an upstream has no response durations.
func TestAccessLogDurations(t *testing.T) {
	const pause = 150 * time.Millisecond
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		if r.URL.Path != "/slow" {
			return
		}
		time.Sleep(pause) // the measured wait before the head
		w.WriteHeader(http.StatusOK)
		io.WriteString(w, "first ")
		w.(http.Flusher).Flush()
		time.Sleep(pause) // the measured gap inside the body
		io.WriteString(w, "second")
	}))
	t.Cleanup(srv.Close)
	up := srv.Listener.Addr().String()
	path := filepath.Join(t.TempDir(), "access.log")
	hcm := fmt.Sprintf(`stat_prefix: ingress
route_config:
  virtual_hosts:
  - name: all
    domains: ["*"]
    routes:
    - match: {prefix: "/local"}
      direct_response: {status: 200}
    - match: {prefix: "/"}
      route: {cluster: web}
access_log:
- name: envoy.access_loggers.file
  typed_config:
    "@type": type.googleapis.com/envoy.extensions.access_loggers.file.v3.FileAccessLog
    path: %s
    log_format: {text_format_source: {inline_string: "%%REQ(:PATH)%% %%REQUEST_DURATION%% %%RESPONSE_DURATION%% %%RESPONSE_TX_DURATION%% %%DURATION%%\n"}}
`, path)
	e := newEnv(t, envOptions{clusters: []string{staticCluster("web", "", up)}, hcm: hcm})
	c := e.client()
	c.Transport.(*http.Transport).MaxConnsPerHost = 1
	pr, pw := io.Pipe()
	go func() {
		pw.Write([]byte("part one "))
		time.Sleep(pause) // the measured gap inside the request body
		pw.Write([]byte("part two"))
		pw.Close()
	}()
	req, err := http.NewRequest(http.MethodPost, "http://"+e.addr+"/slow", pr)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	e.get(c, "/quick")
	e.get(c, "/local")
	e.get(c, "/sync") // its line is written after the three above
	f, err := e.logs.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Flush(); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(b), "\n")
	if len(lines) < 3 {
		t.Fatalf("access log %q; want the three requests' lines", b)
	}
	ms := func(s string) int {
		n, err := strconv.Atoi(s)
		if err != nil {
			t.Fatalf("duration %q in %q is not a number of milliseconds", s, b)
		}
		return n
	}
	slow := strings.Fields(lines[0])
	reqD, head, tx, total := ms(slow[1]), ms(slow[2]), ms(slow[3]), ms(slow[4])
	// The upstream reads the body's last byte after Legate does and waits a pause before its
	// head: the response duration exceeds the request's by a pause (less a millisecond of
	// rounding). The client's and the upstream's pauses are seen from Legate's side of
	// sockets on a loaded machine: at least half of each is.
	p := int(pause / time.Millisecond)
	if reqD < p/2 || head < reqD+p-1 || tx < p/2 || total < head+tx-1 {
		t.Errorf("/slow durations request %d, response %d, tx %d, total %d ms; want request ≥ %d, response ≥ request + %d, tx ≥ %d, total ≥ response + tx", reqD, head, tx, total, p/2, p-1, p/2)
	}
	if quick := strings.Fields(lines[1]); quick[0] != "/quick" || quick[1] != "0" && ms(quick[1]) > 1000 {
		t.Errorf("/quick line %q; want a request duration of about 0 (no body)", lines[1])
	}
	if local := strings.Fields(lines[2]); local[0] != "/local" || local[2] != "-" || local[3] != "-" {
		t.Errorf("/local line %q; want no response durations (no upstream)", lines[2])
	}
}
