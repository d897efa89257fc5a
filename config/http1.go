package config

import (
	"encoding/binary"
	"fmt"
	"strings"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	preservecasev3 "github.com/envoyproxy/go-control-plane/envoy/extensions/http/header_formatters/preserve_case/v3"

	"github.com/legateproxy/legate/internal/http1"
)

// HeaderCase is how an HTTP/1 codec spells the header names it writes
// (Http1ProtocolOptions.header_key_format).
type HeaderCase uint8

const (
	// HeaderCaseLower writes every name in lower case, Envoy's default.
	HeaderCaseLower HeaderCase = iota
	// HeaderCaseProper is proper_case_words: a letter at the start of the name or after a
	// character that is neither a letter nor a digit is upper case, every other letter lower
	// case ("x-foo_bar" is written "X-Foo_Bar").
	HeaderCaseProper
	// HeaderCasePreserve is the preserve_case stateful formatter: the names of the headers
	// this side's codec reads keep the peer's spelling when the other side's codec writes
	// them; names without a recorded spelling (those Legate adds) are written in
	// PreserveOthers case.
	HeaderCasePreserve
)

// PreserveCaseName is the name of Envoy's preserve_case stateful header formatter.
const PreserveCaseName = "envoy.http.stateful_header_formatters.preserve_case"

// HTTP1Options is core.v3.Http1ProtocolOptions, shared by the connection manager
// (http_protocol_options: the downstream codec) and clusters (the deprecated
// Cluster.http_protocol_options, or explicit_http_config.http_protocol_options of the typed
// HttpProtocolOptions: the upstream codec). The zero value is Envoy's defaults.
//
// As in Envoy, accept_http_10, default_host_for_http_10 and allow_absolute_url are about
// requests, so only a connection manager reads them; send_fully_qualified_url is about the
// requests Legate sends, so only a cluster reads it.
type HTTP1Options struct {
	HeaderCase HeaderCase
	// PreserveOthers is the case of names without a recorded spelling under
	// HeaderCasePreserve: formatter_type_on_envoy_headers (DEFAULT: lower, PROPER_CASE).
	PreserveOthers HeaderCase
	// AcceptHTTP10 is accept_http_10: without it an HTTP/1.0 request gets 426.
	AcceptHTTP10 bool
	// DefaultHostForHTTP10 is default_host_for_http_10, the host of an HTTP/1.0 request
	// without one.
	DefaultHostForHTTP10 string
	// NoAbsoluteURL is allow_absolute_url set to false: an absolute-form target stays the
	// path, which is not relative, so the request gets 404.
	NoAbsoluteURL bool
	// EnableTrailers is enable_trailers: chunked trailer sections are read and written;
	// without it they are dropped both ways.
	EnableTrailers bool
	// AllowChunkedLength is allow_chunked_length: a message with both Transfer-Encoding:
	// chunked and Content-Length is read as chunked, its Content-Length removed; without it
	// such a request gets 400 and such a response is a protocol error.
	AllowChunkedLength bool
	// SendFullyQualifiedURL is send_fully_qualified_url: requests go upstream with an
	// absolute-form target (scheme://host/path), as to a forward proxy.
	SendFullyQualifiedURL bool
}

// HTTP1OptionsFromProto converts p (nil: the defaults). Error messages start with the field's
// path below p.
func HTTP1OptionsFromProto(p *corev3.Http1ProtocolOptions) (HTTP1Options, error) {
	var o HTTP1Options
	if p == nil {
		return o, nil
	}
	o.AcceptHTTP10 = p.GetAcceptHttp_10()
	o.DefaultHostForHTTP10 = p.GetDefaultHostForHttp_10()
	if o.DefaultHostForHTTP10 != "" && !http1.ValidAuthority(o.DefaultHostForHTTP10) {
		return o, fmt.Errorf("default_host_for_http_10 = %q; not a valid host[:port]", o.DefaultHostForHTTP10)
	}
	o.NoAbsoluteURL = p.GetAllowAbsoluteUrl() != nil && !p.GetAllowAbsoluteUrl().GetValue()
	o.EnableTrailers = p.GetEnableTrailers()
	o.AllowChunkedLength = p.GetAllowChunkedLength()
	o.SendFullyQualifiedURL = p.GetSendFullyQualifiedUrl()
	if err := o.headerKeyFormat(p.GetHeaderKeyFormat()); err != nil {
		return o, fmt.Errorf("header_key_format.%w", err)
	}
	return o, nil
}

// headerKeyFormat reads header_key_format: proper_case_words, or the preserve_case stateful
// formatter (the only stateful formatter Envoy has).
func (o *HTTP1Options) headerKeyFormat(f *corev3.Http1ProtocolOptions_HeaderKeyFormat) error {
	switch {
	case f.GetProperCaseWords() != nil:
		o.HeaderCase = HeaderCaseProper
	case f.GetStatefulFormatter() != nil:
		sf := f.GetStatefulFormatter()
		var pc preservecasev3.PreserveCaseFormatterConfig
		if err := sf.GetTypedConfig().UnmarshalTo(&pc); err != nil {
			return fmt.Errorf("stateful_formatter: %q (%s): set; not implemented by Legate (only %s)",
				sf.GetName(), sf.GetTypedConfig().GetTypeUrl(), PreserveCaseName)
		}
		if pc.GetForwardReasonPhrase() {
			return fmt.Errorf("stateful_formatter.typed_config.forward_reason_phrase: set; not implemented by Legate")
		}
		o.HeaderCase = HeaderCasePreserve
		if pc.GetFormatterTypeOnEnvoyHeaders() == preservecasev3.PreserveCaseFormatterConfig_PROPER_CASE {
			o.PreserveOthers = HeaderCaseProper
		}
	}
	return nil
}

// StatelessCase is the case names are written in when no spelling was recorded for them:
// the preserve_case formatter records spellings only for the headers its own codec reads.
func (o *HTTP1Options) StatelessCase() HeaderCase {
	if o.HeaderCase == HeaderCasePreserve {
		return HeaderCaseLower
	}
	return o.HeaderCase
}

// AppendName appends the header name to dst in case c (HeaderCasePreserve is lower case: a
// name with a recorded spelling is written as recorded by the caller).
func AppendName(dst []byte, name string, c HeaderCase) []byte {
	if c != HeaderCaseProper {
		if l, ok := KnownLower(name); ok {
			return append(dst, l...)
		}
	}
	// The name is copied whole and its case fixed in place, eight bytes at a time when lower
	// case: appending byte by byte was about 1,700 instructions of a proxied request.
	n := len(dst)
	dst = append(dst, name...)
	fixCase(dst[n:], c)
	return dst
}

// AppendNameBytes is AppendName for a name as it came off the wire, in any case.
func AppendNameBytes(dst, name []byte, c HeaderCase) []byte {
	n := len(dst)
	dst = append(dst, name...)
	fixCase(dst[n:], c)
	return dst
}

// fixCase rewrites the name in b in place in case c: proper case (a capital after each
// non-alphanumeric byte), otherwise lower case.
func fixCase(b []byte, c HeaderCase) {
	if c != HeaderCaseProper {
		lowerInPlace(b)
		return
	}
	upper := true
	for i, ch := range b {
		ch = lowerASCII(ch)
		alpha := 'a' <= ch && ch <= 'z'
		if upper && alpha {
			ch -= 'a' - 'A'
		}
		b[i] = ch
		upper = !alpha && !('0' <= ch && ch <= '9')
	}
}

// AppendLowerName is AppendName for a name already in lower case (one the codec adds, such
// as content-length): only proper case changes it, so the other cases copy it as it is.
func AppendLowerName(dst []byte, name string, c HeaderCase) []byte {
	if c == HeaderCaseProper {
		return AppendName(dst, name, c)
	}
	return append(dst, name...)
}

// lowerInPlace lower-cases the ASCII letters of b. Eight bytes are done at once: a byte's
// high bit marks it as 'A'..'Z' after two additions on its low seven bits (no carry crosses
// into the next byte), and that bit, moved to 0x20, is the case bit to set.
func lowerInPlace(b []byte) {
	n := len(b)
	if n < 8 {
		for i, ch := range b {
			b[i] = lowerASCII(ch)
		}
		return
	}
	for i := 0; i+8 <= n; i += 8 {
		lowerWord(b[i:])
	}
	if n%8 != 0 {
		// The tail as the last eight bytes, overlapping the word before: lowering a byte
		// twice changes nothing, and a word costs less than the tail byte by byte.
		lowerWord(b[n-8:])
	}
}

// lowerWord lower-cases the ASCII letters of b's first eight bytes.
func lowerWord(b []byte) {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	x := binary.LittleEndian.Uint64(b)
	low := x &^ highs
	isUpper := (low + (0x80-'A')*ones) &^ (low + (0x80-'Z'-1)*ones) &^ x & highs
	binary.LittleEndian.PutUint64(b, x|isUpper>>2)
}

func lowerASCII(c byte) byte {
	if 'A' <= c && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}

// knownNames are the canonical names Legate writes most (the connection manager's and the
// router's, frequent request and response fields). Written in lower case they are a table
// lookup, one comparison and a copy of the lower-case constant: copying and lowering each
// such name was about 120 instructions, eight times a proxied request.
var knownNames = [...]string{
	"Accept", "Accept-Encoding", "Accept-Language", "Accept-Ranges", "Access-Control-Allow-Origin",
	"Age", "Authorization", "Cache-Control", "Content-Encoding", "Content-Type", "Cookie", "Date",
	"Etag", "Expect", "Expires", "Grpc-Accept-Encoding", "Grpc-Encoding", "Grpc-Message",
	"Grpc-Status", "If-Modified-Since", "If-None-Match", "Last-Modified", "Location", "Origin",
	"Pragma", "Range", "Referer", "Server", "Set-Cookie", "Strict-Transport-Security", "Te",
	"Traceparent", "User-Agent", "Vary", "Via", "X-Content-Type-Options", "X-Envoy-Attempt-Count",
	"X-Envoy-Expected-Rq-Timeout-Ms", "X-Envoy-External-Address", "X-Envoy-Internal",
	"X-Envoy-Original-Path", "X-Envoy-Upstream-Service-Time", "X-Forwarded-For",
	"X-Forwarded-Proto", "X-Request-Id",
}

// knownSlots hold each of knownNames, with its lower-case spelling, at its knownSlot: one
// load and one comparison find a name (a table of indexes into knownNames and another of
// their lower-case spellings was three loads, each bounds-checked). A name whose slot
// another took first is not known (lowered the long way); TestKnownNamesHaveSlots holds
// that none is.
var knownSlots = func() (slots [128]knownSpelling) {
	for _, n := range knownNames {
		if j := knownSlot(n); slots[j].name == "" {
			l := strings.ToLower(n)
			slots[j].name, slots[j].lower, slots[j].field = n, l, l+": "
		}
	}
	return slots
}()

// knownSpelling is a known name with its lower-case spellings, alone and as a field line's
// start.
type knownSpelling struct{ name, lower, field string }

// knownSlot hashes a name of two bytes or more by its length, second and last bytes (no two
// knownNames collide).
func knownSlot(name string) int {
	return int((uint(len(name))*12 + uint(name[1])*64 + uint(name[len(name)-1])) & 127)
}

// KnownLower returns the lower-case spelling of name when it is one of the names Legate
// writes most in their canonical spelling (knownNames), exactly. It is inlined: a writer of
// many names in lower case calls AppendName only for the others (AppendName's call was about
// 40 instructions a name).
func KnownLower(name string) (string, bool) {
	if k := knownEntry(name); k != nil {
		return k.lower, true
	}
	return "", false
}

// KnownLowerField is KnownLower with ": " after the name, the start of a field line in
// lower case, one copy for the two. It is inlined too.
func KnownLowerField(name string) (string, bool) {
	if k := knownEntry(name); k != nil {
		return k.field, true
	}
	return "", false
}

// knownEntry returns name's entry in knownSlots, or nil when name is not a known name.
func knownEntry(name string) *knownSpelling {
	if len(name) < 2 {
		return nil
	}
	if k := &knownSlots[knownSlot(name)]; k.name == name {
		return k
	}
	return nil
}
