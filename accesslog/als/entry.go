package als

import (
	"crypto/tls"
	"crypto/x509"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	accesslogdatav3 "github.com/envoyproxy/go-control-plane/envoy/data/accesslog/v3"
	alsv3 "github.com/envoyproxy/go-control-plane/envoy/service/accesslog/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/legateproxy/legate/accesslog"
	"github.com/legateproxy/legate/internal/filterstate"
)

// httpSettings are the HTTP-only fields of an HttpGrpcAccessLogConfig.
type httpSettings struct {
	reqHeaders, respHeaders, respTrailers []string
}

// HTTPLogger is one envoy.access_loggers.http_grpc access log: a buffer of
// HTTPAccessLogEntry messages and the stream they go to. Log and Flush are safe for
// concurrent use.
type HTTPLogger struct {
	*client[*accesslogdatav3.HTTPAccessLogEntry]
	h httpSettings
}

func (m *Manager) newHTTPLogger(s settings, h httpSettings) (*HTTPLogger, error) {
	c, err := newClient(m, s, func(es []*accesslogdatav3.HTTPAccessLogEntry) *alsv3.StreamAccessLogsMessage {
		return &alsv3.StreamAccessLogsMessage{LogEntries: &alsv3.StreamAccessLogsMessage_HttpLogs{
			HttpLogs: &alsv3.StreamAccessLogsMessage_HTTPAccessLogEntries{LogEntry: es},
		}}
	})
	if err != nil {
		return nil, err
	}
	return &HTTPLogger{client: c, h: h}, nil
}

// Log converts e into an HTTPAccessLogEntry and buffers it; it flushes when the buffer reaches
// buffer_size_bytes, and drops the entry (counting logs_dropped) when the buffer is full and
// cannot be flushed. e is not kept.
func (l *HTTPLogger) Log(e *accesslog.Entry) {
	if l.dropFull() {
		return
	}
	l.add(l.entry(e))
}

// entry converts a finished request (copying every string: the proxy reuses the memory the
// entry's strings point into for its next request) into Envoy's HTTPAccessLogEntry: common
// properties (addresses, times, upstream, response flags, route), protocol, request and
// response properties, and the additional headers and trailers the configuration names.
func (l *HTTPLogger) entry(e *accesslog.Entry) *accesslogdatav3.HTTPAccessLogEntry {
	common := commonProperties(e, &l.s)
	common.RouteName = strings.Clone(e.RouteName)
	common.TimeToLastRxByte = duration(e.RequestDuration)
	common.TimeToFirstUpstreamRxByte = duration(e.ResponseDuration)
	common.TimeToLastDownstreamTxByte = duration(e.Duration)
	h := e.RequestHeaders
	req := &accesslogdatav3.HTTPRequestProperties{
		RequestMethod:    requestMethod(e.Method),
		Scheme:           strings.Clone(e.Scheme),
		Authority:        strings.Clone(e.Authority),
		Path:             strings.Clone(e.Path),
		UserAgent:        strings.Clone(h.Get("User-Agent")),
		Referer:          strings.Clone(h.Get("Referer")),
		ForwardedFor:     strings.Clone(h.Get("X-Forwarded-For")),
		RequestId:        strings.Clone(h.Get("X-Request-Id")),
		OriginalPath:     strings.Clone(h.Get("X-Envoy-Original-Path")),
		RequestBodyBytes: e.BytesReceived,
		RequestHeaders:   pick(h, l.h.reqHeaders),
	}
	resp := &accesslogdatav3.HTTPResponseProperties{
		ResponseCodeDetails: strings.Clone(e.ResponseCodeDetails),
		ResponseBodyBytes:   e.BytesSent,
		ResponseHeaders:     pick(e.ResponseHeaders, l.h.respHeaders),
		ResponseTrailers:    pick(e.ResponseTrailers, l.h.respTrailers),
	}
	if e.ResponseCode != 0 {
		resp.ResponseCode = wrapperspb.UInt32(uint32(e.ResponseCode))
	}
	return &accesslogdatav3.HTTPAccessLogEntry{
		CommonProperties: common,
		ProtocolVersion:  protocol(e.Protocol),
		Request:          req,
		Response:         resp,
	}
}

// commonProperties converts what HTTP and TCP entries share (Envoy's
// extractCommonAccessLogProperties): addresses, SNI, start time, duration (only for an entry
// logged at the end), upstream, attempt count, termination details, response flags, custom
// tags and the log type.
func commonProperties(e *accesslog.Entry, s *settings) *accesslogdatav3.AccessLogCommon {
	if s == nil {
		s = &settings{}
	}
	tags := s.tags
	common := &accesslogdatav3.AccessLogCommon{
		SampleRate:                     1,
		DownstreamRemoteAddress:        socketAddress(e.DownstreamRemoteAddress),
		DownstreamDirectRemoteAddress:  socketAddress(e.DownstreamDirectRemoteAddress),
		DownstreamLocalAddress:         socketAddress(e.DownstreamLocalAddress),
		UpstreamRemoteAddress:          socketAddress(e.UpstreamHost),
		UpstreamLocalAddress:           socketAddress(e.UpstreamLocalAddress),
		UpstreamCluster:                strings.Clone(e.UpstreamCluster),
		UpstreamTransportFailureReason: strings.Clone(e.UpstreamTransportFailureReason),
		UpstreamRequestAttemptCount:    e.UpstreamRequestAttemptCount,
		ConnectionTerminationDetails:   strings.Clone(e.ConnectionTerminationDetails),
		ResponseFlags:                  responseFlags(e.ResponseFlags),
		AccessLogType:                  e.Type.ProtoType(),
		IntermediateLogEntry:           e.Type.Intermediate(),
	}
	if !e.Type.Intermediate() {
		common.Duration = duration(e.Duration)
	}
	if len(tags) > 0 {
		common.CustomTags = make(map[string]string, len(tags))
		for _, tag := range tags {
			v := tag.fixed
			if tag.header != "" {
				if v, _ = accesslog.RequestHeader(e, tag.header); v == "" {
					v = tag.def
				} else {
					v = strings.Clone(v)
				}
			}
			common.CustomTags[tag.name] = v
		}
	}
	if !e.StartTime.IsZero() {
		common.StartTime = timestamppb.New(e.StartTime)
	}
	common.TlsProperties = tlsProperties(e)
	common.FilterStateObjects = filterStateObjects(e, s.stateKeys)
	return common
}

// tlsProperties converts the downstream TLS state (version, cipher suite, SNI, the local and
// peer certificates' subject, issuer and URI and DNS SANs); with plain text, only an SNI the
// TLS inspector read.
func tlsProperties(e *accesslog.Entry) *accesslogdatav3.TLSProperties {
	t := e.DownstreamTLS
	if t == nil {
		if e.RequestedServerName == "" {
			return nil
		}
		return &accesslogdatav3.TLSProperties{TlsSniHostname: strings.Clone(e.RequestedServerName)}
	}
	p := &accesslogdatav3.TLSProperties{
		TlsVersion:                 tlsVersion(t.State.Version),
		TlsSniHostname:             strings.Clone(e.RequestedServerName),
		LocalCertificateProperties: certificateProperties(t.Local),
		PeerCertificateProperties:  certificateProperties(t.Peer()),
	}
	if p.TlsSniHostname == "" {
		p.TlsSniHostname = t.State.ServerName
	}
	if t.State.CipherSuite != 0 {
		p.TlsCipherSuite = wrapperspb.UInt32(uint32(t.State.CipherSuite))
	}
	return p
}

func tlsVersion(v uint16) accesslogdatav3.TLSProperties_TLSVersion {
	switch v {
	case tls.VersionTLS10:
		return accesslogdatav3.TLSProperties_TLSv1
	case tls.VersionTLS11:
		return accesslogdatav3.TLSProperties_TLSv1_1
	case tls.VersionTLS12:
		return accesslogdatav3.TLSProperties_TLSv1_2
	case tls.VersionTLS13:
		return accesslogdatav3.TLSProperties_TLSv1_3
	}
	return accesslogdatav3.TLSProperties_VERSION_UNSPECIFIED
}

// certificateProperties converts a certificate: URI SANs, then DNS SANs, subject and issuer;
// nil without a certificate.
func certificateProperties(c *x509.Certificate) *accesslogdatav3.TLSProperties_CertificateProperties {
	if c == nil {
		return nil
	}
	out := &accesslogdatav3.TLSProperties_CertificateProperties{Subject: c.Subject.String(), Issuer: c.Issuer.String()}
	for _, u := range accesslog.URISANs(c) {
		out.SubjectAltName = append(out.SubjectAltName, &accesslogdatav3.TLSProperties_CertificateProperties_SubjectAltName{
			San: &accesslogdatav3.TLSProperties_CertificateProperties_SubjectAltName_Uri{Uri: u}})
	}
	for _, d := range accesslog.DNSSANs(c) {
		out.SubjectAltName = append(out.SubjectAltName, &accesslogdatav3.TLSProperties_CertificateProperties_SubjectAltName{
			San: &accesslogdatav3.TLSProperties_CertificateProperties_SubjectAltName_Dns{Dns: d}})
	}
	return out
}

func duration(d time.Duration) *durationpb.Duration {
	if d <= 0 {
		return nil
	}
	return durationpb.New(d)
}

// socketAddress converts "ip:port" ("[v6]:port"); nil when empty or malformed.
func socketAddress(s string) *corev3.Address {
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		return nil
	}
	p, err := strconv.ParseUint(port, 10, 32)
	if err != nil {
		return nil
	}
	return &corev3.Address{Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{
		Address: strings.Clone(host), PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: uint32(p)},
	}}}
}

// pick returns the named headers that are present, keyed by the configured name.
func pick(h http.Header, names []string) map[string]string {
	if len(names) == 0 || h == nil {
		return nil
	}
	var out map[string]string
	for _, n := range names {
		vs := h.Values(n)
		if len(vs) == 0 {
			continue
		}
		if out == nil {
			out = make(map[string]string, len(names))
		}
		out[n] = strings.Clone(strings.Join(vs, ",")) // the proxy reuses the header memory
	}
	return out
}

func protocol(p string) accesslogdatav3.HTTPAccessLogEntry_HTTPVersion {
	switch p {
	case "HTTP/1.0":
		return accesslogdatav3.HTTPAccessLogEntry_HTTP10
	case "HTTP/1.1":
		return accesslogdatav3.HTTPAccessLogEntry_HTTP11
	case "HTTP/2":
		return accesslogdatav3.HTTPAccessLogEntry_HTTP2
	case "HTTP/3":
		return accesslogdatav3.HTTPAccessLogEntry_HTTP3
	}
	return accesslogdatav3.HTTPAccessLogEntry_PROTOCOL_UNSPECIFIED
}

func requestMethod(m string) corev3.RequestMethod {
	if v, ok := corev3.RequestMethod_value[m]; ok {
		return corev3.RequestMethod(v)
	}
	return corev3.RequestMethod_METHOD_UNSPECIFIED
}

// flagFields names the ResponseFlags field of each flag bit, in accesslog's bit order; ""
// for flags the message has no field for (drop_overload, unconditional_drop_overload), and
// the unauthorized flag is a message set apart.
var flagFields = [...]protoreflect.Name{
	"failed_local_healthcheck", "no_healthy_upstream", "upstream_request_timeout", "local_reset",
	"upstream_remote_reset", "upstream_connection_failure", "upstream_connection_termination",
	"upstream_overflow", "no_route_found", "delay_injected", "fault_injected", "rate_limited",
	"", "rate_limit_service_error", "downstream_connection_termination",
	"upstream_retry_limit_exceeded", "stream_idle_timeout", "invalid_envoy_request_headers",
	"downstream_protocol_error", "upstream_max_stream_duration_reached",
	"response_from_cache_filter", "no_filter_config_found", "duration_timeout",
	"upstream_protocol_error", "no_cluster_found", "overload_manager", "dns_resolution_failure",
	"", "downstream_remote_reset", "",
}

// responseFlags converts the flag bits into Envoy's ResponseFlags message.
func responseFlags(f accesslog.ResponseFlags) *accesslogdatav3.ResponseFlags {
	if f == 0 {
		return nil
	}
	out := &accesslogdatav3.ResponseFlags{}
	if f&accesslog.UnauthorizedExternalService != 0 {
		out.UnauthorizedDetails = &accesslogdatav3.ResponseFlags_Unauthorized{Reason: accesslogdatav3.ResponseFlags_Unauthorized_EXTERNAL_SERVICE}
	}
	m := out.ProtoReflect()
	fields := m.Descriptor().Fields()
	for bit, name := range flagFields {
		if name == "" || f&(1<<bit) == 0 {
			continue
		}
		if fd := fields.ByName(name); fd != nil {
			m.Set(fd, protoreflect.ValueOfBool(true))
		}
	}
	return out
}

// filterStateObjects packs the entry's filter state objects of keys
// (filter_state_objects_to_log) as Envoy does, each its typed form in an Any: the object's
// own message when it has one (a string object's StringValue, a header map's HeaderMap),
// else its JSON value. A missing object, or one without a typed form, is left out.
func filterStateObjects(e *accesslog.Entry, keys []string) map[string]*anypb.Any {
	var out map[string]*anypb.Any
	for _, k := range keys {
		obj := e.FilterState.Get(k)
		if obj == nil {
			continue
		}
		var m proto.Message
		if p, ok := obj.(filterstate.Protoer); ok {
			m = p.Proto()
		} else if v := obj.Typed(); v != nil {
			m = v
		}
		if m == nil {
			continue
		}
		a, err := anypb.New(m)
		if err != nil {
			continue
		}
		if out == nil {
			out = make(map[string]*anypb.Any, len(keys))
		}
		out[k] = a
	}
	return out
}
