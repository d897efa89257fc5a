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
	if pb.GetTlvLocation() != ppv3.ProxyProtocol_DYNAMIC_METADATA {
		// Filter state holds what Legate's network filters and access logs never read.
		return nil, refused("tlv_location")
	}
	f := &Filter{allowWithout: pb.GetAllowRequestsWithoutProxyProtocol()}
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
	var out map[string]*structpb.Struct
	for _, t := range h.TLVs {
		r, ok := f.rules[t.Type]
		if !ok {
			continue
		}
		v := strings.ToValidUTF8(string(t.Value), "!")
		if r.base64 {
			v = base64.StdEncoding.EncodeToString(t.Value)
		}
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

// PassThrough returns copies of h's TLVs that pass_through_tlvs selects, in order, for an
// upstream PROXY protocol socket; nil for none.
func (f *Filter) PassThrough(h Header) []TLV {
	return f.pass.Select(h.TLVs)
}

func refused(field string) error {
	return fmt.Errorf("%s: %s: not implemented by Legate", Name, field)
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
