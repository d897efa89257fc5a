package proxyprotocol

import (
	"errors"
	"fmt"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	ppv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/listener/proxy_protocol/v3"

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
	st           filterStats
}

type filterStats struct {
	legacyError        *stats.Counter
	notFoundAllowed    *stats.Counter
	notFoundDisallowed *stats.Counter
	versions           [3]versionStats // [1] and [2]
}

type versionStats struct{ found, disallowed, errors *stats.Counter }

// New builds the filter of pb, registering its stats in store.
func New(pb *ppv3.ProxyProtocol, store *stats.Store) (*Filter, error) {
	switch {
	case len(pb.GetRules()) > 0:
		return nil, refused("rules")
	case pb.GetPassThroughTlvs() != nil:
		return nil, refused("pass_through_tlvs")
	case pb.GetTlvLocation() != ppv3.ProxyProtocol_DYNAMIC_METADATA:
		return nil, refused("tlv_location")
	}
	f := &Filter{allowWithout: pb.GetAllowRequestsWithoutProxyProtocol()}
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
