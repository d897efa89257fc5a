package httpproxy

import (
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/legateproxy/legate/config"
	"github.com/legateproxy/legate/internal/http1"
	"github.com/legateproxy/legate/internal/nettest"
	"golang.org/x/net/http2"
)

// directUpstreamResponse is an upstream answer with every kind of field the connection
// manager treats apart (knownKinds), in mixed case, some repeated.
const directUpstreamResponse = "HTTP/1.1 200 OK\r\n" +
	"Content-Type: text/plain\r\n" +
	"X-Custom: a\r\n" +
	"SERVER: upstream-srv\r\n" +
	"x-custom: b\r\n" +
	"Date: Mon, 01 Jan 2001 00:00:00 GMT\r\n" +
	"Connection: keep-alive\r\n" +
	"Keep-Alive: timeout=5\r\n" +
	"X-Request-Id: up-id\r\n" +
	"x-envoy-upstream-service-time: 999\r\n" +
	"X-Envoy-Attempt-Count: 7\r\n" +
	"Set-Cookie: a=1\r\n" +
	"Set-Cookie: b=2\r\n" +
	"Proxy-Connection: x\r\n" +
	"TE: trailers\r\n" +
	"Content-Length: 5\r\n" +
	"\r\n" +
	"hello"

// TestDirectResponseHeadMatchesMapped checks that a response written straight from the
// upstream's fields (no filter, no access log: directhead.go) carries the header lines the
// header-map path writes, for each setting that changes them. The map path is forced on the
// same configuration by adding an access log. The direct path's lines are also checked in
// full and in order (the upstream's kept fields, then the added ones), which the map path's
// random order would not pass: that shows the direct path was taken.
func TestDirectResponseHeadMatchesMapped(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	nettest.Serve(t, ln, func(c net.Conn) { serveRaw(c, []byte(directUpstreamResponse)) })
	up := ln.Addr().String()

	const routerFilter = "http_filters:\n- name: envoy.filters.http.router\n  typed_config: {\"@type\": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router%s}\n"
	for _, tc := range []struct {
		name   string
		hcm    string // fields added to the connection manager
		vhost  string // fields added to the virtual host
		router string // fields added to the router's typed_config
		want   []string
	}{
		{
			name: "defaults",
			want: []string{
				"content-type: text/plain", "x-custom: a", "x-custom: b", "x-request-id: up-id",
				"x-envoy-attempt-count: 7", "set-cookie: a=1", "set-cookie: b=2",
				"server: envoy", "date: *", "x-envoy-upstream-service-time: *", "content-length: 5",
			},
		},
		{
			name:   "append if absent, request id, attempt count, suppressed headers",
			hcm:    "server_header_transformation: APPEND_IF_ABSENT\nalways_set_request_id_in_response: true\n",
			vhost:  "    include_attempt_count_in_response: true\n",
			router: ", suppress_envoy_headers: true",
			want: []string{
				"content-type: text/plain", "x-custom: a", "server: upstream-srv", "x-custom: b",
				"x-envoy-upstream-service-time: 999", "set-cookie: a=1", "set-cookie: b=2",
				"date: *", "x-request-id: *", "x-envoy-attempt-count: 1", "content-length: 5",
			},
		},
		{
			// The Server line Legate adds, in proper case (Handler.serverDate).
			name: "overwrite, proper case", hcm: "http_protocol_options: {header_key_format: {proper_case_words: {}}}\n",
			want: []string{
				"Content-Type: text/plain", "X-Custom: a", "X-Custom: b", "X-Request-Id: up-id", "X-Envoy-Attempt-Count: 7",
				"Set-Cookie: a=1", "Set-Cookie: b=2", "Server: envoy", "Date: *", "X-Envoy-Upstream-Service-Time: *", "Content-Length: 5",
			},
		},
		{
			name: "pass through, proper case",
			hcm:  "server_header_transformation: PASS_THROUGH\nhttp_protocol_options: {header_key_format: {proper_case_words: {}}}\n",
			want: []string{
				"Content-Type: text/plain", "X-Custom: a", "Server: upstream-srv", "X-Custom: b",
				"X-Request-Id: up-id", "X-Envoy-Attempt-Count: 7", "Set-Cookie: a=1", "Set-Cookie: b=2",
				"Date: *", "X-Envoy-Upstream-Service-Time: *", "Content-Length: 5",
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			hcm := fmt.Sprintf("stat_prefix: ingress\n%sroute_config:\n  virtual_hosts:\n  - name: all\n    domains: [\"*\"]\n%s    routes:\n    - match: {prefix: \"/\"}\n      route: {cluster: web}\n",
				tc.hcm, tc.vhost) + fmt.Sprintf(routerFilter, tc.router)
			logged := hcm + fmt.Sprintf("access_log:\n- name: envoy.access_loggers.file\n  typed_config:\n    \"@type\": type.googleapis.com/envoy.extensions.access_loggers.file.v3.FileAccessLog\n    path: %s\n",
				filepath.Join(t.TempDir(), "access.log"))
			direct := headLines(t, newEnv(t, envOptions{clusters: []string{staticCluster("web", "", up)}, hcm: hcm}).addr)
			mapped := headLines(t, newEnv(t, envOptions{clusters: []string{staticCluster("web", "", up)}, hcm: logged}).addr)
			compareHeads(t, direct, mapped, tc.want)
		})
	}
}

// headLines sends one GET to the proxy at addr and returns its response's header lines after
// the status line, with the values that change from run to run (Date, the service time when
// Legate measures it, a request id Legate generated) replaced by "*", and checks the body.
func headLines(t *testing.T, addr string) []string {
	t.Helper()
	raw := exchangeRaw(t, addr, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	head, body, ok := strings.Cut(raw, "\r\n\r\n")
	if !ok || body != "hello" {
		t.Fatalf("response %q: want a head and the body hello", raw)
	}
	lines := strings.Split(head, "\r\n")
	if lines[0] != "HTTP/1.1 200 OK" {
		t.Fatalf("status line %q; want HTTP/1.1 200 OK", lines[0])
	}
	lines = lines[1:]
	for i, l := range lines {
		k, v, _ := strings.Cut(l, ": ")
		if strings.EqualFold(k, "date") || strings.EqualFold(k, hdrServiceTime) && measured.MatchString(v) ||
			strings.EqualFold(k, hdrRequestID) && generated.MatchString(v) {
			lines[i] = k + ": *"
		}
	}
	return lines
}

// measured matches a service time Legate wrote (a few milliseconds at most here), not the
// upstream's 999; generated a request id Legate made (a UUID), not the upstream's.
var (
	measured  = regexp.MustCompile(`^\d{1,2}$`)
	generated = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)
)

// TestAddedNamesAreAppendNames pins appendDirectHead's spelled-out names to what
// config.AppendName makes of the canonical keys, in each case it writes.
func TestAddedNamesAreAppendNames(t *testing.T) {
	keys := map[int]string{addedServer: hdrServer, addedDate: hdrDate, addedRequestID: hdrRequestID, addedAttempts: hdrAttemptCount, addedSvcTime: hdrServiceTime}
	if len(keys) != len(addedNames) {
		t.Fatalf("%d added names; the test knows %d", len(addedNames), len(keys))
	}
	for i, k := range keys {
		for _, c := range []config.HeaderCase{config.HeaderCaseLower, config.HeaderCaseProper} {
			want := string(config.AppendName(nil, k, c)) + ": "
			if got := string(appendAdded(nil, c == config.HeaderCaseProper, i)); got != want {
				t.Errorf("%s in case %v: appendAdded writes %q; AppendName %q", k, c, got, want)
			}
		}
	}
}

// TestDirectResponseHeadMatchesMappedH2 is TestDirectResponseHeadMatchesMapped for an
// HTTP/2 client (a prior-knowledge connection read with x/net/http2's Framer and HPACK
// decoder): the direct head's fields (h2stream.pre) equal the map path's, and come in the
// direct path's order.
func TestDirectResponseHeadMatchesMappedH2(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	nettest.Serve(t, ln, func(c net.Conn) {
		serveRaw(c, []byte(strings.Replace(directUpstreamResponse, "Content-Length", "Trailer: x-t\r\nContent-Length", 1)))
	})
	up := ln.Addr().String()
	hcm := webHCM + "always_set_request_id_in_response: true\n"
	logged := hcm + fmt.Sprintf("access_log:\n- name: envoy.access_loggers.file\n  typed_config:\n    \"@type\": type.googleapis.com/envoy.extensions.access_loggers.file.v3.FileAccessLog\n    path: %s\n",
		filepath.Join(t.TempDir(), "access.log"))
	direct := h2HeadFields(t, newEnv(t, envOptions{clusters: []string{staticCluster("web", "", up)}, hcm: hcm}).addr)
	mapped := h2HeadFields(t, newEnv(t, envOptions{clusters: []string{staticCluster("web", "", up)}, hcm: logged}).addr)
	want := []string{
		":status: 200", "content-type: text/plain", "x-custom: a", "x-custom: b",
		"x-envoy-attempt-count: 7", "set-cookie: a=1", "set-cookie: b=2", "server: envoy", "date: *",
		"x-request-id: *", "x-envoy-upstream-service-time: *", "content-length: 5",
	}
	compareHeads(t, direct, mapped, want)
}

// compareHeads checks a direct head's fields against want, in order, and against the map
// path's, as a set (the map path's order is the map's).
func compareHeads(t *testing.T, direct, mapped, want []string) {
	t.Helper()
	if !slices.Equal(direct, want) {
		t.Errorf("direct head:\n%s\nwant:\n%s", strings.Join(direct, "\n"), strings.Join(want, "\n"))
	}
	direct, mapped = slices.Sorted(slices.Values(direct)), slices.Sorted(slices.Values(mapped))
	if !slices.Equal(direct, mapped) {
		t.Errorf("direct head (sorted):\n%s\nmap path's (sorted):\n%s", strings.Join(direct, "\n"), strings.Join(mapped, "\n"))
	}
}

// h2HeadFields sends one GET over HTTP/2 to the proxy at addr and returns its response's
// header fields in order, normalized as headLines does, and checks the body.
func h2HeadFields(t *testing.T, addr string) []string {
	t.Helper()
	fr, c := frameClient(t, addr)
	c.SetDeadline(time.Now().Add(wait))
	if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: requestBlock("/"), EndStream: true, EndHeaders: true}); err != nil {
		t.Fatal(err)
	}
	var fields []string
	var body []byte
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			t.Fatalf("ReadFrame: %v (fields %q, body %q)", err, fields, body)
		}
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if !f.IsAck() {
				fr.WriteSettingsAck()
			}
		case *http2.MetaHeadersFrame:
			for _, hf := range f.Fields {
				v := hf.Value
				if hf.Name == "date" || hf.Name == "x-envoy-upstream-service-time" && measured.MatchString(v) ||
					hf.Name == "x-request-id" && generated.MatchString(v) {
					v = "*"
				}
				fields = append(fields, hf.Name+": "+v)
			}
			if f.StreamEnded() {
				t.Fatalf("the response ended without its body (fields %q)", fields)
			}
		case *http2.DataFrame:
			body = append(body, f.Data()...)
			if f.StreamEnded() {
				if string(body) != "hello" {
					t.Fatalf("body %q; want hello", body)
				}
				return fields
			}
		}
	}
}

// upstreamFieldKind is the kind of a field whose name is k (knownKinds; kept when unknown).
func upstreamFieldKind(k http1.Known) fieldKind {
	if int(k) >= len(knownKinds) {
		return fieldKept
	}
	return knownKinds[k]
}

// TestUpstreamFieldKindCanon: each name knownKinds treats apart is found (by
// http1.KnownName, as the pool finds it) in lower, canonical and upper case, and no other
// name of its length is: every one-byte change of the canonical spelling is kept.
func TestUpstreamFieldKindCanon(t *testing.T) {
	const letters = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ-_0"
	for lower, kind := range map[string]fieldKind{
		"connection": fieldDropped, "content-length": fieldDropped, "date": fieldDropped,
		"keep-alive": fieldDropped, "proxy-connection": fieldDropped, "server": fieldServer,
		"te": fieldDropped, "transfer-encoding": fieldDropped, "upgrade": fieldDropped,
		"x-request-id": fieldRequestID, "x-envoy-attempt-count": fieldAttempts,
		"x-envoy-upstream-service-time": fieldSvcTime, "trailer": fieldKept,
	} {
		canon := http.CanonicalHeaderKey(lower)
		for _, name := range []string{lower, canon, strings.ToUpper(lower)} {
			if got := upstreamFieldKind(http1.KnownName([]byte(name))); got != kind {
				t.Errorf("upstreamFieldKind(%q) = %d; want %d", name, got, kind)
			}
		}
		b := []byte(canon)
		for i := range b {
			for _, c := range []byte(letters) {
				old := b[i]
				if c|0x20 == old|0x20 {
					continue
				}
				b[i] = c
				if got := upstreamFieldKind(http1.KnownName(b)); got != fieldKept {
					t.Errorf("upstreamFieldKind(%q) = %d; want %d (kept)", b, got, fieldKept)
				}
				b[i] = old
			}
		}
	}
}

// TestKindNames: each kind the connection manager or the router sets is the one name whose
// bit planDirect writes as a constant.
func TestKindNames(t *testing.T) {
	for kind, k := range map[fieldKind]http1.Known{
		fieldServer: http1.KnownServer, fieldRequestID: http1.KnownRequestID,
		fieldAttempts: http1.KnownAttemptCount, fieldSvcTime: http1.KnownServiceTime,
	} {
		if got, want := kindNames[kind], uint32(1)<<k; got != want {
			t.Errorf("kindNames[%d] = %#x; want %#x (%v alone)", kind, got, want, k)
		}
	}
}
