package accesslog

import (
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/legateproxy/legate/internal/headermatch"
)

// op is one substitution operator.
type op uint8

const (
	opLiteral op = iota
	opStartTime
	opReq
	opReqWithoutQuery
	opResp
	opTrailer
	opProtocol
	opResponseCode
	opResponseCodeDetails
	opConnectionTerminationDetails
	opResponseFlags
	opResponseFlagsLong
	opBytesReceived
	opBytesSent
	opDuration
	opRequestDuration
	opResponseDuration
	opResponseTxDuration
	opUpstreamHost
	opUpstreamHostWithoutPort
	opUpstreamCluster
	opUpstreamLocalAddress
	opUpstreamLocalAddressWithoutPort
	opUpstreamTransportFailureReason
	opUpstreamRequestAttemptCount
	opDownstreamRemoteAddress
	opDownstreamRemoteAddressWithoutPort
	opDownstreamRemotePort
	opDownstreamDirectRemoteAddress
	opDownstreamDirectRemoteAddressWithoutPort
	opDownstreamLocalAddress
	opDownstreamLocalAddressWithoutPort
	opDownstreamLocalPort
	opRequestedServerName
	opRouteName
	opVirtualClusterName
	opConnectionID
	opAccessLogType
	opDynamicMetadata
	opFilterState

	// The TLS operators (tls.go), last: appendValue hands every op from opTLSVersion on to
	// appendTLS.
	opTLSVersion
	opTLSCipher
	opPeerSubject
	opPeerIssuer
	opPeerURISAN
	opPeerDNSSAN
	opPeerIPSAN
	opPeerEmailSAN
	opPeerSerial
	opPeerFingerprint256
	opPeerFingerprint1
	opLocalSubject
	opLocalURISAN
	opLocalDNSSAN
	opLocalIPSAN
	opLocalEmailSAN
)

// operators maps operator names to ops; HOSTNAME and ENVIRONMENT are resolved at parse time.
// Read-only after package initialisation.
var operators = map[string]op{
	"START_TIME":                             opStartTime,
	"REQ":                                    opReq,
	"REQ_WITHOUT_QUERY":                      opReqWithoutQuery,
	"RESP":                                   opResp,
	"TRAILER":                                opTrailer,
	"PROTOCOL":                               opProtocol,
	"RESPONSE_CODE":                          opResponseCode,
	"RESPONSE_CODE_DETAILS":                  opResponseCodeDetails,
	"CONNECTION_TERMINATION_DETAILS":         opConnectionTerminationDetails,
	"RESPONSE_FLAGS":                         opResponseFlags,
	"RESPONSE_FLAGS_LONG":                    opResponseFlagsLong,
	"BYTES_RECEIVED":                         opBytesReceived,
	"BYTES_SENT":                             opBytesSent,
	"DURATION":                               opDuration,
	"REQUEST_DURATION":                       opRequestDuration,
	"RESPONSE_DURATION":                      opResponseDuration,
	"RESPONSE_TX_DURATION":                   opResponseTxDuration,
	"UPSTREAM_HOST":                          opUpstreamHost,
	"UPSTREAM_REMOTE_ADDRESS":                opUpstreamHost,
	"UPSTREAM_REMOTE_ADDRESS_WITHOUT_PORT":   opUpstreamHostWithoutPort,
	"UPSTREAM_CLUSTER":                       opUpstreamCluster,
	"UPSTREAM_LOCAL_ADDRESS":                 opUpstreamLocalAddress,
	"UPSTREAM_LOCAL_ADDRESS_WITHOUT_PORT":    opUpstreamLocalAddressWithoutPort,
	"UPSTREAM_TRANSPORT_FAILURE_REASON":      opUpstreamTransportFailureReason,
	"UPSTREAM_REQUEST_ATTEMPT_COUNT":         opUpstreamRequestAttemptCount,
	"DOWNSTREAM_REMOTE_ADDRESS":              opDownstreamRemoteAddress,
	"DOWNSTREAM_REMOTE_ADDRESS_WITHOUT_PORT": opDownstreamRemoteAddressWithoutPort,
	"DOWNSTREAM_REMOTE_PORT":                 opDownstreamRemotePort,
	"DOWNSTREAM_DIRECT_REMOTE_ADDRESS":       opDownstreamDirectRemoteAddress,
	"DOWNSTREAM_DIRECT_REMOTE_ADDRESS_WITHOUT_PORT": opDownstreamDirectRemoteAddressWithoutPort,
	"DOWNSTREAM_LOCAL_ADDRESS":                      opDownstreamLocalAddress,
	"DOWNSTREAM_LOCAL_ADDRESS_WITHOUT_PORT":         opDownstreamLocalAddressWithoutPort,
	"DOWNSTREAM_LOCAL_PORT":                         opDownstreamLocalPort,
	"REQUESTED_SERVER_NAME":                         opRequestedServerName,
	"ROUTE_NAME":                                    opRouteName,
	"VIRTUAL_CLUSTER_NAME":                          opVirtualClusterName,
	"CONNECTION_ID":                                 opConnectionID,
	"ACCESS_LOG_TYPE":                               opAccessLogType,
	"DYNAMIC_METADATA":                              opDynamicMetadata,
	"FILTER_STATE":                                  opFilterState,
	"DOWNSTREAM_TLS_VERSION":                        opTLSVersion,
	"DOWNSTREAM_TLS_CIPHER":                         opTLSCipher,
	"DOWNSTREAM_PEER_SUBJECT":                       opPeerSubject,
	"DOWNSTREAM_PEER_ISSUER":                        opPeerIssuer,
	"DOWNSTREAM_PEER_URI_SAN":                       opPeerURISAN,
	"DOWNSTREAM_PEER_DNS_SAN":                       opPeerDNSSAN,
	"DOWNSTREAM_PEER_IP_SAN":                        opPeerIPSAN,
	"DOWNSTREAM_PEER_EMAIL_SAN":                     opPeerEmailSAN,
	"DOWNSTREAM_PEER_SERIAL":                        opPeerSerial,
	"DOWNSTREAM_PEER_FINGERPRINT_256":               opPeerFingerprint256,
	"DOWNSTREAM_PEER_FINGERPRINT_1":                 opPeerFingerprint1,
	"DOWNSTREAM_LOCAL_SUBJECT":                      opLocalSubject,
	"DOWNSTREAM_LOCAL_URI_SAN":                      opLocalURISAN,
	"DOWNSTREAM_LOCAL_DNS_SAN":                      opLocalDNSSAN,
	"DOWNSTREAM_LOCAL_IP_SAN":                       opLocalIPSAN,
	"DOWNSTREAM_LOCAL_EMAIL_SAN":                    opLocalEmailSAN,
}

// numeric reports whether the operator's value is a JSON number.
func (o op) numeric() bool {
	switch o {
	case opResponseCode, opBytesReceived, opBytesSent, opDuration, opRequestDuration,
		opResponseDuration, opResponseTxDuration, opUpstreamRequestAttemptCount,
		opDownstreamRemotePort, opDownstreamLocalPort, opConnectionID:
		return true
	}
	return false
}

// segment is a literal or one operator with its arguments.
type segment struct {
	op  op
	lit string
	// headers are the header names of REQ/RESP/TRAILER: canonical MIME keys, or the
	// pseudo-header names ":method", ":path", ":authority", ":scheme" (lower case).
	headers [2]string
	nHeader int
	maxLen  int // 0: no limit
	// metadata is DYNAMIC_METADATA's namespace followed by the path of keys into it.
	metadata []string
	// filterState is FILTER_STATE's key and serialization.
	filterState *filterStateArg
	time        *timeFormat
}

// Options are the inputs of parsing that come from outside the format string.
// The zero value is usable.
type Options struct {
	// OmitEmptyValues implements SubstitutionFormatString.omit_empty_values: missing values
	// print as "" instead of "-" in text, and JSON keys with no value are left out.
	OmitEmptyValues bool
	// Hostname is what %HOSTNAME% prints; empty means os.Hostname().
	Hostname string
	// LookupEnv resolves %ENVIRONMENT(NAME)%; nil means os.LookupEnv.
	LookupEnv func(string) (string, bool)
	// JSONStrings renders every JSON operator value as a string, "-" when missing (the
	// deprecated FileAccessLog.json_format; typed_json_format and log_format are typed).
	JSONStrings bool
}

// ParseError is returned for a malformed format string.
type ParseError struct {
	Format string
	Pos    int
	Rule   string
}

func (e *ParseError) Error() string {
	return fmt.Sprintf("access log format %q: position %d: %s", e.Format, e.Pos, e.Rule)
}

// parseSegments compiles a text format string into segments.
func parseSegments(format string, opts *Options) ([]segment, error) {
	var segs []segment
	var lit []byte
	flush := func() {
		if len(lit) > 0 {
			segs = append(segs, segment{op: opLiteral, lit: string(lit)})
			lit = lit[:0]
		}
	}
	for pos := 0; pos < len(format); pos++ {
		c := format[pos]
		if c != '%' {
			lit = append(lit, c)
			continue
		}
		if pos+1 < len(format) && format[pos+1] == '%' {
			lit = append(lit, '%')
			pos++
			continue
		}
		seg, end, err := parseCommand(format, pos, opts)
		if err != nil {
			return nil, err
		}
		if seg.op == opLiteral {
			lit = append(lit, seg.lit...)
		} else {
			flush()
			segs = append(segs, seg)
		}
		pos = end
	}
	flush()
	return segs, nil
}

// parseCommand parses "%NAME(ARGS):LEN%" starting at format[start] == '%' and returns the
// segment and the index of the closing '%'.
func parseCommand(format string, start int, opts *Options) (segment, int, error) {
	fail := func(pos int, rule string, args ...any) (segment, int, error) {
		return segment{}, 0, &ParseError{Format: format, Pos: pos, Rule: fmt.Sprintf(rule, args...)}
	}
	i := start + 1
	for i < len(format) && (format[i] >= 'A' && format[i] <= 'Z' || format[i] >= '0' && format[i] <= '9' || format[i] == '_') {
		i++
	}
	name := format[start+1 : i]
	if name == "" {
		return fail(start, "'%%' must start an operator such as %%PROTOCOL%% or be escaped as '%%%%'")
	}
	var args string
	hasArgs := false
	if i < len(format) && format[i] == '(' {
		closing := strings.IndexByte(format[i:], ')')
		if closing < 0 {
			return fail(i, "operator %s: missing ')'", name)
		}
		args = format[i+1 : i+closing]
		hasArgs = true
		i += closing + 1
	}
	maxLen := 0
	if i < len(format) && format[i] == ':' {
		j := i + 1
		for j < len(format) && format[j] >= '0' && format[j] <= '9' {
			j++
		}
		n, err := strconv.Atoi(format[i+1 : j])
		if err != nil || n <= 0 {
			return fail(i, "operator %s: length after ':' must be a positive integer", name)
		}
		maxLen = n
		i = j
	}
	if i >= len(format) || format[i] != '%' {
		return fail(start, "operator %s: missing closing '%%'", name)
	}
	seg := segment{maxLen: maxLen}
	switch name {
	case "HOSTNAME":
		h := opts.Hostname
		if h == "" {
			h, _ = os.Hostname()
		}
		seg.lit = truncate(h, maxLen)
		return seg, i, nil
	case "ENVIRONMENT":
		if args == "" {
			return fail(start, "operator ENVIRONMENT needs a variable name: %%ENVIRONMENT(NAME)%%")
		}
		lookup := opts.LookupEnv
		if lookup == nil {
			lookup = os.LookupEnv
		}
		v, ok := lookup(args)
		if !ok {
			v = "-"
		}
		seg.lit = truncate(v, maxLen)
		return seg, i, nil
	}
	o, ok := operators[name]
	if !ok {
		return fail(start, "unknown or unsupported operator %s", name)
	}
	seg.op = o
	switch o {
	case opReq, opReqWithoutQuery, opResp, opTrailer:
		if !hasArgs || args == "" {
			return fail(start, "operator %s needs a header name: %%%s(NAME)%%", name, name)
		}
		names := strings.Split(args, "?")
		if len(names) > 2 {
			return fail(start, "operator %s: more than 1 alternative header in %q", name, args)
		}
		for k, n := range names {
			if n == "" {
				return fail(start, "operator %s: empty header name in %q", name, args)
			}
			seg.headers[k] = headerKey(n)
		}
		seg.nHeader = len(names)
	case opDynamicMetadata:
		if args == "" {
			return fail(start, "operator %s needs a namespace: %%%s(NAMESPACE:KEY*)%%", name, name)
		}
		seg.metadata = strings.Split(args, ":")
		if slices.Contains(seg.metadata, "") {
			return fail(start, "operator %s: empty namespace or key in %q", name, args)
		}
	case opFilterState:
		a, err := parseFilterState(args)
		if err != nil {
			return fail(start, "%v", err)
		}
		seg.filterState = a
	case opStartTime:
		f := args
		if f == "" {
			f = defaultTimeFormat
		}
		seg.time = compileTimeFormat(f)
	default:
		if hasArgs {
			return fail(start, "operator %s takes no arguments", name)
		}
	}
	return seg, i, nil
}

// headerKey normalises a header name: pseudo-headers (and "host", which is :authority) in
// lower case, others in canonical MIME form.
func headerKey(name string) string { return headermatch.Key(name) }

func truncate(s string, n int) string {
	if n > 0 && len(s) > n {
		return s[:n]
	}
	return s
}
