package route

import (
	"fmt"
	"math"
	"net/http"
	"time"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
)

// GRPCTimeout is a route's gRPC timeout handling (max_stream_duration's
// grpc_timeout_header_max and grpc_timeout_header_offset, or the deprecated max_grpc_timeout
// and grpc_timeout_offset): a gRPC request's timeout is its grpc-timeout header instead of the
// route's (no header: no timeout), at most Max when Max is positive, less Offset.
type GRPCTimeout struct {
	Max, Offset time.Duration
}

// Timeout is the timeout of a gRPC request with headers hd, as Envoy's router computes it.
func (g *GRPCTimeout) Timeout(hd http.Header) time.Duration {
	var t time.Duration
	if v := hd["Grpc-Timeout"]; len(v) > 0 {
		t = ParseGRPCTimeout(v[0])
	}
	if g.Max > 0 && (t == 0 || t > g.Max) {
		t = g.Max
	}
	if g.Offset > 0 && t > g.Offset {
		t -= g.Offset
	}
	return t
}

// ParseGRPCTimeout reads a grpc-timeout value (at most 8 digits and a unit: H, M, S, m, u or
// n); 0 for a malformed one, which Envoy treats as no timeout. A value beyond a Duration's
// range is the largest Duration.
func ParseGRPCTimeout(v string) time.Duration {
	if len(v) < 2 || len(v) > 9 {
		return 0
	}
	var n int64
	for _, c := range v[:len(v)-1] {
		if c < '0' || c > '9' {
			return 0
		}
		n = n*10 + int64(c-'0')
	}
	var unit time.Duration
	switch v[len(v)-1] {
	case 'H':
		unit = time.Hour
	case 'M':
		unit = time.Minute
	case 'S':
		unit = time.Second
	case 'm':
		unit = time.Millisecond
	case 'u':
		unit = time.Microsecond
	case 'n':
		unit = time.Nanosecond
	default:
		return 0
	}
	if n > math.MaxInt64/int64(unit) {
		return math.MaxInt64 // hours of 8 digits overflow a Duration: as good as none
	}
	return time.Duration(n) * unit
}

// compileGRPCTimeout reads the route action's gRPC timeout fields. max_stream_duration's own
// max_stream_duration limits the whole downstream stream, which Legate does not do: it is
// refused unless zero (which only disables the connection manager's, which Legate has not).
func compileGRPCTimeout(a *routev3.RouteAction, path string) (*GRPCTimeout, error) {
	if m := a.GetMaxStreamDuration(); m != nil {
		if d := m.GetMaxStreamDuration(); d != nil && d.AsDuration() != 0 {
			return nil, fmt.Errorf("%s.max_stream_duration.max_stream_duration: not implemented by Legate", path)
		}
		if m.GetGrpcTimeoutHeaderMax() == nil {
			if m.GetGrpcTimeoutHeaderOffset() != nil {
				return nil, fmt.Errorf("%s.max_stream_duration.grpc_timeout_header_offset: applies only with grpc_timeout_header_max", path)
			}
			return nil, nil
		}
		return &GRPCTimeout{Max: m.GetGrpcTimeoutHeaderMax().AsDuration(), Offset: m.GetGrpcTimeoutHeaderOffset().AsDuration()}, nil
	}
	if a.GetMaxGrpcTimeout() == nil {
		if a.GetGrpcTimeoutOffset() != nil {
			return nil, fmt.Errorf("%s.grpc_timeout_offset: applies only with max_grpc_timeout", path)
		}
		return nil, nil
	}
	return &GRPCTimeout{Max: a.GetMaxGrpcTimeout().AsDuration(), Offset: a.GetGrpcTimeoutOffset().AsDuration()}, nil
}
