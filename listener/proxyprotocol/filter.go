package proxyprotocol

import (
	"encoding/base64"
	"errors"
	"fmt"
	"strings"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	ppv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/listener/proxy_protocol/v3"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/legateproxy/legate/internal/proxyproto"
	"github.com/legateproxy/legate/stats"
)

// Name is the filter's Envoy name; TypeURL its typed_config type.
const (
	Name    = "envoy.filters.listener.proxy_protocol"
	TypeURL = "type.googleapis.com/envoy.extensions.filters.listener.proxy_protocol.v3.ProxyProtocol"
)

// Filter is one configured PROXY protocol filter, shared by the connections of a listener.
// It is immutable and safe for concurrent use.
type Filter struct {
	allowWithout bool
	disallowed   [3]bool // by version
	// rules are the rules' targets by TLV type; nil without rules.
	rules map[byte]ruleTarget
	// inFilterState puts the rules' values in the TLVKey filter state object instead of
	// dynamic metadata (tlv_location FILTER_STATE).
	inFilterState bool
	// pass selects the TLVs kept for an upstream PROXY protocol socket (pass_through_tlvs).
	pass proxyproto.TLVSet
	st   filterStats
}

// ruleTarget is where a rule puts its TLV's value in the connection's dynamic metadata.
type ruleTarget struct {
	namespace, key string
	base64         bool
}

// DefaultNamespace is the dynamic metadata namespace of rules that name none: the filter's.
const DefaultNamespace = Name

type filterStats struct {
	legacyError        *stats.Counter
	notFoundAllowed    *stats.Counter
	notFoundDisallowed *stats.Counter
	versions           [3]versionStats // [1] and [2]
}

type versionStats struct{ found, disallowed, errors *stats.Counter }

// New builds the filter of pb, registering its stats in store.
func New(pb *ppv3.ProxyProtocol, store *stats.Store) (*Filter, error) {
	f := &Filter{allowWithout: pb.GetAllowRequestsWithoutProxyProtocol()}
	switch loc := pb.GetTlvLocation(); loc {
	case ppv3.ProxyProtocol_DYNAMIC_METADATA:
	case ppv3.ProxyProtocol_FILTER_STATE:
		f.inFilterState = true
	default:
		return nil, fmt.Errorf("%s: tlv_location: unknown location %d", Name, loc)
	}
	var err error
	if f.rules, err = buildRules(pb.GetRules()); err != nil {
		return nil, err
	}
	if f.pass, err = proxyproto.NewTLVSet(Name+": pass_through_tlvs", pb.GetPassThroughTlvs()); err != nil {
		return nil, err
	}
	for _, v := range pb.GetDisallowedVersions() {
		switch v {
		case corev3.ProxyProtocolConfig_V1:
			f.disallowed[1] = true
		case corev3.ProxyProtocolConfig_V2:
			f.disallowed[2] = true
		default:
			return nil, fmt.Errorf("%s: disallowed_versions: unknown version %d", Name, v)
		}
	}
	if f.disallowed[1] && f.disallowed[2] {
		// Envoy accepts this too, but then every connection is closed: say so now.
		return nil, fmt.Errorf("%s: disallowed_versions: disallows both v1 and v2, so every connection would be closed", Name)
	}
	prefix := "proxy_proto."
	if p := pb.GetStatPrefix(); p != "" {
		prefix = stats.PrefixJoin(prefix+p, "")
	}
	f.st = filterStats{
		legacyError:        store.Counter("downstream_cx_proxy_proto_error"),
		notFoundAllowed:    store.Counter(prefix + "not_found_allowed"),
		notFoundDisallowed: store.Counter(prefix + "not_found_disallowed"),
	}
	for v := 1; v <= 2; v++ {
		vp := fmt.Sprintf("%sversions.v%d.", prefix, v)
		f.st.versions[v] = versionStats{
			found:      store.Counter(vp + "found"),
			disallowed: store.Counter(vp + "disallowed"),
			errors:     store.Counter(vp + "error"),
		}
	}
	return f, nil
}

// buildRules indexes the rules by TLV type; a later rule for the same type wins, as the
// last one Envoy inserts does.
func buildRules(rules []*ppv3.ProxyProtocol_Rule) (map[byte]ruleTarget, error) {
	if len(rules) == 0 {
		return nil, nil
	}
	out := make(map[byte]ruleTarget, len(rules))
	for i, r := range rules {
		path := fmt.Sprintf("%s: rules[%d]", Name, i)
		if r.GetTlvType() > 255 {
			return nil, fmt.Errorf("%s.tlv_type: %d; TLV types are one byte (0-255)", path, r.GetTlvType())
		}
		kv := r.GetOnTlvPresent()
		if kv.GetKey() == "" {
			return nil, fmt.Errorf("%s.on_tlv_present.key: required", path)
		}
		ns := kv.GetMetadataNamespace()
		if ns == "" {
			ns = DefaultNamespace
		}
		out[byte(r.GetTlvType())] = ruleTarget{namespace: ns, key: kv.GetKey(),
			base64: kv.GetValueStringEncoding() == ppv3.ProxyProtocol_KeyValuePair_BASE64}
	}
	return out, nil
}

// Metadata returns the dynamic metadata the rules take from h's TLVs, by namespace; nil
// when no rule matched. A TLV's value is a string: its bytes with invalid UTF-8 replaced
// (as Envoy sanitizes them), or their base64 with value_string_encoding BASE64.
func (f *Filter) Metadata(h Header) map[string]*structpb.Struct {
	if f.inFilterState {
		return nil
	}
	var out map[string]*structpb.Struct
	for _, t := range h.TLVs {
		r, ok := f.rules[t.Type]
		if !ok {
			continue
		}
		v := r.value(t.Value)
		if out == nil {
			out = map[string]*structpb.Struct{}
		}
		ns := out[r.namespace]
		if ns == nil {
			ns = &structpb.Struct{Fields: map[string]*structpb.Value{}}
			out[r.namespace] = ns
		}
		ns.Fields[r.key] = structpb.NewStringValue(v)
	}
	return out
}

// value is a TLV's value as a rule stores it.
func (r ruleTarget) value(b []byte) string {
	if r.base64 {
		return base64.StdEncoding.EncodeToString(b)
	}
	return strings.ToValidUTF8(string(b), "!")
}

// TLVKey is the filter state key of the object tlv_location FILTER_STATE puts the rules'
// values in (Envoy's).
const TLVKey = "envoy.network.proxy_protocol.tlv"

// TLVs returns the filter state object the rules take from h's TLVs with tlv_location
// FILTER_STATE, its fields the rules' keys (a later TLV of a key replaces an earlier one);
// nil when no rule matched or the values go to dynamic metadata.
func (f *Filter) TLVs(h Header) *TLVObject {
	if !f.inFilterState {
		return nil
	}
	var out *TLVObject
	for _, t := range h.TLVs {
		r, ok := f.rules[t.Type]
		if !ok {
			continue
		}
		if out == nil {
			out = &TLVObject{}
		}
		out.set(r.key, r.value(t.Value))
	}
	return out
}

// TLVObject is the TLVKey filter state object: the rules' values by key, in the order their
// TLVs came. Its typed serialization is a JSON object of the keys; it has no plain one, and
// each key is a field (%FILTER_STATE(envoy.network.proxy_protocol.tlv:FIELD:KEY)%). It is
// immutable once the filter has built it.
type TLVObject struct {
	keys, values []string
}

func (o *TLVObject) set(k, v string) {
	for i := range o.keys {
		if o.keys[i] == k {
			o.values[i] = v
			return
		}
	}
	o.keys, o.values = append(o.keys, k), append(o.values, v)
}

// Plain: the object has no plain serialization.
func (o *TLVObject) Plain() (string, bool) { return "", false }

// Typed returns the keys and their values as a JSON object.
func (o *TLVObject) Typed() *structpb.Value {
	s := &structpb.Struct{Fields: make(map[string]*structpb.Value, len(o.keys))}
	for i, k := range o.keys {
		s.Fields[k] = structpb.NewStringValue(o.values[i])
	}
	return structpb.NewStructValue(s)
}

// Field returns the value of the rule key name.
func (o *TLVObject) Field(name string) (string, bool) {
	for i, k := range o.keys {
		if k == name {
			return o.values[i], true
		}
	}
	return "", false
}

// PassThrough returns copies of h's TLVs that pass_through_tlvs selects, in order, for an
// upstream PROXY protocol socket; nil for none.
func (f *Filter) PassThrough(h Header) []TLV {
	return f.pass.Select(h.TLVs)
}

// Result is what the filter decided about the bytes buffered so far.
type Result uint8

const (
	// NeedMore: read more bytes and call OnData again.
	NeedMore Result = iota
	// Found: the header was read; drain Header.Len bytes and apply its addresses unless
	// Header.Local.
	Found
	// Absent: no header, and the filter allows that; the bytes go on untouched.
	Absent
	// Close: close the connection (malformed, disallowed or missing header). The filter has
	// counted it.
	Close
)

// OnData looks at the bytes read so far from a new connection.
func (f *Filter) OnData(b []byte) (Header, Result) {
	h, err := Parse(b)
	var pe *parseError
	switch {
	case err == nil:
		if f.disallowed[h.Version] {
			f.st.versions[h.Version].disallowed.Inc()
			f.st.legacyError.Inc()
			return Header{}, Close
		}
		f.st.versions[h.Version].found.Inc()
		return h, Found
	case errors.Is(err, errNeedMore):
		return Header{}, NeedMore
	case errors.Is(err, errNotFound):
		if f.allowWithout {
			f.st.notFoundAllowed.Inc()
			return Header{}, Absent
		}
		f.st.notFoundDisallowed.Inc()
	case errors.As(err, &pe):
		f.st.versions[pe.version].errors.Inc()
	}
	f.st.legacyError.Inc()
	return Header{}, Close
}
