package accesslog

import (
	"net/http"
	"time"

	"google.golang.org/protobuf/types/known/structpb"

	"github.com/legateproxy/legate/internal/filterstate"
)

// Entry is what the proxy knows about one finished (or locally answered) request. The formatter
// reads it and keeps nothing. Zero values mean "not known" and print as "-" unless noted.
// An Entry is not safe for concurrent mutation while it is being formatted.
type Entry struct {
	// StartTime is when the first byte of the downstream request was received.
	StartTime time.Time

	// Method, Path, Authority and Scheme are the request pseudo-headers :method, :path
	// (with the query), :authority and :scheme; %REQ(:PATH)% and friends read them.
	Method, Path, Authority, Scheme string
	// RequestHeaders, ResponseHeaders and ResponseTrailers are keyed in canonical MIME form
	// (as net/http keeps them). Nil maps are empty.
	RequestHeaders, ResponseHeaders, ResponseTrailers http.Header

	// Protocol is the downstream protocol: "HTTP/1.0", "HTTP/1.1", "HTTP/2" or "HTTP/3".
	Protocol string
	// ResponseCode is the status sent downstream; 0 (no response) prints as 0, as in Envoy.
	ResponseCode int
	// ResponseCodeDetails is Envoy's response code details string ("via_upstream", …).
	ResponseCodeDetails string
	// ConnectionTerminationDetails explains why the proxy closed the connection, if it did.
	ConnectionTerminationDetails string
	// ResponseFlags are Envoy's response flags (UH, UF, NR, …).
	ResponseFlags ResponseFlags
	// BytesReceived and BytesSent are body bytes from and to downstream.
	BytesReceived, BytesSent uint64

	// Duration is the total time from StartTime to the last downstream byte sent.
	// RequestDuration is from StartTime to the last downstream request byte received.
	// ResponseDuration is from StartTime to the first upstream response byte received.
	// ResponseTxDuration is from the first upstream response byte to the last downstream byte
	// sent. Zero means not recorded and prints as "-"; they print in whole milliseconds.
	Duration, RequestDuration, ResponseDuration, ResponseTxDuration time.Duration

	// Addresses are "ip:port" strings ("[v6]:port" for IPv6); empty means unknown.
	DownstreamRemoteAddress       string
	DownstreamDirectRemoteAddress string
	DownstreamLocalAddress        string
	UpstreamHost                  string // the upstream host's address
	UpstreamLocalAddress          string
	// UpstreamCluster is the name of the upstream cluster (%UPSTREAM_CLUSTER%).
	UpstreamCluster string
	// UpstreamTransportFailureReason is why the upstream connection failed (TLS errors, …).
	UpstreamTransportFailureReason string
	// UpstreamRequestAttemptCount is how many upstream attempts were made (retries included).
	UpstreamRequestAttemptCount uint32
	// RequestedServerName is the downstream TLS SNI.
	RequestedServerName string
	// DownstreamTLS is the downstream connection's TLS state; nil for plain text.
	DownstreamTLS *TLSInfo
	// RouteName is the name of the matched route.
	RouteName string
	// VirtualClusterName is the name of the matched virtual cluster.
	VirtualClusterName string
	// ConnectionID is the downstream connection's id (Envoy prints 0 when it has none).
	ConnectionID uint64
	// Type is why the entry is logged (%ACCESS_LOG_TYPE%, AccessLogCommon.access_log_type):
	// the TCP proxy logs TcpConnectionEnd at close, TcpPeriodic every
	// access_log_flush_interval and TcpUpstreamConnected when the upstream connects.
	Type Type
	// DynamicMetadata is the stream's dynamic metadata by namespace, as filters set it
	// (%DYNAMIC_METADATA(NS:KEY)%); read only.
	DynamicMetadata map[string]*structpb.Struct
	// FilterState is the connection's (or stream's) filter state (%FILTER_STATE(KEY)%);
	// nil for none. The formatter only reads it.
	FilterState *filterstate.State
	// HealthCheck marks a request answered as a health check (not_health_check_filter).
	HealthCheck bool
}

// Type is Envoy's AccessLogType: the event an entry is logged for. The values are Envoy's
// enum numbers (envoy.data.accesslog.v3.AccessLogType).
type Type uint8

// The access log types, with Envoy's numbers.
const (
	TypeNotSet                                  Type = 0
	TypeTCPUpstreamConnected                    Type = 1
	TypeTCPPeriodic                             Type = 2
	TypeTCPConnectionEnd                        Type = 3
	TypeDownstreamStart                         Type = 4
	TypeDownstreamPeriodic                      Type = 5
	TypeDownstreamEnd                           Type = 6
	TypeUpstreamPoolReady                       Type = 7
	TypeUpstreamPeriodic                        Type = 8
	TypeUpstreamEnd                             Type = 9
	TypeDownstreamTunnelSuccessfullyEstablished Type = 10
	TypeUDPTunnelUpstreamConnected              Type = 11
	TypeUDPPeriodic                             Type = 12
	TypeUDPSessionEnd                           Type = 13
	TypeTCPConnectionStart                      Type = 14
	numTypes                                         = 15
)

// typeNames are Envoy's enum names, which %ACCESS_LOG_TYPE% prints, indexed by number.
var typeNames = [numTypes]string{
	"NotSet", "TcpUpstreamConnected", "TcpPeriodic", "TcpConnectionEnd", "DownstreamStart",
	"DownstreamPeriodic", "DownstreamEnd", "UpstreamPoolReady", "UpstreamPeriodic",
	"UpstreamEnd", "DownstreamTunnelSuccessfullyEstablished", "UdpTunnelUpstreamConnected",
	"UdpPeriodic", "UdpSessionEnd", "TcpConnectionStart",
}

// String returns Envoy's name of the type ("TcpConnectionEnd"); "NotSet" for unknown values.
func (t Type) String() string {
	if int(t) < len(typeNames) {
		return typeNames[t]
	}
	return typeNames[0]
}

// Intermediate reports whether an entry of this type is logged before its connection or
// stream ends (AccessLogCommon.intermediate_log_entry).
func (t Type) Intermediate() bool {
	switch t {
	case TypeNotSet, TypeTCPConnectionEnd, TypeDownstreamEnd, TypeUpstreamEnd, TypeUDPSessionEnd:
		return false
	}
	return true
}

// ResponseFlags is Envoy's bit set of response flags. The bit order is Envoy's, which is also
// the order in which %RESPONSE_FLAGS% lists them.
type ResponseFlags uint64

// The response flags, in Envoy's order.
const (
	FailedLocalHealthCheck ResponseFlags = 1 << iota
	NoHealthyUpstream
	UpstreamRequestTimeout
	LocalReset
	UpstreamRemoteReset
	UpstreamConnectionFailure
	UpstreamConnectionTermination
	UpstreamOverflow
	NoRouteFound
	DelayInjected
	FaultInjected
	RateLimited
	UnauthorizedExternalService
	RateLimitServiceError
	DownstreamConnectionTermination
	UpstreamRetryLimitExceeded
	StreamIdleTimeout
	InvalidEnvoyRequestHeaders
	DownstreamProtocolError
	UpstreamMaxStreamDurationReached
	ResponseFromCacheFilter
	NoFilterConfigFound
	DurationTimeout
	UpstreamProtocolError
	NoClusterFound
	OverloadManager
	DNSResolutionFailed
	DropOverload
	DownstreamRemoteReset
	UnconditionalDropOverload
	numResponseFlags = iota
)

// responseFlagNames are the short names, indexed by bit.
var responseFlagNames = [numResponseFlags]string{
	"LH", "UH", "UT", "LR", "UR", "UF", "UC", "UO", "NR", "DI", "FI", "RL", "UAEX", "RLSE",
	"DC", "URX", "SI", "IH", "DPE", "UMSDR", "RFCF", "NFCF", "DT", "UPE", "NC", "OM", "DF",
	"DO", "DR", "UDO",
}

// responseFlagLongNames are the long names, indexed by bit (%RESPONSE_FLAGS_LONG%).
var responseFlagLongNames = [numResponseFlags]string{
	"FailedLocalHealthCheck", "NoHealthyUpstream", "UpstreamRequestTimeout", "LocalReset",
	"UpstreamRemoteReset", "UpstreamConnectionFailure", "UpstreamConnectionTermination",
	"UpstreamOverflow", "NoRouteFound", "DelayInjected", "FaultInjected", "RateLimited",
	"UnauthorizedExternalService", "RateLimitServiceError", "DownstreamConnectionTermination",
	"UpstreamRetryLimitExceeded", "StreamIdleTimeout", "InvalidEnvoyRequestHeaders",
	"DownstreamProtocolError", "UpstreamMaxStreamDurationReached", "ResponseFromCacheFilter",
	"NoFilterConfigFound", "DurationTimeout", "UpstreamProtocolError", "NoClusterFound",
	"OverloadManagerTerminated", "DnsResolutionFailed", "DropOverload", "DownstreamRemoteReset",
	"UnconditionalDropOverload",
}

// AppendShort appends the comma-separated short names of the set flags ("UH,UF"); nothing if
// no flag is set.
func (f ResponseFlags) AppendShort(dst []byte) []byte {
	return f.appendNames(dst, &responseFlagNames)
}

// AppendLong appends the comma-separated long names ("NoHealthyUpstream,…").
func (f ResponseFlags) AppendLong(dst []byte) []byte {
	return f.appendNames(dst, &responseFlagLongNames)
}

func (f ResponseFlags) appendNames(dst []byte, names *[numResponseFlags]string) []byte {
	first := true
	for i := range numResponseFlags {
		if f&(1<<i) == 0 {
			continue
		}
		if !first {
			dst = append(dst, ',')
		}
		first = false
		dst = append(dst, names[i]...)
	}
	return dst
}

// String returns the short names, or "-" when no flag is set.
func (f ResponseFlags) String() string {
	if f == 0 {
		return "-"
	}
	return string(f.AppendShort(nil))
}
