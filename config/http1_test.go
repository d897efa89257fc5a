package config

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

const http1Cluster = `name: web
connect_timeout: 1s
load_assignment: {cluster_name: web, endpoints: [{lb_endpoints: [{endpoint: {address: {socket_address: {address: 127.0.0.1, port_value: 80}}}}]}]}
`

// TestClusterHTTP1Options: each spelling of a cluster's Http1ProtocolOptions becomes
// Cluster.HTTP1; the typed HttpProtocolOptions, when set, replaces the deprecated field (as
// Envoy), which is then listed as ignored.
func TestClusterHTTP1Options(t *testing.T) {
	const preserve = `{stateful_formatter: {name: preserve_case, typed_config: {"@type": type.googleapis.com/envoy.extensions.http.header_formatters.preserve_case.v3.PreserveCaseFormatterConfig, formatter_type_on_envoy_headers: PROPER_CASE}}}`
	typed := func(config string) string {
		return `typed_extension_protocol_options:
  envoy.extensions.upstreams.http.v3.HttpProtocolOptions:
    "@type": type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions
    ` + config + "\n"
	}
	tests := []struct {
		name, extra string
		want        HTTP1Options
		ignored     string
	}{
		{name: "none"},
		{name: "deprecated field", extra: "http_protocol_options: {enable_trailers: true, allow_chunked_length: true, send_fully_qualified_url: true}\n",
			want: HTTP1Options{EnableTrailers: true, AllowChunkedLength: true, SendFullyQualifiedURL: true}},
		{name: "explicit_http_config", extra: typed("explicit_http_config: {http_protocol_options: {header_key_format: {proper_case_words: {}}}}"),
			want: HTTP1Options{HeaderCase: HeaderCaseProper}},
		{name: "use_downstream_protocol_config", extra: typed("use_downstream_protocol_config: {http_protocol_options: {header_key_format: " + preserve + "}}"),
			want: HTTP1Options{HeaderCase: HeaderCasePreserve, PreserveOthers: HeaderCaseProper}},
		{name: "typed replaces the deprecated field", extra: "http_protocol_options: {enable_trailers: true}\n" + typed("explicit_http_config: {http_protocol_options: {}}"),
			ignored: "http_protocol_options (replaced by"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := mustCluster(t, http1Cluster+tt.extra)
			if diff := cmp.Diff(tt.want, c.HTTP1); diff != "" {
				t.Errorf("HTTP1 (-want +got):\n%s", diff)
			}
			if tt.ignored != "" && !strings.Contains(strings.Join(c.Ignored, "\n"), tt.ignored) {
				t.Errorf("Ignored = %q; want an entry %q", c.Ignored, tt.ignored)
			}
		})
	}
}

// TestHTTP1OptionsRefused: what Legate cannot honour in Http1ProtocolOptions is refused with
// its path.
func TestHTTP1OptionsRefused(t *testing.T) {
	tests := []struct{ name, extra, want string }{
		{"other stateful formatter", `http_protocol_options: {header_key_format: {stateful_formatter: {name: x, typed_config: {"@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router}}}}`,
			"http_protocol_options.header_key_format.stateful_formatter: \"x\""},
		{"forward_reason_phrase", `http_protocol_options: {header_key_format: {stateful_formatter: {name: p, typed_config: {"@type": type.googleapis.com/envoy.extensions.http.header_formatters.preserve_case.v3.PreserveCaseFormatterConfig, forward_reason_phrase: true}}}}`,
			"forward_reason_phrase: set; not implemented by Legate"},
		{"bad default host", `http_protocol_options: {default_host_for_http_10: "a b"}`,
			`http_protocol_options.default_host_for_http_10 = "a b"; not a valid host[:port]`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pc, err := clusterYAML(t, http1Cluster+tt.extra+"\n")
			if err != nil {
				t.Fatal(err)
			}
			if _, err := ClusterFromProto(pc, Limits{}); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("ClusterFromProto() = %v; want an error containing %q", err, tt.want)
			}
		})
	}
}

// TestAppendName checks the spellings a header name is written in, appended after bytes
// already there: lower case (and preserve, whose recorded spellings the caller writes),
// and Envoy's proper case (a capital after each non-alphanumeric byte).
func TestAppendName(t *testing.T) {
	for _, tc := range []struct {
		name string
		c    HeaderCase
		want string
	}{
		{"Content-Type", HeaderCaseLower, "content-type"},
		{"X-FOO_bar", HeaderCasePreserve, "x-foo_bar"},
		{"content-type", HeaderCaseProper, "Content-Type"},
		{"x-foo_bar.2b", HeaderCaseProper, "X-Foo_Bar.2b"},
		{"WWW-AUTHENTICATE", HeaderCaseProper, "Www-Authenticate"},
		{"a1b-", HeaderCaseProper, "A1b-"},
		{"", HeaderCaseProper, ""},
	} {
		if got := string(AppendName([]byte("> "), tc.name, tc.c)); got != "> "+tc.want {
			t.Errorf("AppendName(%q, %v) = %q; want %q", tc.name, tc.c, got, "> "+tc.want)
		}
	}
}

// TestLowerInPlace checks the word-at-a-time lower-casing against the byte-at-a-time one for
// every byte value at every position of a word and of the tail after it.
func TestLowerInPlace(t *testing.T) {
	for start := range 8 {
		in := make([]byte, 0, 256+start)
		for i := range start {
			in = append(in, byte('A'+i))
		}
		for v := range 256 {
			in = append(in, byte(v))
		}
		for end := len(in) - 16; end <= len(in); end++ {
			got := append([]byte(nil), in[:end]...)
			lowerInPlace(got)
			for i, ch := range in[:end] {
				if want := lowerASCII(ch); got[i] != want {
					t.Fatalf("lowerInPlace(start %d, len %d)[%d] = %#x; want %#x (from %#x)", start, end, i, got[i], want, ch)
				}
			}
		}
	}
}

// TestLowerInPlaceTails checks names of 8 to 23 bytes, whose tail is lowered as the last
// eight bytes over the word before: every byte value at every position, against the
// byte-at-a-time form, and AppendLowerName against AppendName for lower-case names.
func TestLowerInPlaceTails(t *testing.T) {
	for n := 8; n < 24; n++ {
		for pos := range n {
			for v := range 256 {
				in := []byte(strings.Repeat("AbZ-", 6)[:n])
				in[pos] = byte(v)
				got := append([]byte(nil), in...)
				lowerInPlace(got)
				for i, ch := range in {
					if want := lowerASCII(ch); got[i] != want {
						t.Fatalf("lowerInPlace(%q)[%d] = %#x; want %#x", in, i, got[i], want)
					}
				}
			}
		}
	}
	for _, name := range []string{"content-length", "transfer-encoding", "connection", "host", "x-a"} {
		for _, c := range []HeaderCase{HeaderCaseLower, HeaderCaseProper, HeaderCasePreserve} {
			if got, want := string(AppendLowerName([]byte("> "), name, c)), string(AppendName([]byte("> "), name, c)); got != want {
				t.Errorf("AppendLowerName(%q, %v) = %q; want %q", name, c, got, want)
			}
		}
	}
}

// TestKnownNamesHaveSlots checks that every known name has a slot of its own, so that it is
// written from its lower-case constant, and that names near them (another case, a byte
// changed, a prefix) are lowered the long way, to the same bytes lowerInPlace gives.
func TestKnownNamesHaveSlots(t *testing.T) {
	for i, n := range knownNames {
		if l, ok := KnownLower(n); !ok || l != strings.ToLower(n) {
			t.Errorf("KnownLower(%q) = %q, %v; want %q (slot %d taken by another name)", n, l, ok, strings.ToLower(n), knownSlot(n))
		}
		if f, ok := KnownLowerField(n); !ok || f != strings.ToLower(n)+": " {
			t.Errorf("KnownLowerField(%q) = %q, %v; want %q", n, f, ok, strings.ToLower(n)+": ")
		}
		for _, other := range []string{strings.ToLower(n), strings.ToUpper(n), n[:len(n)-1], n + "x", "X" + n[1:]} {
			if other == n {
				continue
			}
			if _, ok := KnownLower(other); ok && !isKnown(other) {
				t.Errorf("KnownLower(%q) found a name it is not (near %q)", other, knownNames[i])
			}
			if _, ok := KnownLowerField(other); ok && !isKnown(other) {
				t.Errorf("KnownLowerField(%q) found a name it is not (near %q)", other, knownNames[i])
			}
			b := []byte(other)
			lowerInPlace(b)
			for _, c := range []HeaderCase{HeaderCaseLower, HeaderCasePreserve} {
				if got := string(AppendName(nil, other, c)); got != string(b) {
					t.Errorf("AppendName(%q, %v) = %q; want %q", other, c, got, b)
				}
			}
		}
	}
	for _, n := range []string{"", "x", "X"} {
		if _, ok := KnownLower(n); ok {
			t.Errorf("KnownLower(%q) found a name", n)
		}
		if _, ok := KnownLowerField(n); ok {
			t.Errorf("KnownLowerField(%q) found a name", n)
		}
	}
}

func isKnown(name string) bool {
	for _, n := range knownNames {
		if n == name {
			return true
		}
	}
	return false
}
