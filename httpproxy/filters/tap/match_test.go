package tap

import (
	"bytes"
	"net/http"
	"strings"
	"testing"

	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/config/common/matcher/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"sigs.k8s.io/yaml"

	"github.com/legateproxy/legate/httpproxy/route"
)

// predicate decodes a MatchPredicate written in YAML.
func predicate(t testing.TB, y string) *matcherv3.MatchPredicate {
	t.Helper()
	j, err := yaml.YAMLToJSON([]byte(y))
	if err != nil {
		t.Fatal(err)
	}
	p := &matcherv3.MatchPredicate{}
	if err := protojson.Unmarshal(j, p); err != nil {
		t.Fatalf("predicate %s: %v", y, err)
	}
	return p
}

// exchange is one synthetic stream for the matcher tests.
type exchange struct {
	reqHeaders   map[string]string // ":path" etc. or header names
	reqBody      []string          // chunks
	reqTrailers  map[string]string
	status       int
	respHeaders  map[string]string
	respBody     []string
	respTrailers map[string]string
}

func request(h map[string]string) *route.Request {
	r := &route.Request{Authority: "example.com", Path: "/", Method: "GET", Scheme: "http", Header: http.Header{}}
	for k, v := range h {
		switch k {
		case ":path":
			r.Path = v
		case ":method":
			r.Method = v
		case ":authority":
			r.Authority = v
		default:
			r.Header.Add(k, v)
		}
	}
	return r
}

func header(h map[string]string) http.Header {
	if h == nil {
		return nil
	}
	out := http.Header{}
	for k, v := range h {
		out.Add(k, v)
	}
	return out
}

// run feeds e to a fresh state of m, in stream order, and returns the final status.
func run(m *Matcher, e exchange) status {
	s := m.newState()
	s.onRequestHeaders(request(e.reqHeaders))
	for _, c := range e.reqBody {
		s.onBody(evRequestBody, []byte(c))
	}
	if e.reqTrailers != nil {
		s.onHeaders(evRequestTrailers, header(e.reqTrailers), 0)
	}
	st := e.status
	if st == 0 {
		st = 200
	}
	s.onHeaders(evResponseHeaders, header(e.respHeaders), st)
	for _, c := range e.respBody {
		s.onBody(evResponseBody, []byte(c))
	}
	if e.respTrailers != nil {
		s.onHeaders(evResponseTrailers, header(e.respTrailers), 0)
	}
	return s.result()
}

func TestMatchPredicates(t *testing.T) {
	reqHdr := `http_request_headers_match: {headers: [{name: x-tap, string_match: {exact: "yes"}}]}`
	tests := []struct {
		name string
		pred string
		e    exchange
		want bool
	}{
		{"any_match", `any_match: true`, exchange{}, true},
		{"request headers match", reqHdr, exchange{reqHeaders: map[string]string{"x-tap": "yes"}}, true},
		{"request headers differ", reqHdr, exchange{reqHeaders: map[string]string{"x-tap": "no"}}, false},
		{"request headers absent", reqHdr, exchange{}, false},
		{"request pseudo-header :path prefix", `http_request_headers_match: {headers: [{name: ":path", string_match: {prefix: "/api"}}]}`,
			exchange{reqHeaders: map[string]string{":path": "/api/v1"}}, true},
		{"request headers all must match", `http_request_headers_match: {headers: [{name: a, present_match: true}, {name: b, present_match: true}]}`,
			exchange{reqHeaders: map[string]string{"a": "1"}}, false},
		{"response headers match", `http_response_headers_match: {headers: [{name: content-type, string_match: {prefix: "text/"}}]}`,
			exchange{respHeaders: map[string]string{"Content-Type": "text/plain"}}, true},
		{"response :status range", `http_response_headers_match: {headers: [{name: ":status", range_match: {start: 500, end: 600}}]}`,
			exchange{status: 503}, true},
		{"response :status outside range", `http_response_headers_match: {headers: [{name: ":status", range_match: {start: 500, end: 600}}]}`,
			exchange{status: 200}, false},
		{"request trailers match", `http_request_trailers_match: {headers: [{name: grpc-status, string_match: {exact: "0"}}]}`,
			exchange{reqTrailers: map[string]string{"grpc-status": "0"}}, true},
		{"request trailers never sent", `http_request_trailers_match: {headers: [{name: grpc-status, present_match: true}]}`,
			exchange{}, false},
		{"response trailers match", `http_response_trailers_match: {headers: [{name: grpc-status, string_match: {exact: "14"}}]}`,
			exchange{respTrailers: map[string]string{"grpc-status": "14"}}, true},
		{"response trailers differ", `http_response_trailers_match: {headers: [{name: grpc-status, string_match: {exact: "14"}}]}`,
			exchange{respTrailers: map[string]string{"grpc-status": "0"}}, false},
		{"and_match all", `and_match: {rules: [{any_match: true}, ` + reqHdr + `]}`,
			exchange{reqHeaders: map[string]string{"x-tap": "yes"}}, true},
		{"and_match one fails", `and_match: {rules: [{any_match: true}, {` + reqHdr + `}]}`,
			exchange{}, false},
		{"or_match one", `or_match: {rules: [{` + reqHdr + `}, {http_response_headers_match: {headers: [{name: ":status", string_match: {exact: "404"}}]}}]}`,
			exchange{status: 404}, true},
		{"or_match none", `or_match: {rules: [{` + reqHdr + `}, {http_response_headers_match: {headers: [{name: ":status", string_match: {exact: "404"}}]}}]}`,
			exchange{}, false},
		{"not_match inverts a miss", `not_match: {` + reqHdr + `}`, exchange{}, true},
		{"not_match inverts a hit", `not_match: {` + reqHdr + `}`, exchange{reqHeaders: map[string]string{"x-tap": "yes"}}, false},
		{"request body string", `http_request_generic_body_match: {patterns: [{string_match: "needle"}]}`,
			exchange{reqBody: []string{"hay needle hay"}}, true},
		{"request body string across chunks", `http_request_generic_body_match: {patterns: [{string_match: "needle"}]}`,
			exchange{reqBody: []string{"hay nee", "d", "le hay"}}, true},
		{"request body all patterns needed", `http_request_generic_body_match: {patterns: [{string_match: "one"}, {string_match: "two"}]}`,
			exchange{reqBody: []string{"one three"}}, false},
		{"request body all patterns found", `http_request_generic_body_match: {patterns: [{string_match: "one"}, {string_match: "two"}]}`,
			exchange{reqBody: []string{"two", " and one"}}, true},
		{"request body hex pattern", `http_request_generic_body_match: {patterns: [{binary_match: "3q2+7w=="}]}`,
			exchange{reqBody: []string{"\x00\x01\xde\xad\xbe\xef\x02"}}, true},
		{"request body within bytes_limit", `http_request_generic_body_match: {bytes_limit: 8, patterns: [{string_match: "abc"}]}`,
			exchange{reqBody: []string{"12345", "abc9999"}}, true},
		{"request body beyond bytes_limit", `http_request_generic_body_match: {bytes_limit: 6, patterns: [{string_match: "abc"}]}`,
			exchange{reqBody: []string{"12345", "abc9999"}}, false},
		{"request body absent", `http_request_generic_body_match: {patterns: [{string_match: "x"}]}`, exchange{}, false},
		{"response body string", `http_response_generic_body_match: {patterns: [{string_match: "error"}]}`,
			exchange{respBody: []string{`{"err`, `or": 1}`}}, true},
		{"response body is not the request body", `http_response_generic_body_match: {patterns: [{string_match: "error"}]}`,
			exchange{reqBody: []string{"error"}}, false},
		{"nested", `and_match: {rules: [{or_match: {rules: [{` + reqHdr + `}, {not_match: {any_match: true}}]}}, {not_match: {http_response_headers_match: {headers: [{name: ":status", string_match: {exact: "500"}}]}}}]}`,
			exchange{reqHeaders: map[string]string{"x-tap": "yes"}, status: 200}, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m, err := compileMatcher(predicate(t, tc.pred), "match")
			if err != nil {
				t.Fatalf("compileMatcher: %v", err)
			}
			if got := run(m, tc.e).matches; got != tc.want {
				t.Errorf("matches = %v; want %v", got, tc.want)
			}
		})
	}
}

// TestMatchStatusAsPartsArrive checks the interim statuses streaming relies on: a header
// matcher decides on its headers; a not over an undecided matcher matches until then.
func TestMatchStatusAsPartsArrive(t *testing.T) {
	m, err := compileMatcher(predicate(t, `not_match: {http_response_headers_match: {headers: [{name: ":status", string_match: {exact: "500"}}]}}`), "match")
	if err != nil {
		t.Fatal(err)
	}
	s := m.newState()
	if got, want := s.result(), (status{matches: true, mightChange: true}); got != want {
		t.Errorf("new stream: status = %+v; want %+v", got, want)
	}
	s.onRequestHeaders(request(nil))
	if got, want := s.result(), (status{matches: true, mightChange: true}); got != want {
		t.Errorf("after request headers: status = %+v; want %+v", got, want)
	}
	s.onHeaders(evResponseHeaders, http.Header{}, 500)
	if got, want := s.result(), (status{}); got != want {
		t.Errorf("after response headers: status = %+v; want %+v", got, want)
	}
}

func TestCompileMatcherErrors(t *testing.T) {
	tests := []struct {
		name, pred, want string
	}{
		{"no rule", `{}`, "match: no rule"},
		{"any false", `any_match: false`, "match.any_match = false"},
		{"one-rule and", `and_match: {rules: [{any_match: true}]}`, "match.and_match.rules: 1 rules; must have at least 2"},
		{"bad header regex", `or_match: {rules: [{any_match: true}, {http_request_headers_match: {headers: [{name: a, string_match: {safe_regex: {regex: "("}}}]}}]}`,
			"match.or_match.rules[1].http_request_headers_match.headers"},
		{"empty body pattern", `http_response_generic_body_match: {patterns: [{string_match: ""}]}`,
			"match.http_response_generic_body_match.patterns[0]: empty"},
		{"no body patterns", `http_request_generic_body_match: {bytes_limit: 3}`,
			"match.http_request_generic_body_match.patterns: empty"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := compileMatcher(predicate(t, tc.pred), "match")
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("compileMatcher error = %v; want one containing %q", err, tc.want)
			}
		})
	}
	t.Run("too deep", func(t *testing.T) {
		p := &matcherv3.MatchPredicate{Rule: &matcherv3.MatchPredicate_AnyMatch{AnyMatch: true}}
		for range maxDepth + 2 {
			p = &matcherv3.MatchPredicate{Rule: &matcherv3.MatchPredicate_NotMatch{NotMatch: p}}
		}
		if _, err := compileMatcher(p, "match"); err == nil || !strings.Contains(err.Error(), "nested deeper") {
			t.Errorf("compileMatcher error = %v; want the nesting limit", err)
		}
	})
}

// FuzzBodyMatch checks the chunked body search against a brute-force oracle: every pattern
// must lie wholly within the first bytes_limit bytes of the whole body.
func FuzzBodyMatch(f *testing.F) {
	f.Add([]byte("hay needle hay"), []byte("needle"), []byte("hay"), uint8(3), uint16(0))
	f.Add([]byte("abcabcabd"), []byte("abd"), []byte("cab"), uint8(1), uint16(9))
	f.Add([]byte("0123456789"), []byte("789"), []byte("0"), uint8(4), uint16(9))
	f.Fuzz(func(t *testing.T, body, p1, p2 []byte, chunk uint8, limit uint16) {
		if len(p1) == 0 || len(p2) == 0 || len(p1) > 64 || len(p2) > 64 || len(body) > 4096 {
			return
		}
		m := &Matcher{}
		rule := &bodyRule{patterns: [][]byte{p1, p2}, limit: uint64(limit), longest: max(len(p1), len(p2))}
		m.nodes = []node{{kind: nodeRequestBody, body: rule}}
		m.bodies = 1
		s := m.newState()
		step := int(chunk)%16 + 1
		for i := 0; i < len(body); i += step {
			s.onBody(evRequestBody, body[i:min(i+step, len(body))])
		}
		window := body
		if limit != 0 && int(limit) < len(window) {
			window = window[:limit]
		}
		want := bytes.Contains(window, p1) && bytes.Contains(window, p2)
		if got := s.result().matches; got != want {
			t.Errorf("body %q in chunks of %d, patterns %q %q, limit %d: matches = %v; want %v", body, step, p1, p2, limit, got, want)
		}
	})
}
