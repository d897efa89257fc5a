package route

import (
	"fmt"
	"net/netip"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	metadatav3 "github.com/envoyproxy/go-control-plane/envoy/type/metadata/v3"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/legateproxy/legate/internal/headermatch"
)

// maxRateLimitStage is the highest stage Envoy's rate limit policies accept.
const maxRateLimitStage = 10

// DescriptorEntry is one entry (key, value) of a rate limit descriptor.
type DescriptorEntry struct{ Key, Value string }

// DescriptorInput is what a request's rate limit actions read. Request is required; the rest
// may be empty, and an action that needs an empty one fails its descriptor.
type DescriptorInput struct {
	Request *Request
	// Match is the request's route (destination_cluster reads its cluster).
	Match *Match
	// ClientIP is the downstream address without port (remote_address, masked_remote_address).
	ClientIP string
	// LocalCluster is --service-cluster (source_cluster).
	LocalCluster string
	// Metadata is the stream's dynamic metadata (dynamic_metadata, metadata with source DYNAMIC).
	Metadata map[string]*structpb.Struct
}

// RateLimit is one compiled route.v3.RateLimit: its actions make one descriptor. Immutable.
type RateLimit struct {
	// Stage is the rate limit's stage (0..10); a filter reads the entries of its own stage.
	Stage   uint32
	actions []rateLimitAction
}

// rateLimitKind is a rate limit action Legate implements.
type rateLimitKind uint8

const (
	rlGenericKey rateLimitKind = iota
	rlRequestHeaders
	rlQueryParameters
	rlRemoteAddress
	rlMaskedRemoteAddress
	rlDestinationCluster
	rlSourceCluster
	rlHeaderValueMatch
	rlQueryValueMatch
	rlMetadata
)

// rateLimitAction is one compiled RateLimit.Action: it adds at most one entry to the
// request's descriptor, or fails it (the descriptor is then not produced, as Envoy).
type rateLimitAction struct {
	kind        rateLimitKind
	key, value  string // descriptor key; the generic, match or default value
	name        string // request_headers: canonical header name; query_parameters: the parameter
	skipAbsent  bool
	expectMatch bool
	headers     []headermatch.Header
	queries     []queryMatcher
	v4, v6      int      // masked_remote_address prefix lengths
	namespace   string   // metadata: the filter namespace
	path        []string // metadata: the keys inside it
}

// CompileRateLimits compiles rate_limits (a route's, a virtual host's or a filter's); path
// names them in errors. Options Legate does not implement are refused.
func CompileRateLimits(in []*routev3.RateLimit, path string) ([]RateLimit, error) {
	var out []RateLimit
	for i, rl := range in {
		p := fmt.Sprintf("%s[%d]", path, i)
		if err := refuseRateLimitOptions(rl, p); err != nil {
			return nil, err
		}
		r := RateLimit{Stage: rl.GetStage().GetValue()}
		if r.Stage > maxRateLimitStage {
			return nil, fmt.Errorf("%s.stage = %d: must be at most %d", p, r.Stage, maxRateLimitStage)
		}
		if len(rl.GetActions()) == 0 {
			return nil, fmt.Errorf("%s.actions: at least one action is required", p)
		}
		for j, a := range rl.GetActions() {
			act, err := compileRateLimitAction(a, fmt.Sprintf("%s.actions[%d]", p, j))
			if err != nil {
				return nil, err
			}
			r.actions = append(r.actions, act)
		}
		out = append(out, r)
	}
	return out, nil
}

func refuseRateLimitOptions(rl *routev3.RateLimit, path string) error {
	switch {
	case rl.GetLimit() != nil:
		return fmt.Errorf("%s.limit: not implemented by Legate", path)
	case rl.GetHitsAddend() != nil:
		return fmt.Errorf("%s.hits_addend: not implemented by Legate", path)
	case rl.GetApplyOnStreamDone():
		return fmt.Errorf("%s.apply_on_stream_done: not implemented by Legate", path)
	case rl.GetDisableKey() != "":
		return fmt.Errorf("%s.disable_key: not implemented by Legate", path)
	case rl.GetXRatelimitOption() != routev3.RateLimit_UNSPECIFIED:
		return fmt.Errorf("%s.x_ratelimit_option: not implemented by Legate", path)
	}
	return nil
}

// refuseDefaultValue refuses the default_value Envoy reads only with its descriptor formatter
// (a runtime feature Legate does not have).
func refuseDefaultValue(v, path string) error {
	if v != "" {
		return fmt.Errorf("%s.default_value: not implemented by Legate (descriptor value formatting)", path)
	}
	return nil
}

func compileRateLimitAction(a *routev3.RateLimit_Action, path string) (rateLimitAction, error) {
	switch s := a.GetActionSpecifier().(type) {
	case *routev3.RateLimit_Action_GenericKey_:
		g := s.GenericKey
		return rateLimitAction{kind: rlGenericKey, key: orDefault(g.GetDescriptorKey(), "generic_key"), value: g.GetDescriptorValue()},
			refuseDefaultValue(g.GetDefaultValue(), path+".generic_key")
	case *routev3.RateLimit_Action_RequestHeaders_:
		h := s.RequestHeaders
		if h.GetHeaderName() == "" || h.GetDescriptorKey() == "" {
			return rateLimitAction{}, fmt.Errorf("%s.request_headers: header_name and descriptor_key are required", path)
		}
		return rateLimitAction{kind: rlRequestHeaders, key: h.GetDescriptorKey(), name: headermatch.Key(h.GetHeaderName()), skipAbsent: h.GetSkipIfAbsent()}, nil
	case *routev3.RateLimit_Action_QueryParameters_:
		q := s.QueryParameters
		if q.GetQueryParameterName() == "" || q.GetDescriptorKey() == "" {
			return rateLimitAction{}, fmt.Errorf("%s.query_parameters: query_parameter_name and descriptor_key are required", path)
		}
		return rateLimitAction{kind: rlQueryParameters, key: q.GetDescriptorKey(), name: q.GetQueryParameterName(), skipAbsent: q.GetSkipIfAbsent()}, nil
	case *routev3.RateLimit_Action_RemoteAddress_:
		return rateLimitAction{kind: rlRemoteAddress, key: "remote_address"}, nil
	case *routev3.RateLimit_Action_MaskedRemoteAddress_:
		return compileMaskedRemoteAddress(s.MaskedRemoteAddress, path+".masked_remote_address")
	case *routev3.RateLimit_Action_DestinationCluster_:
		return rateLimitAction{kind: rlDestinationCluster, key: "destination_cluster"}, nil
	case *routev3.RateLimit_Action_SourceCluster_:
		return rateLimitAction{kind: rlSourceCluster, key: "source_cluster"}, nil
	case *routev3.RateLimit_Action_HeaderValueMatch_:
		return compileHeaderValueMatch(s.HeaderValueMatch, path+".header_value_match")
	case *routev3.RateLimit_Action_QueryParameterValueMatch_:
		return compileQueryValueMatch(s.QueryParameterValueMatch, path+".query_parameter_value_match")
	case *routev3.RateLimit_Action_DynamicMetadata:
		m := s.DynamicMetadata
		return compileMetadataAction(m.GetDescriptorKey(), m.GetDefaultValue(), false, m.GetMetadataKey().GetKey(), m.GetMetadataKey().GetPath(), path+".dynamic_metadata")
	case *routev3.RateLimit_Action_Metadata:
		m := s.Metadata
		if m.GetSource() != routev3.RateLimit_Action_MetaData_DYNAMIC {
			return rateLimitAction{}, fmt.Errorf("%s.metadata.source = %v: not implemented by Legate (only DYNAMIC)", path, m.GetSource())
		}
		return compileMetadataAction(m.GetDescriptorKey(), m.GetDefaultValue(), m.GetSkipIfAbsent(), m.GetMetadataKey().GetKey(), m.GetMetadataKey().GetPath(), path+".metadata")
	case nil:
		return rateLimitAction{}, fmt.Errorf("%s: an action is required", path)
	}
	return rateLimitAction{}, fmt.Errorf("%s: %T: not implemented by Legate", path, a.GetActionSpecifier())
}

func compileMaskedRemoteAddress(m *routev3.RateLimit_Action_MaskedRemoteAddress, path string) (rateLimitAction, error) {
	act := rateLimitAction{kind: rlMaskedRemoteAddress, key: "masked_remote_address", v4: 32, v6: 128}
	if v := m.GetV4PrefixMaskLen(); v != nil {
		if v.GetValue() > 32 {
			return act, fmt.Errorf("%s.v4_prefix_mask_len = %d: must be at most 32", path, v.GetValue())
		}
		act.v4 = int(v.GetValue())
	}
	if v := m.GetV6PrefixMaskLen(); v != nil {
		if v.GetValue() > 128 {
			return act, fmt.Errorf("%s.v6_prefix_mask_len = %d: must be at most 128", path, v.GetValue())
		}
		act.v6 = int(v.GetValue())
	}
	return act, nil
}

func compileHeaderValueMatch(m *routev3.RateLimit_Action_HeaderValueMatch, path string) (rateLimitAction, error) {
	act := rateLimitAction{kind: rlHeaderValueMatch, key: orDefault(m.GetDescriptorKey(), "header_match"), value: m.GetDescriptorValue(),
		expectMatch: m.GetExpectMatch() == nil || m.GetExpectMatch().GetValue()}
	if err := refuseDefaultValue(m.GetDefaultValue(), path); err != nil {
		return act, err
	}
	for i, h := range m.GetHeaders() {
		hm, err := headermatch.CompileHeader(h, fmt.Sprintf("%s.headers[%d]", path, i))
		if err != nil {
			return act, err
		}
		act.headers = append(act.headers, hm)
	}
	return act, nil
}

func compileQueryValueMatch(m *routev3.RateLimit_Action_QueryParameterValueMatch, path string) (rateLimitAction, error) {
	act := rateLimitAction{kind: rlQueryValueMatch, key: orDefault(m.GetDescriptorKey(), "query_match"), value: m.GetDescriptorValue(),
		expectMatch: m.GetExpectMatch() == nil || m.GetExpectMatch().GetValue()}
	if err := refuseDefaultValue(m.GetDefaultValue(), path); err != nil {
		return act, err
	}
	for i, q := range m.GetQueryParameters() {
		qm, err := compileQueryMatcher(q, fmt.Sprintf("%s.query_parameters[%d]", path, i))
		if err != nil {
			return act, err
		}
		act.queries = append(act.queries, qm)
	}
	return act, nil
}

func compileMetadataAction(key, def string, skipAbsent bool, namespace string, keys []*metadatav3.MetadataKey_PathSegment, path string) (rateLimitAction, error) {
	if key == "" || namespace == "" {
		return rateLimitAction{}, fmt.Errorf("%s: descriptor_key and metadata_key.key are required", path)
	}
	act := rateLimitAction{kind: rlMetadata, key: key, value: def, skipAbsent: skipAbsent, namespace: namespace}
	for i, seg := range keys {
		if seg.GetKey() == "" {
			return act, fmt.Errorf("%s.metadata_key.path[%d].key: required", path, i)
		}
		act.path = append(act.path, seg.GetKey())
	}
	return act, nil
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// Descriptor appends the rate limit's descriptor for a request to dst; ok is false when an
// action fails it (dst is then returned as it came). It allocates only for
// masked_remote_address.
func (r *RateLimit) Descriptor(in *DescriptorInput, dst []DescriptorEntry) (_ []DescriptorEntry, ok bool) {
	start := len(dst)
	for i := range r.actions {
		v, add, ok := r.actions[i].entry(in)
		if !ok {
			return dst[:start], false
		}
		if add {
			dst = append(dst, DescriptorEntry{r.actions[i].key, v})
		}
	}
	return dst, true
}

// entry is the action's value for the request: add is false for an entry skipped without
// failing the descriptor (skip_if_absent), ok false for a failed descriptor.
func (a *rateLimitAction) entry(in *DescriptorInput) (v string, add, ok bool) {
	switch a.kind {
	case rlGenericKey:
		return a.value, true, true
	case rlRequestHeaders:
		return a.orSkip(in.Request.firstValue(a.name))
	case rlQueryParameters:
		qv, present := queryParam(in.Request.Path, a.name)
		return a.orSkip(qv, present)
	case rlRemoteAddress:
		return in.ClientIP, in.ClientIP != "", in.ClientIP != ""
	case rlMaskedRemoteAddress:
		return a.masked(in.ClientIP)
	case rlDestinationCluster:
		if in.Match == nil || in.Match.Cluster == "" {
			return "", false, false
		}
		return in.Match.Cluster, true, true
	case rlSourceCluster:
		return in.LocalCluster, true, true
	case rlHeaderValueMatch:
		matched := true
		for i := range a.headers {
			if h := &a.headers[i]; !h.Match(in.Request.HeaderValue(h.Key())) {
				matched = false
				break
			}
		}
		return a.value, matched == a.expectMatch, matched == a.expectMatch
	case rlQueryValueMatch:
		matched := true
		for i := range a.queries {
			if !a.queries[i].match(in.Request) {
				matched = false
				break
			}
		}
		return a.value, matched == a.expectMatch, matched == a.expectMatch
	case rlMetadata:
		return a.metadata(in.Metadata)
	}
	return "", false, false
}

// firstValue is a header's first value, as Envoy's request_headers action reads it (a
// pseudo-header's value for its name); ok is false when it is absent.
func (r *Request) firstValue(key string) (string, bool) {
	if v, isPseudo := r.pseudo(key); isPseudo {
		return v, v != ""
	}
	if vs := r.Headers()[key]; len(vs) > 0 {
		return vs[0], true
	}
	return "", false
}

// orSkip is a looked-up value's entry: absent values skip the entry with skip_if_absent and
// fail the descriptor otherwise.
func (a *rateLimitAction) orSkip(v string, present bool) (string, bool, bool) {
	if present {
		return v, true, true
	}
	return "", false, a.skipAbsent
}

// masked is the client address masked to the configured prefix, in CIDR form (10.1.2.0/24).
func (a *rateLimitAction) masked(ip string) (string, bool, bool) {
	addr, err := netip.ParseAddr(ip)
	if err != nil {
		return "", false, false
	}
	addr = addr.Unmap()
	bits := a.v6
	if addr.Is4() {
		bits = a.v4
	}
	p, err := addr.Prefix(bits)
	if err != nil {
		return "", false, false
	}
	return p.String(), true, true
}

// metadata is the string at the action's metadata key: a non-empty string value is used;
// otherwise default_value when set, else the entry is skipped with skip_if_absent or fails
// the descriptor, as Envoy's MetaDataAction.
func (a *rateLimitAction) metadata(md map[string]*structpb.Struct) (string, bool, bool) {
	var v *structpb.Value
	fields := md[a.namespace].GetFields()
	for _, k := range a.path {
		v = fields[k]
		fields = v.GetStructValue().GetFields()
	}
	if s := v.GetStringValue(); s != "" {
		return s, true, true
	}
	if a.value != "" {
		return a.value, true, true
	}
	return "", false, a.skipAbsent
}
