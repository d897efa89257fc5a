package config

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
)

// Defaults of core.HealthCheck fields, from Envoy's API and health checker.
const (
	DefaultNoTrafficInterval = 60 * time.Second
	// DefaultResponseBufferSize is http_health_check.response_buffer_size when unset: how much of
	// the response body is kept for matching receive.
	DefaultResponseBufferSize = 1024
	// HealthCheckUserAgent is the user-agent Envoy's HTTP and gRPC health checkers send.
	HealthCheckUserAgent = "Envoy/HC"
)

// ErrHealthCheck is wrapped by every error HealthCheckFromProto returns.
var ErrHealthCheck = errors.New("invalid health check")

// HealthCheckKind says which health checker a HealthCheck configures.
type HealthCheckKind uint8

// Health checker kinds. Custom health checkers (custom_health_check) are not implemented.
const (
	HTTPHealthCheckKind HealthCheckKind = iota
	TCPHealthCheckKind
	GRPCHealthCheckKind
)

var healthCheckKindNames = [...]string{"HTTP", "TCP", "GRPC"}

// String returns the HealthCheckerType enum name used in health-check events ("HTTP", "TCP",
// "GRPC").
func (k HealthCheckKind) String() string {
	if int(k) < len(healthCheckKindNames) {
		return healthCheckKindNames[k]
	}
	return "UNKNOWN"
}

// HealthCheck is everything of a core.HealthCheck that the health package runs: schedule,
// thresholds, logging and one protocol's probe settings, with Envoy's defaults applied.
// ClusterFromProto builds it once, with HealthCheckFromProto, into Cluster.HealthCheck.
//
// The value is immutable once built and safe to share between goroutines.
type HealthCheck struct {
	// Timeout is timeout: how long a check may take before it counts as a network timeout.
	Timeout time.Duration
	// Interval is interval, the base time between checks of a healthy host.
	Interval time.Duration
	// InitialJitter is initial_jitter: the first check of a host waits a random time below it.
	InitialJitter time.Duration
	// IntervalJitter is interval_jitter: a random time below it is added to every interval.
	IntervalJitter time.Duration
	// IntervalJitterPercent is interval_jitter_percent: a random share of up to this percentage
	// of the interval is added to it.
	IntervalJitterPercent uint32
	// UnhealthyThreshold is unhealthy_threshold (required): consecutive network or retriable
	// failures before a healthy host is marked unhealthy.
	UnhealthyThreshold uint32
	// HealthyThreshold is healthy_threshold (required): consecutive successes before an unhealthy
	// host is marked healthy again (the first check ever succeeds at once).
	HealthyThreshold uint32
	// ReuseConnection is reuse_connection; default true.
	ReuseConnection bool
	// NoTrafficInterval is no_traffic_interval, used while the cluster has seen no traffic;
	// default 60 s.
	NoTrafficInterval time.Duration
	// NoTrafficHealthyInterval is no_traffic_healthy_interval, for healthy hosts of a cluster
	// without traffic; default NoTrafficInterval.
	NoTrafficHealthyInterval time.Duration
	// UnhealthyInterval is unhealthy_interval, after a failed check; default Interval.
	UnhealthyInterval time.Duration
	// UnhealthyEdgeInterval is unhealthy_edge_interval, after a failure that has not yet reached
	// the unhealthy threshold; default UnhealthyInterval.
	UnhealthyEdgeInterval time.Duration
	// HealthyEdgeInterval is healthy_edge_interval, after a success that has not yet reached the
	// healthy threshold; default Interval.
	HealthyEdgeInterval time.Duration
	// EventLogPath is event_log_path: a file receiving one HealthCheckEvent JSON object per line.
	EventLogPath string
	// AlwaysLogHealthCheckFailures is always_log_health_check_failures: log every failure, not
	// only the first check's and the ejection.
	AlwaysLogHealthCheckFailures bool
	// AlwaysLogHealthCheckSuccess is always_log_health_check_success.
	AlwaysLogHealthCheckSuccess bool
	// TLSALPN is tls_options.alpn_protocols; when non-empty it replaces the ALPN list of the
	// cluster's TLS configuration for health-check connections.
	TLSALPN []string
	// SocketMatchCriteria is transport_socket_match_criteria (SocketMatchLabels): when set,
	// checks use the transport socket of the cluster's transport_socket_matches these labels
	// select instead of each host's own; nil when unset.
	SocketMatchCriteria map[string]string

	// Kind says which of HTTP, TCP and GRPC is set; exactly one is.
	Kind HealthCheckKind
	HTTP *HTTPHealthCheck
	TCP  *TCPHealthCheck
	GRPC *GRPCHealthCheck

	// Proto is the health check as received. Do not modify it.
	Proto *corev3.HealthCheck
}

// HTTPHealthCheck is core.HealthCheck.HttpHealthCheck.
type HTTPHealthCheck struct {
	// Host is the :authority/Host header; empty means the cluster name.
	Host string
	// Path is the request path (required).
	Path string
	// Method is the request method name; default "GET".
	Method string
	// Send is the request body (send, hex text or binary); nil sends none.
	Send []byte
	// Receive lists byte strings that must appear in the response body in this order.
	Receive [][]byte
	// ResponseBufferSize bounds how much of the body is kept for matching Receive; 0 keeps it
	// all. Default 1024.
	ResponseBufferSize uint64
	// RequestHeadersToAdd and RequestHeadersToRemove edit the request headers, in that order.
	RequestHeadersToAdd    []HeaderToAdd
	RequestHeadersToRemove []string
	// ExpectedStatuses are the healthy status ranges; default [200, 201).
	ExpectedStatuses []StatusRange
	// RetriableStatuses are failing ranges that count toward UnhealthyThreshold instead of
	// marking the host unhealthy at once.
	RetriableStatuses []StatusRange
	// HTTP2 is codec_client_type HTTP2: HTTP/2 with prior knowledge over plain text, or ALPN h2
	// over TLS.
	HTTP2 bool
	// ServiceNameMatcher is service_name_matcher, checked against the
	// x-envoy-upstream-healthchecked-cluster response header; nil skips the check.
	ServiceNameMatcher *StringMatch
}

// TCPHealthCheck is core.HealthCheck.TcpHealthCheck.
type TCPHealthCheck struct {
	// Send is written after connecting. As in Envoy, only a hex text payload is sent (a binary
	// send is ignored), and nothing is sent when Receive is empty: the check is then connect-only.
	Send []byte
	// Receive lists byte strings that must all arrive, in order, for a check to pass.
	Receive [][]byte
}

// GRPCHealthCheck is core.HealthCheck.GrpcHealthCheck.
type GRPCHealthCheck struct {
	// ServiceName is sent in HealthCheckRequest.service.
	ServiceName string
	// Authority is the :authority header; empty means the cluster name.
	Authority string
	// InitialMetadata are headers added to the request.
	InitialMetadata []HeaderToAdd
}

// StatusRange is a type.v3.Int64Range of HTTP status codes: Start inclusive, End exclusive.
type StatusRange struct {
	Start, End int64
}

// Contains reports whether code is in [Start, End).
func (r StatusRange) Contains(code int) bool { return int64(code) >= r.Start && int64(code) < r.End }

// HeaderAppend is HeaderValueOption.HeaderAppendAction.
type HeaderAppend uint8

// Header append actions, as Envoy's HeaderAppendAction.
const (
	AppendIfExistsOrAdd HeaderAppend = iota
	AddIfAbsent
	OverwriteIfExistsOrAdd
	OverwriteIfExists
)

// HeaderToAdd is a core.HeaderValueOption. Values are used verbatim: Envoy's %…% substitution
// formatters are not expanded.
type HeaderToAdd struct {
	Key, Value string
	Action     HeaderAppend
	// KeepEmptyValue is keep_empty_value: without it a header with an empty value is not added.
	KeepEmptyValue bool
}

// StringMatch is a type.matcher.v3.StringMatcher (exact, prefix, suffix, contains, safe_regex,
// ignore_case). Safe for concurrent use.
type StringMatch struct {
	Exact, Prefix, Suffix, Contains string
	// Regex is safe_regex.regex, compiled; it must match the whole string.
	Regex      *regexp.Regexp
	IgnoreCase bool
	kind       uint8
}

const (
	matchExact uint8 = iota
	matchPrefix
	matchSuffix
	matchContains
	matchRegex
)

// Match reports whether s matches.
func (m *StringMatch) Match(s string) bool {
	fold := func(v string) string {
		if m.IgnoreCase {
			return strings.ToLower(v)
		}
		return v
	}
	switch m.kind {
	case matchExact:
		if m.IgnoreCase {
			return strings.EqualFold(s, m.Exact)
		}
		return s == m.Exact
	case matchPrefix:
		return strings.HasPrefix(fold(s), fold(m.Prefix))
	case matchSuffix:
		return strings.HasSuffix(fold(s), fold(m.Suffix))
	case matchContains:
		return strings.Contains(fold(s), fold(m.Contains))
	default:
		return m.Regex != nil && m.Regex.MatchString(s)
	}
}

// HealthCheckFromProto converts a core.HealthCheck into a HealthCheck, applying Envoy's
// defaults and checking the rules Envoy enforces (required fields, status ranges, hex payloads,
// methods with bodies, the receive size against response_buffer_size). Errors wrap ErrHealthCheck
// and name the field, the value and the rule.
func HealthCheckFromProto(hc *corev3.HealthCheck) (*HealthCheck, error) {
	if hc == nil {
		return nil, fmt.Errorf("%w: health check is nil", ErrHealthCheck)
	}
	s := &HealthCheck{
		Timeout:                      hc.GetTimeout().AsDuration(),
		Interval:                     hc.GetInterval().AsDuration(),
		InitialJitter:                durationOr(hc.GetInitialJitter(), 0),
		IntervalJitter:               durationOr(hc.GetIntervalJitter(), 0),
		IntervalJitterPercent:        hc.GetIntervalJitterPercent(),
		UnhealthyThreshold:           hc.GetUnhealthyThreshold().GetValue(),
		HealthyThreshold:             hc.GetHealthyThreshold().GetValue(),
		ReuseConnection:              hc.GetReuseConnection() == nil || hc.GetReuseConnection().GetValue(),
		NoTrafficInterval:            durationOr(hc.GetNoTrafficInterval(), DefaultNoTrafficInterval),
		EventLogPath:                 hc.GetEventLogPath(),
		AlwaysLogHealthCheckFailures: hc.GetAlwaysLogHealthCheckFailures(),
		AlwaysLogHealthCheckSuccess:  hc.GetAlwaysLogHealthCheckSuccess(),
		TLSALPN:                      hc.GetTlsOptions().GetAlpnProtocols(),
		SocketMatchCriteria:          socketMatchCriteria(hc.GetTransportSocketMatchCriteria()),
		Proto:                        hc,
	}
	s.NoTrafficHealthyInterval = durationOr(hc.GetNoTrafficHealthyInterval(), s.NoTrafficInterval)
	s.UnhealthyInterval = durationOr(hc.GetUnhealthyInterval(), s.Interval)
	s.UnhealthyEdgeInterval = durationOr(hc.GetUnhealthyEdgeInterval(), s.UnhealthyInterval)
	s.HealthyEdgeInterval = durationOr(hc.GetHealthyEdgeInterval(), s.Interval)

	if err := s.checkSchedule(hc); err != nil {
		return nil, err
	}
	var err error
	switch {
	case hc.GetHttpHealthCheck() != nil:
		s.Kind = HTTPHealthCheckKind
		s.HTTP, err = httpHealthCheckFromProto(hc.GetHttpHealthCheck())
	case hc.GetTcpHealthCheck() != nil:
		s.Kind = TCPHealthCheckKind
		s.TCP, err = tcpHealthCheckFromProto(hc.GetTcpHealthCheck())
	case hc.GetGrpcHealthCheck() != nil:
		s.Kind = GRPCHealthCheckKind
		g := hc.GetGrpcHealthCheck()
		s.GRPC = &GRPCHealthCheck{ServiceName: g.GetServiceName(), Authority: g.GetAuthority()}
		s.GRPC.InitialMetadata, err = headersToAdd("grpc_health_check.initial_metadata", g.GetInitialMetadata())
	case hc.GetCustomHealthCheck() != nil:
		err = hcErr("custom_health_check.name = %q; custom health checkers are not supported", hc.GetCustomHealthCheck().GetName())
	default:
		err = hcErr("health_checker is unset; one of http_health_check, tcp_health_check, grpc_health_check is required")
	}
	if err != nil {
		return nil, err
	}
	return s, nil
}

func hcErr(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrHealthCheck}, args...)...)
}

func (s *HealthCheck) checkSchedule(hc *corev3.HealthCheck) error {
	switch {
	case hc.GetTimeout() == nil || s.Timeout <= 0:
		return hcErr("timeout = %v; must be set and > 0", s.Timeout)
	case hc.GetInterval() == nil || s.Interval <= 0:
		return hcErr("interval = %v; must be set and > 0", s.Interval)
	case hc.GetUnhealthyThreshold() == nil:
		return hcErr("unhealthy_threshold is unset; it is required")
	case hc.GetHealthyThreshold() == nil:
		return hcErr("healthy_threshold is unset; it is required")
	case s.InitialJitter < 0:
		return hcErr("initial_jitter = %v; must be >= 0", s.InitialJitter)
	case s.IntervalJitter < 0:
		return hcErr("interval_jitter = %v; must be >= 0", s.IntervalJitter)
	}
	for _, d := range []struct {
		field string
		set   bool
		v     time.Duration
	}{
		{"no_traffic_interval", hc.GetNoTrafficInterval() != nil, s.NoTrafficInterval},
		{"no_traffic_healthy_interval", hc.GetNoTrafficHealthyInterval() != nil, s.NoTrafficHealthyInterval},
		{"unhealthy_interval", hc.GetUnhealthyInterval() != nil, s.UnhealthyInterval},
		{"unhealthy_edge_interval", hc.GetUnhealthyEdgeInterval() != nil, s.UnhealthyEdgeInterval},
		{"healthy_edge_interval", hc.GetHealthyEdgeInterval() != nil, s.HealthyEdgeInterval},
	} {
		if d.set && d.v <= 0 {
			return hcErr("%s = %v; must be > 0", d.field, d.v)
		}
	}
	return nil
}

func httpHealthCheckFromProto(h *corev3.HealthCheck_HttpHealthCheck) (*HTTPHealthCheck, error) {
	out := &HTTPHealthCheck{
		Host:                   h.GetHost(),
		Path:                   h.GetPath(),
		Method:                 "GET",
		ResponseBufferSize:     u64Or(h.GetResponseBufferSize(), DefaultResponseBufferSize),
		RequestHeadersToRemove: h.GetRequestHeadersToRemove(),
	}
	if out.Path == "" {
		return nil, hcErr("http_health_check.path is empty; it is required")
	}
	if strings.ContainsAny(out.Host, "\r\n\x00") || strings.ContainsAny(out.Path, "\r\n\x00") {
		return nil, hcErr("http_health_check.host/path contains CR, LF or NUL; not a valid header value")
	}
	switch m := h.GetMethod(); m {
	case corev3.RequestMethod_METHOD_UNSPECIFIED:
	case corev3.RequestMethod_CONNECT:
		return nil, hcErr("http_health_check.method = CONNECT; not allowed")
	default:
		name, ok := corev3.RequestMethod_name[int32(m)]
		if !ok {
			return nil, hcErr("http_health_check.method = %d; not a RequestMethod", m)
		}
		out.Method = name
	}
	switch h.GetCodecClientType() {
	case typev3.CodecClientType_HTTP1:
	case typev3.CodecClientType_HTTP2:
		out.HTTP2 = true
	default:
		return nil, hcErr("http_health_check.codec_client_type = %s; only HTTP1 and HTTP2 are supported", h.GetCodecClientType())
	}
	if h.GetSend() != nil {
		switch out.Method {
		case "GET", "HEAD", "DELETE", "TRACE":
			return nil, hcErr("http_health_check.send is set with method %s; a payload needs POST, PUT, PATCH or OPTIONS", out.Method)
		}
		send, err := payloads("http_health_check.send", []*corev3.HealthCheck_Payload{h.GetSend()})
		if err != nil {
			return nil, err
		}
		out.Send = []byte{}
		for _, p := range send {
			out.Send = append(out.Send, p...)
		}
	}
	var err error
	if out.Receive, err = payloads("http_health_check.receive", h.GetReceive()); err != nil {
		return nil, err
	}
	if out.ResponseBufferSize != 0 {
		total := 0
		for _, p := range out.Receive {
			total += len(p)
		}
		if uint64(total) > out.ResponseBufferSize {
			return nil, hcErr("http_health_check.receive totals %d bytes; must be <= response_buffer_size (%d)", total, out.ResponseBufferSize)
		}
	}
	if out.RequestHeadersToAdd, err = headersToAdd("http_health_check.request_headers_to_add", h.GetRequestHeadersToAdd()); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrHealthCheck, err)
	}
	if out.ExpectedStatuses, err = statusRanges("http_health_check.expected_statuses", h.GetExpectedStatuses()); err != nil {
		return nil, err
	}
	if len(out.ExpectedStatuses) == 0 {
		out.ExpectedStatuses = []StatusRange{{Start: 200, End: 201}}
	}
	if out.RetriableStatuses, err = statusRanges("http_health_check.retriable_statuses", h.GetRetriableStatuses()); err != nil {
		return nil, err
	}
	if m := h.GetServiceNameMatcher(); m != nil {
		if out.ServiceNameMatcher, err = StringMatchFromProto("http_health_check.service_name_matcher", m); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func tcpHealthCheckFromProto(t *corev3.HealthCheck_TcpHealthCheck) (*TCPHealthCheck, error) {
	if t.GetProxyProtocolConfig() != nil {
		return nil, hcErr("tcp_health_check.proxy_protocol_config is set; not supported")
	}
	out := &TCPHealthCheck{}
	if text := t.GetSend().GetText(); text != "" {
		send, err := payloads("tcp_health_check.send", []*corev3.HealthCheck_Payload{t.GetSend()})
		if err != nil {
			return nil, err
		}
		out.Send = send[0]
	}
	var err error
	out.Receive, err = payloads("tcp_health_check.receive", t.GetReceive())
	return out, err
}

// payloads decodes HealthCheck.Payload entries as Envoy does: text is hex and must decode to at
// least one byte; binary is taken as is; empty results are dropped.
func payloads(field string, in []*corev3.HealthCheck_Payload) ([][]byte, error) {
	var out [][]byte
	for i, p := range in {
		var b []byte
		if _, isText := p.GetPayload().(*corev3.HealthCheck_Payload_Text); isText {
			var err error
			if b, err = DecodeHex(p.GetText()); err != nil || len(b) == 0 {
				return nil, hcErr("%s[%d].text = %q; not a non-empty hex string", field, i, p.GetText())
			}
		} else {
			b = p.GetBinary()
		}
		if len(b) > 0 {
			out = append(out, b)
		}
	}
	return out, nil
}

// DecodeHex decodes an even-length string of hex digits (either case), as Envoy's Hex::decode.
func DecodeHex(s string) ([]byte, error) {
	if len(s)%2 != 0 {
		return nil, fmt.Errorf("hex string has odd length %d", len(s))
	}
	out := make([]byte, len(s)/2)
	for i := 0; i < len(s); i += 2 {
		hi, ok1 := hexDigit(s[i])
		lo, ok2 := hexDigit(s[i+1])
		if !ok1 || !ok2 {
			return nil, fmt.Errorf("hex string has a non-hex character at %d", i)
		}
		out[i/2] = hi<<4 | lo
	}
	return out, nil
}

func hexDigit(c byte) (byte, bool) {
	switch {
	case c >= '0' && c <= '9':
		return c - '0', true
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10, true
	case c >= 'A' && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}

func statusRanges(field string, in []*typev3.Int64Range) ([]StatusRange, error) {
	var out []StatusRange
	for i, r := range in {
		switch {
		case r.GetStart() >= r.GetEnd():
			return nil, hcErr("%s[%d] = [%d, %d); start must be < end", field, i, r.GetStart(), r.GetEnd())
		case r.GetStart() < 100:
			return nil, hcErr("%s[%d].start = %d; must be >= 100", field, i, r.GetStart())
		case r.GetEnd() > 600:
			return nil, hcErr("%s[%d].end = %d; must be <= 600", field, i, r.GetEnd())
		}
		out = append(out, StatusRange{Start: r.GetStart(), End: r.GetEnd()})
	}
	return out, nil
}

func headersToAdd(field string, in []*corev3.HeaderValueOption) ([]HeaderToAdd, error) {
	var out []HeaderToAdd
	for i, o := range in {
		key := strings.ToLower(o.GetHeader().GetKey())
		val := o.GetHeader().GetValue()
		if raw := o.GetHeader().GetRawValue(); len(raw) > 0 {
			val = string(raw)
		}
		if strings.HasPrefix(key, ":") || key == "host" {
			return nil, fmt.Errorf("%s[%d].header.key = %q; pseudo-headers and host may not be modified", field, i, key)
		}
		if key == "" || strings.ContainsAny(key, ": \t\r\n\x00") {
			return nil, fmt.Errorf("%s[%d].header.key = %q; not a valid header name", field, i, o.GetHeader().GetKey())
		}
		if strings.ContainsAny(val, "\r\n\x00") {
			return nil, fmt.Errorf("%s[%d].header.value contains CR, LF or NUL; not a valid header value", field, i)
		}
		h := HeaderToAdd{Key: key, Value: val, KeepEmptyValue: o.GetKeepEmptyValue()}
		switch {
		case o.GetAppend() != nil && o.GetAppend().GetValue():
			h.Action = AppendIfExistsOrAdd
		case o.GetAppend() != nil:
			h.Action = OverwriteIfExistsOrAdd
		default:
			h.Action = HeaderAppend(o.GetAppendAction())
			if h.Action > OverwriteIfExists {
				return nil, fmt.Errorf("%s[%d].append_action = %d; not a HeaderAppendAction", field, i, o.GetAppendAction())
			}
		}
		out = append(out, h)
	}
	return out, nil
}

// StringMatchFromProto converts a type.matcher.v3.StringMatcher; field names it in errors.
func StringMatchFromProto(field string, m *matcherv3.StringMatcher) (*StringMatch, error) {
	out := &StringMatch{IgnoreCase: m.GetIgnoreCase()}
	switch p := m.GetMatchPattern().(type) {
	case *matcherv3.StringMatcher_Exact:
		out.Exact, out.kind = p.Exact, matchExact
	case *matcherv3.StringMatcher_Prefix:
		out.Prefix, out.kind = p.Prefix, matchPrefix
	case *matcherv3.StringMatcher_Suffix:
		out.Suffix, out.kind = p.Suffix, matchSuffix
	case *matcherv3.StringMatcher_Contains:
		out.Contains, out.kind = p.Contains, matchContains
	case *matcherv3.StringMatcher_SafeRegex:
		// As in Envoy, ignore_case has no effect on safe_regex.
		re, err := regexp.Compile("^(?:" + p.SafeRegex.GetRegex() + ")$")
		if err != nil {
			return nil, hcErr("%s.safe_regex.regex = %q; %v", field, p.SafeRegex.GetRegex(), err)
		}
		out.Regex, out.kind = re, matchRegex
	default:
		return nil, hcErr("%s has no supported match pattern; one of exact, prefix, suffix, contains, safe_regex is required", field)
	}
	return out, nil
}
