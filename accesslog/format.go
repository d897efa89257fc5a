package accesslog

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"google.golang.org/protobuf/types/known/structpb"
)

// DefaultFormat is Envoy's default access log format.
const DefaultFormat = "[%START_TIME%] \"%REQ(:METHOD)% %REQ(X-ENVOY-ORIGINAL-PATH?:PATH)% %PROTOCOL%\" " +
	"%RESPONSE_CODE% %RESPONSE_FLAGS% %BYTES_RECEIVED% %BYTES_SENT% %DURATION% " +
	"%RESP(X-ENVOY-UPSTREAM-SERVICE-TIME)% \"%REQ(X-FORWARDED-FOR)%\" \"%REQ(USER-AGENT)%\" " +
	"\"%REQ(X-REQUEST-ID)%\" \"%REQ(:AUTHORITY)%\" \"%UPSTREAM_HOST%\"\n"

// Formatter is a compiled access log format (text or JSON). It is immutable and safe for
// concurrent use. It implements Envoy's SubstitutionFormatString.
type Formatter struct {
	text      []segment // text format; nil for JSON
	json      *jsonNode // JSON format; nil for text
	omitEmpty bool
	strings   bool // JSON values are all strings (FileAccessLog.json_format)
}

// ParseText compiles a text format string (text_format, text_format_source or the legacy
// format field). The output is the format with operators substituted; no newline is added.
func ParseText(format string, opts Options) (*Formatter, error) {
	segs, err := parseSegments(format, &opts)
	if err != nil {
		return nil, err
	}
	if segs == nil {
		segs = []segment{}
	}
	return &Formatter{text: segs, omitEmpty: opts.OmitEmptyValues}, nil
}

// jsonKind is the kind of a compiled json_format value.
type jsonKind uint8

const (
	jsonFormat  jsonKind = iota // a format string
	jsonLiteral                 // a number or boolean, encoded
	jsonObject
	jsonList
)

// jsonNode is a compiled json_format value.
type jsonNode struct {
	kind jsonKind
	// keys are the pre-encoded `"key":` prefixes of an object, sorted by key; children are
	// the object's values or the list's elements.
	keys     []string
	children []*jsonNode
	segs     []segment
	literal  string
}

// ParseJSON compiles a json_format Struct. Each string value is a format string: one lone
// operator gives a typed value (numbers for codes, bytes and durations, null when missing),
// anything else a string. Numbers, booleans, lists and nested structs are kept. Keys are
// written in sorted order; each line ends with '\n'. With Options.JSONStrings every operator
// value is a string ("-" when missing), as FileAccessLog.json_format renders them.
func ParseJSON(s *structpb.Struct, opts Options) (*Formatter, error) {
	n, err := compileJSONObject(s, "json_format", &opts)
	if err != nil {
		return nil, err
	}
	return &Formatter{json: n, omitEmpty: opts.OmitEmptyValues, strings: opts.JSONStrings}, nil
}

func compileJSONObject(s *structpb.Struct, path string, opts *Options) (*jsonNode, error) {
	node := &jsonNode{kind: jsonObject}
	keys := make([]string, 0, len(s.GetFields()))
	for k := range s.GetFields() {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		child, err := compileJSONValue(s.GetFields()[k], path+"."+k, opts)
		if err != nil {
			return nil, err
		}
		node.keys = append(node.keys, string(appendJSONString(nil, k))+":")
		node.children = append(node.children, child)
	}
	return node, nil
}

func compileJSONValue(v *structpb.Value, path string, opts *Options) (*jsonNode, error) {
	switch x := v.GetKind().(type) {
	case *structpb.Value_StringValue:
		segs, err := parseSegments(x.StringValue, opts)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		return &jsonNode{kind: jsonFormat, segs: segs}, nil
	case *structpb.Value_NumberValue:
		f := x.NumberValue
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return nil, fmt.Errorf("%s = %v: must be a finite number", path, f)
		}
		return &jsonNode{kind: jsonLiteral, literal: strconv.FormatFloat(f, 'g', -1, 64)}, nil
	case *structpb.Value_BoolValue:
		return &jsonNode{kind: jsonLiteral, literal: strconv.FormatBool(x.BoolValue)}, nil
	case *structpb.Value_StructValue:
		return compileJSONObject(x.StructValue, path, opts)
	case *structpb.Value_ListValue:
		node := &jsonNode{kind: jsonList}
		for i, e := range x.ListValue.GetValues() {
			c, err := compileJSONValue(e, fmt.Sprintf("%s[%d]", path, i), opts)
			if err != nil {
				return nil, err
			}
			node.children = append(node.children, c)
		}
		return node, nil
	}
	return nil, fmt.Errorf("%s: only strings, numbers, booleans, lists and nested structs are supported", path)
}

// Format appends the log line for e to dst and returns the extended buffer. It allocates only
// when dst must grow.
func (f *Formatter) Format(dst []byte, e *Entry) []byte {
	if f.json != nil {
		dst, _ = f.appendJSONValue(dst, f.json, e)
		return append(dst, '\n')
	}
	for i := range f.text {
		dst = f.appendText(dst, &f.text[i], e)
	}
	return dst
}

// appendText appends one segment as text, "-" (or nothing) when missing.
func (f *Formatter) appendText(dst []byte, s *segment, e *Entry) []byte {
	if s.op == opLiteral {
		return append(dst, s.lit...)
	}
	n := len(dst)
	dst, ok := appendValue(dst, s, e)
	if !ok {
		dst = dst[:n]
		if !f.omitEmpty {
			dst = append(dst, '-')
		}
	}
	return dst
}

// appendJSONContainer appends an object or a list, leaving out null values when omitEmpty.
func (f *Formatter) appendJSONContainer(dst []byte, n *jsonNode, e *Entry) []byte {
	open, closing := byte('{'), byte('}')
	if n.kind == jsonList {
		open, closing = '[', ']'
	}
	dst = append(dst, open)
	first := true
	for i, c := range n.children {
		mark := len(dst)
		if !first {
			dst = append(dst, ',')
		}
		if n.kind == jsonObject {
			dst = append(dst, n.keys[i]...)
		}
		var ok bool
		dst, ok = f.appendJSONValue(dst, c, e)
		if !ok && f.omitEmpty {
			dst = dst[:mark]
			continue
		}
		first = false
	}
	return append(dst, closing)
}

// appendJSONValue appends a value; ok is false when it is null (a lone operator with no value).
func (f *Formatter) appendJSONValue(dst []byte, n *jsonNode, e *Entry) ([]byte, bool) {
	switch {
	case n.kind == jsonObject || n.kind == jsonList:
		return f.appendJSONContainer(dst, n, e), true
	case n.kind == jsonLiteral:
		return append(dst, n.literal...), true
	case len(n.segs) == 1 && n.segs[0].op != opLiteral:
		s := &n.segs[0]
		if s.op == opDynamicMetadata && !f.strings {
			return appendTypedMetadata(dst, s, e)
		}
		if s.op == opFilterState && !f.strings {
			return appendTypedFilterState(dst, s, e)
		}
		mark := len(dst)
		raw, ok := appendValue(dst, s, e)
		switch {
		case !ok && (!f.strings || f.omitEmpty):
			return append(raw[:mark], "null"...), false
		case !ok:
			return append(raw[:mark], `"-"`...), true
		case s.op.numeric() && !f.strings:
			return raw, true
		}
		// Escape the raw value, formatted after the mark, into place.
		return escapeTail(raw, mark), true
	}
	mark := len(dst)
	for i := range n.segs {
		dst = f.appendText(dst, &n.segs[i], e)
	}
	return escapeTail(dst, mark), true
}

// escapeTail replaces dst[mark:] by its JSON string encoding.
func escapeTail(dst []byte, mark int) []byte {
	raw := dst[mark:]
	if !needsEscape(raw) {
		dst = append(dst, 0, 0)
		copy(dst[mark+1:], raw)
		dst[mark] = '"'
		dst[len(dst)-1] = '"'
		return dst
	}
	var tmp [256]byte
	cp := append(tmp[:0], raw...)
	return appendJSONBytes(dst[:mark], cp)
}

func needsEscape(b []byte) bool {
	for _, c := range b {
		if c < 0x20 || c == '"' || c == '\\' || c >= utf8.RuneSelf {
			return true
		}
	}
	return false
}

const hexDigits = "0123456789abcdef"

func appendJSONString(dst []byte, s string) []byte {
	return appendJSONBytes(dst, []byte(s))
}

// appendJSONBytes appends b as a JSON string; invalid UTF-8 becomes U+FFFD.
func appendJSONBytes(dst, b []byte) []byte {
	dst = append(dst, '"')
	for i := 0; i < len(b); {
		c := b[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"' || c == '\\':
				dst = append(dst, '\\', c)
			case c == '\n':
				dst = append(dst, '\\', 'n')
			case c == '\r':
				dst = append(dst, '\\', 'r')
			case c == '\t':
				dst = append(dst, '\\', 't')
			case c < 0x20:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			default:
				dst = append(dst, c)
			}
			i++
			continue
		}
		r, size := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && size == 1 {
			dst = append(dst, "\ufffd"...)
		} else {
			dst = append(dst, b[i:i+size]...)
		}
		i += size
	}
	return append(dst, '"')
}

// appendValue appends the value of an operator; ok is false when the value is missing (dst
// is then returned with unspecified bytes past its original length).
func appendValue(dst []byte, s *segment, e *Entry) ([]byte, bool) {
	var str string
	switch s.op {
	case opStartTime:
		if e.StartTime.IsZero() {
			return dst, false
		}
		mark := len(dst)
		dst = s.time.append(dst, e.StartTime)
		return truncateTail(dst, mark, s.maxLen), true
	case opReq, opReqWithoutQuery:
		str = requestHeader(e, s)
		if s.op == opReqWithoutQuery {
			if q := strings.IndexByte(str, '?'); q >= 0 {
				str = str[:q]
			}
		}
	case opResp:
		str = lookup(e.ResponseHeaders, s)
	case opTrailer:
		str = lookup(e.ResponseTrailers, s)
	case opProtocol:
		str = e.Protocol
	case opResponseCode:
		return strconv.AppendInt(dst, int64(e.ResponseCode), 10), true
	case opResponseCodeDetails:
		str = e.ResponseCodeDetails
	case opConnectionTerminationDetails:
		str = e.ConnectionTerminationDetails
	case opResponseFlags, opResponseFlagsLong:
		if e.ResponseFlags == 0 {
			return dst, false
		}
		mark := len(dst)
		if s.op == opResponseFlagsLong {
			dst = e.ResponseFlags.AppendLong(dst)
		} else {
			dst = e.ResponseFlags.AppendShort(dst)
		}
		return truncateTail(dst, mark, s.maxLen), true
	case opBytesReceived:
		return strconv.AppendUint(dst, e.BytesReceived, 10), true
	case opBytesSent:
		return strconv.AppendUint(dst, e.BytesSent, 10), true
	case opDuration:
		return appendMillis(dst, e.Duration)
	case opRequestDuration:
		return appendMillis(dst, e.RequestDuration)
	case opResponseDuration:
		return appendMillis(dst, e.ResponseDuration)
	case opResponseTxDuration:
		return appendMillis(dst, e.ResponseTxDuration)
	case opUpstreamHost:
		str = e.UpstreamHost
	case opUpstreamHostWithoutPort:
		str = withoutPort(e.UpstreamHost)
	case opUpstreamCluster:
		str = e.UpstreamCluster
	case opUpstreamLocalAddress:
		str = e.UpstreamLocalAddress
	case opUpstreamLocalAddressWithoutPort:
		str = withoutPort(e.UpstreamLocalAddress)
	case opUpstreamTransportFailureReason:
		str = e.UpstreamTransportFailureReason
	case opUpstreamRequestAttemptCount:
		return strconv.AppendUint(dst, uint64(e.UpstreamRequestAttemptCount), 10), true
	case opDownstreamRemoteAddress:
		str = e.DownstreamRemoteAddress
	case opDownstreamRemoteAddressWithoutPort:
		str = withoutPort(e.DownstreamRemoteAddress)
	case opDownstreamRemotePort:
		return appendPort(dst, e.DownstreamRemoteAddress)
	case opDownstreamDirectRemoteAddress:
		str = e.DownstreamDirectRemoteAddress
	case opDownstreamDirectRemoteAddressWithoutPort:
		str = withoutPort(e.DownstreamDirectRemoteAddress)
	case opDownstreamLocalAddress:
		str = e.DownstreamLocalAddress
	case opDownstreamLocalAddressWithoutPort:
		str = withoutPort(e.DownstreamLocalAddress)
	case opDownstreamLocalPort:
		return appendPort(dst, e.DownstreamLocalAddress)
	case opRequestedServerName:
		str = e.RequestedServerName
	case opRouteName:
		str = e.RouteName
	case opVirtualClusterName:
		str = e.VirtualClusterName
	case opConnectionID:
		return strconv.AppendUint(dst, e.ConnectionID, 10), true
	case opAccessLogType:
		str = e.Type.String()
	case opDynamicMetadata:
		return appendMetadata(dst, s, e)
	case opFilterState:
		return appendFilterState(dst, s, e)
	default:
		if s.op >= opTLSVersion {
			return appendTLS(dst, s, e)
		}
	}
	if str == "" {
		return dst, false
	}
	return append(dst, truncate(str, s.maxLen)...), true
}

func truncateTail(dst []byte, mark, maxLen int) []byte {
	if maxLen > 0 && len(dst)-mark > maxLen {
		return dst[:mark+maxLen]
	}
	return dst
}

func appendMillis(dst []byte, d time.Duration) ([]byte, bool) {
	if d <= 0 {
		return dst, false
	}
	return strconv.AppendInt(dst, d.Milliseconds(), 10), true
}

// requestHeader returns the first present header of a REQ operator.
func requestHeader(e *Entry, s *segment) string {
	for k := 0; k < s.nHeader; k++ {
		v, ok := pseudoHeader(e, s.headers[k])
		if !ok {
			if vs := e.RequestHeaders[s.headers[k]]; len(vs) > 0 {
				v = vs[0]
			}
		}
		if v != "" {
			return v
		}
	}
	return ""
}

func lookup(h map[string][]string, s *segment) string {
	for k := 0; k < s.nHeader; k++ {
		if vs := h[s.headers[k]]; len(vs) > 0 && vs[0] != "" {
			return vs[0]
		}
	}
	return ""
}

// splitHostPort splits "ip:port" or "[v6]:port" without allocating; port is "" when absent.
func splitHostPort(addr string) (host, port string) {
	if strings.HasPrefix(addr, "[") {
		end := strings.IndexByte(addr, ']')
		if end < 0 {
			return addr, ""
		}
		if end+1 < len(addr) && addr[end+1] == ':' {
			return addr[1:end], addr[end+2:]
		}
		return addr[1:end], ""
	}
	i := strings.LastIndexByte(addr, ':')
	if i < 0 || strings.IndexByte(addr[:i], ':') >= 0 { // bare IPv6 has no port
		return addr, ""
	}
	return addr[:i], addr[i+1:]
}

func withoutPort(addr string) string {
	h, _ := splitHostPort(addr)
	return h
}

func appendPort(dst []byte, addr string) ([]byte, bool) {
	_, p := splitHostPort(addr)
	if p == "" {
		return dst, false
	}
	return append(dst, p...), true
}
