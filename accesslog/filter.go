package accesslog

import (
	"fmt"
	"math/rand/v2"
	"strconv"

	accesslogv3 "github.com/envoyproxy/go-control-plane/envoy/config/accesslog/v3"
	accesslogdatav3 "github.com/envoyproxy/go-control-plane/envoy/data/accesslog/v3"

	"github.com/legateproxy/legate/internal/fraction"
	"github.com/legateproxy/legate/internal/headermatch"
)

// filterKind is the kind of a compiled AccessLogFilter.
type filterKind uint8

const (
	filterStatusCode filterKind = iota
	filterDuration
	filterNotHealthCheck
	filterResponseFlag
	filterLogType
	filterAnd
	filterOr
	filterHeader
	filterGRPCStatus
	filterRuntime
)

// Filter is a compiled envoy.config.accesslog.v3.AccessLogFilter (AccessLog.filter): it decides
// whether an entry is logged. Implemented: status_code_filter (an entry without a response
// code, such as a TCP connection's, compares as 0), duration_filter (whole milliseconds of
// Entry.Duration; an entry without a duration never matches), not_health_check_filter,
// response_flag_filter, log_type_filter, header_filter (on Entry's request headers) and
// grpc_status_filter (grpc-status of the response trailers, else of the response headers,
// else mapped from the HTTP status as Envoy maps it; UNKNOWN without any), runtime_filter
// (see runtimeMatch), and_filter and or_filter. The others (traceable, metadata, extension)
// are refused by FilterFromProto.
//
// A Filter is immutable and safe for concurrent use; a nil *Filter matches every entry.
type Filter struct {
	kind     filterKind
	op       accesslogv3.ComparisonFilter_Op
	value    uint64
	key      string // runtime_key of the comparison value; "" for none
	runtime  func(key string, def uint64) uint64
	flags    ResponseFlags // response_flag_filter: any of these; 0 means any flag at all
	types    uint32        // log_type_filter: bit n set for Type n
	exclude  bool
	children []*Filter
	header   *headermatch.Header // header_filter
	statuses uint32              // grpc_status_filter: bit n set for gRPC status n
	buckets  uint64              // runtime_filter: the percent_sampled denominator (100, 10000, 1000000)
	random   func() uint64
	// independent is runtime_filter's use_independent_randomness.
	independent bool
}

// FilterOptions are the inputs of FilterFromProto that come from outside the configuration.
type FilterOptions struct {
	// Runtime returns the runtime value of key, or def when the key is unset; comparison
	// filters read their runtime_key through it each time they are evaluated, as Envoy does.
	// Nil means every comparison uses its default_value. runtime_filter reads its
	// runtime_key through it too.
	Runtime func(key string, def uint64) uint64
	// Random returns a uniformly random number for runtime_filter; nil means
	// math/rand/v2.Uint64.
	Random func() uint64
}

// FilterFromProto compiles an AccessLogFilter. path names the field in errors
// ("access_log[0].filter"); errors name the offending field below it.
func FilterFromProto(path string, pb *accesslogv3.AccessLogFilter, opts FilterOptions) (*Filter, error) {
	if pb == nil {
		return nil, nil
	}
	notImplemented := func(field string) (*Filter, error) {
		return nil, fmt.Errorf("%s.%s: not implemented by Legate", path, field)
	}
	switch s := pb.GetFilterSpecifier().(type) {
	case *accesslogv3.AccessLogFilter_StatusCodeFilter:
		return comparison(path+".status_code_filter.comparison", filterStatusCode, s.StatusCodeFilter.GetComparison(), opts)
	case *accesslogv3.AccessLogFilter_DurationFilter:
		return comparison(path+".duration_filter.comparison", filterDuration, s.DurationFilter.GetComparison(), opts)
	case *accesslogv3.AccessLogFilter_NotHealthCheckFilter:
		return &Filter{kind: filterNotHealthCheck}, nil
	case *accesslogv3.AccessLogFilter_ResponseFlagFilter:
		f := &Filter{kind: filterResponseFlag}
		for i, name := range s.ResponseFlagFilter.GetFlags() {
			bit, ok := responseFlagByName(name)
			if !ok {
				return nil, fmt.Errorf("%s.response_flag_filter.flags[%d] = %q; not a response flag", path, i, name)
			}
			f.flags |= bit
		}
		return f, nil
	case *accesslogv3.AccessLogFilter_LogTypeFilter:
		f := &Filter{kind: filterLogType, exclude: s.LogTypeFilter.GetExclude()}
		for i, t := range s.LogTypeFilter.GetTypes() {
			if t < 0 || int(t) >= numTypes {
				return nil, fmt.Errorf("%s.log_type_filter.types[%d] = %d; not an access log type", path, i, t)
			}
			f.types |= 1 << uint(t)
		}
		return f, nil
	case *accesslogv3.AccessLogFilter_AndFilter:
		return combine(path+".and_filter", filterAnd, s.AndFilter.GetFilters(), opts)
	case *accesslogv3.AccessLogFilter_OrFilter:
		return combine(path+".or_filter", filterOr, s.OrFilter.GetFilters(), opts)
	case *accesslogv3.AccessLogFilter_RuntimeFilter:
		return runtimeFilter(path+".runtime_filter", s.RuntimeFilter, opts)
	case *accesslogv3.AccessLogFilter_TraceableFilter:
		return notImplemented("traceable_filter")
	case *accesslogv3.AccessLogFilter_HeaderFilter:
		m, err := compileHeaderMatch(path+".header_filter.header", s.HeaderFilter.GetHeader())
		if err != nil {
			return nil, err
		}
		return &Filter{kind: filterHeader, header: m}, nil
	case *accesslogv3.AccessLogFilter_GrpcStatusFilter:
		f := &Filter{kind: filterGRPCStatus, exclude: s.GrpcStatusFilter.GetExclude()}
		for i, st := range s.GrpcStatusFilter.GetStatuses() {
			if _, ok := accesslogv3.GrpcStatusFilter_Status_name[int32(st)]; !ok {
				return nil, fmt.Errorf("%s.grpc_status_filter.statuses[%d] = %d; not a gRPC status", path, i, st)
			}
			f.statuses |= 1 << uint(st)
		}
		return f, nil
	case *accesslogv3.AccessLogFilter_MetadataFilter:
		return notImplemented("metadata_filter")
	case *accesslogv3.AccessLogFilter_ExtensionFilter:
		return notImplemented("extension_filter")
	}
	return nil, fmt.Errorf("%s: filter_specifier is unset; one filter is required", path)
}

// Bind returns f with opts, the runtime and randomness that come from outside the
// configuration: the configuration path compiles a filter once, without them, and each logger
// binds its copy. A nil f gives nil.
func (f *Filter) Bind(opts FilterOptions) *Filter {
	if f == nil {
		return nil
	}
	b := *f
	switch f.kind {
	case filterStatusCode, filterDuration:
		b.runtime = opts.Runtime
	case filterRuntime:
		b.runtime, b.random = opts.Runtime, opts.Random
		if b.random == nil {
			b.random = rand.Uint64
		}
	}
	if f.children != nil {
		b.children = make([]*Filter, len(f.children))
		for i, c := range f.children {
			b.children[i] = c.Bind(opts)
		}
	}
	return &b
}

func comparison(path string, kind filterKind, c *accesslogv3.ComparisonFilter, opts FilterOptions) (*Filter, error) {
	if c == nil {
		return nil, fmt.Errorf("%s: is required", path)
	}
	if _, ok := accesslogv3.ComparisonFilter_Op_name[int32(c.GetOp())]; !ok {
		return nil, fmt.Errorf("%s.op = %d; must be EQ, GE, LE or NE", path, c.GetOp())
	}
	if c.GetValue() == nil {
		return nil, fmt.Errorf("%s.value: is required", path)
	}
	return &Filter{kind: kind, op: c.GetOp(), value: uint64(c.GetValue().GetDefaultValue()),
		key: c.GetValue().GetRuntimeKey(), runtime: opts.Runtime}, nil
}

// runtimeFilter compiles a RuntimeFilter.
func runtimeFilter(path string, pb *accesslogv3.RuntimeFilter, opts FilterOptions) (*Filter, error) {
	if pb.GetRuntimeKey() == "" {
		return nil, fmt.Errorf("%s.runtime_key = \"\"; must not be empty", path)
	}
	f := &Filter{kind: filterRuntime, key: pb.GetRuntimeKey(), runtime: opts.Runtime,
		value: uint64(pb.GetPercentSampled().GetNumerator()), random: opts.Random,
		independent: pb.GetUseIndependentRandomness()}
	d := pb.GetPercentSampled().GetDenominator()
	var ok bool
	if f.buckets, ok = fraction.Denominator(d); !ok {
		return nil, fmt.Errorf("%s.percent_sampled.denominator = %d; must be HUNDRED, TEN_THOUSAND or MILLION", path, d)
	}
	if f.random == nil {
		f.random = rand.Uint64
	}
	return f, nil
}

// runtimeMatch samples as Envoy's RuntimeFilter: the random value is the request's
// x-request-id (its first 8 hex digits, as the UUID request id extension reads it) modulo
// the denominator, or a random number with use_independent_randomness or without a usable
// request id; the entry is logged when that value is below the runtime's integer value of
// runtime_key (default: percent_sampled's numerator), capped at the denominator
// (featureEnabled).
func (f *Filter) runtimeMatch(e *Entry) bool {
	var r uint64
	id, ok := uint64(0), false
	if !f.independent {
		id, ok = requestIDInteger(e)
	}
	if ok {
		r = id % f.buckets
	} else {
		r = f.random()
	}
	n := f.value
	if f.runtime != nil {
		n = f.runtime(f.key, n)
	}
	return r%f.buckets < min(n, f.buckets)
}

// requestIDInteger reads an x-request-id as Envoy's UUID request id extension turns it into
// a number: its first 8 characters as hexadecimal.
func requestIDInteger(e *Entry) (uint64, bool) {
	vs := e.RequestHeaders["X-Request-Id"]
	if len(vs) == 0 || len(vs[0]) < 8 {
		return 0, false
	}
	n, err := strconv.ParseUint(vs[0][:8], 16, 64)
	return n, err == nil
}

func combine(path string, kind filterKind, pbs []*accesslogv3.AccessLogFilter, opts FilterOptions) (*Filter, error) {
	if len(pbs) < 2 {
		return nil, fmt.Errorf("%s.filters has %d items; must have at least 2", path, len(pbs))
	}
	f := &Filter{kind: kind}
	for i, c := range pbs {
		child, err := FilterFromProto(fmt.Sprintf("%s.filters[%d]", path, i), c, opts)
		if err != nil {
			return nil, err
		}
		if child == nil {
			return nil, fmt.Errorf("%s.filters[%d]: filter_specifier is unset; one filter is required", path, i)
		}
		f.children = append(f.children, child)
	}
	return f, nil
}

// Match reports whether e passes the filter.
func (f *Filter) Match(e *Entry) bool {
	if f == nil {
		return true
	}
	switch f.kind {
	case filterStatusCode:
		return f.compare(uint64(max(e.ResponseCode, 0)))
	case filterDuration:
		if e.Duration <= 0 {
			return false
		}
		return f.compare(uint64(e.Duration.Milliseconds()))
	case filterNotHealthCheck:
		return !e.HealthCheck
	case filterResponseFlag:
		if f.flags == 0 {
			return e.ResponseFlags != 0
		}
		return e.ResponseFlags&f.flags != 0
	case filterLogType:
		in := int(e.Type) < numTypes && f.types&(1<<uint(e.Type)) != 0
		return in != f.exclude
	case filterHeader:
		return matchHeader(f.header, e)
	case filterRuntime:
		return f.runtimeMatch(e)
	case filterGRPCStatus:
		st, ok := grpcStatus(e)
		in := ok && f.statuses&(1<<uint(st)) != 0
		return in != f.exclude
	case filterAnd:
		for _, c := range f.children {
			if !c.Match(e) {
				return false
			}
		}
		return true
	case filterOr:
		for _, c := range f.children {
			if c.Match(e) {
				return true
			}
		}
		return false
	}
	return false
}

func (f *Filter) compare(v uint64) bool {
	want := f.value
	if f.key != "" && f.runtime != nil {
		want = f.runtime(f.key, want)
	}
	switch f.op {
	case accesslogv3.ComparisonFilter_GE:
		return v >= want
	case accesslogv3.ComparisonFilter_LE:
		return v <= want
	case accesslogv3.ComparisonFilter_NE:
		return v != want
	}
	return v == want
}

// grpcUnknown is gRPC's UNKNOWN status.
const grpcUnknown = 2

// grpcStatus returns an entry's gRPC status as Envoy's grpc_status_filter finds it: the
// grpc-status trailer, else the grpc-status header, else the HTTP status mapped to a gRPC
// status, else UNKNOWN. ok is false for a grpc-status that is not a number from 0 to 16
// (Envoy's InvalidCode, which no status of the filter names).
func grpcStatus(e *Entry) (status uint64, ok bool) {
	v := ""
	if vs := e.ResponseTrailers["Grpc-Status"]; len(vs) > 0 && vs[0] != "" {
		v = vs[0]
	} else if vs := e.ResponseHeaders["Grpc-Status"]; len(vs) > 0 && vs[0] != "" {
		v = vs[0]
	}
	if v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		return n, err == nil && n <= 16
	}
	switch e.ResponseCode {
	case 0:
		return grpcUnknown, true
	case 400:
		return 13, true // INTERNAL
	case 401:
		return 16, true // UNAUTHENTICATED
	case 403:
		return 7, true // PERMISSION_DENIED
	case 404:
		return 12, true // UNIMPLEMENTED
	case 429, 502, 503, 504:
		return 14, true // UNAVAILABLE
	}
	return grpcUnknown, true
}

// responseFlagByName returns the flag with the short name (response_flag_filter.flags).
func responseFlagByName(name string) (ResponseFlags, bool) {
	for i, n := range responseFlagNames {
		if n == name {
			return 1 << i, true
		}
	}
	return 0, false
}

// ProtoType returns t as Envoy's AccessLogType enum (AccessLogCommon.access_log_type).
func (t Type) ProtoType() accesslogdatav3.AccessLogType {
	return accesslogdatav3.AccessLogType(t)
}
