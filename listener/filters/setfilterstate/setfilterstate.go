package setfilterstate

import (
	"fmt"

	setfsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/common/set_filter_state/v3"
	networkv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/set_filter_state/v3"
	"google.golang.org/protobuf/proto"

	"github.com/legateproxy/legate/accesslog"
	"github.com/legateproxy/legate/config"
	"github.com/legateproxy/legate/internal/filterstate"
	"github.com/legateproxy/legate/internal/registry"
	"github.com/legateproxy/legate/listener"
)

// Name is the network filter's Envoy name.
const Name = "envoy.filters.network.set_filter_state"

// The factories of FilterStateValue.factory_key Legate has.
const (
	// StringFactory makes a string object (Envoy's generic envoy.string).
	StringFactory = "envoy.string"
	// ClusterKey is the TCP proxy's cluster (Envoy's envoy.tcp_proxy.cluster, a well-known
	// key that is its own factory).
	ClusterKey = "envoy.tcp_proxy.cluster"
)

// Register registers the network filter's parser and factory with the extension registry.
func Register(b *registry.Builder) {
	registry.Add(b, config.NetworkFilterConfigs, Name, &networkv3.Config{}, parse)
	registry.Add(b, listener.ConnFilters, Name, &networkv3.Config{}, build)
}

// parse is the filter's config.NetworkFilterParser: its compiled Values.
func parse(m proto.Message) (any, error) {
	c := m.(*networkv3.Config)
	switch {
	case len(c.GetOnDownstreamTlsHandshake()) > 0:
		return nil, fmt.Errorf("%s: on_downstream_tls_handshake: not implemented by Legate", Name)
	case len(c.GetOnDownstreamData()) > 0:
		return nil, fmt.Errorf("%s: on_downstream_data: not implemented by Legate", Name)
	}
	return Compile(Name+": on_new_connection", c.GetOnNewConnection())
}

func build(_ *listener.ChainContext, cfg any) (listener.ConnFilter, error) {
	v, err := listener.ConfigOf[Values](Name, cfg)
	if err != nil {
		return nil, err
	}
	return Filter{values: v}, nil
}

// Value is one compiled FilterStateValue.
type Value struct {
	key    string
	format *accesslog.Formatter
	opts   filterstate.Options
	skip   bool // skip_if_empty
	// cluster marks envoy.tcp_proxy.cluster, which also sets the TCP proxy's cluster.
	cluster bool
}

// Values are a filter's FilterStateValues in order.
type Values []Value

// Compile converts FilterStateValues; path names the list in errors.
func Compile(path string, pbs []*setfsv3.FilterStateValue) (Values, error) {
	out := make(Values, 0, len(pbs))
	for i, pb := range pbs {
		at := fmt.Sprintf("%s[%d]", path, i)
		v := Value{key: pb.GetObjectKey(), skip: pb.GetSkipIfEmpty(), opts: filterstate.Options{ReadOnly: pb.GetReadOnly()}}
		if v.key == "" {
			return nil, fmt.Errorf("%s.object_key: required", at)
		}
		factory := pb.GetFactoryKey()
		if factory == "" {
			factory = v.key
		}
		switch factory {
		case StringFactory:
		case ClusterKey:
			v.cluster = v.key == ClusterKey
		default:
			return nil, fmt.Errorf("%s.factory_key: %q: not implemented by Legate (its factories are %s and %s)", at, factory, StringFactory, ClusterKey)
		}
		switch s := pb.GetSharedWithUpstream(); s {
		case setfsv3.FilterStateValue_NONE:
		case setfsv3.FilterStateValue_ONCE:
			v.opts.Sharing = filterstate.SharedWithUpstreamOnce
		case setfsv3.FilterStateValue_TRANSITIVE:
			v.opts.Sharing = filterstate.SharedWithUpstream
		default:
			return nil, fmt.Errorf("%s.shared_with_upstream: unknown value %d", at, s)
		}
		fs := pb.GetFormatString()
		if fs == nil {
			return nil, fmt.Errorf("%s.format_string: required", at)
		}
		if fs.GetJsonFormat() != nil {
			return nil, fmt.Errorf("%s.format_string.json_format: not implemented by Legate; a filter state value is a text format", at)
		}
		f, err := accesslog.FromSubstitutionFormatString(fs, at+".format_string", accesslog.Options{})
		if err != nil {
			return nil, err
		}
		v.format = f
		out = append(out, v)
	}
	return out, nil
}

// Apply evaluates each value against e and sets it in state, in order (a value sees the
// ones set before it, e.FilterState being state or its child). cluster, when not nil, is
// given the value of envoy.tcp_proxy.cluster. A value that formats empty with skip_if_empty,
// or whose object is read-only, is not set.
func (vs Values) Apply(state *filterstate.State, e *accesslog.Entry, cluster func(string)) {
	var buf []byte
	for i := range vs {
		v := &vs[i]
		buf = v.format.Format(buf[:0], e)
		if len(buf) == 0 && v.skip {
			continue
		}
		s := string(buf)
		if state.Set(v.key, filterstate.String(s), v.opts) != nil {
			continue
		}
		if v.cluster && cluster != nil {
			cluster(s)
		}
	}
}

// Filter is the network filter: it applies its values to each new connection.
type Filter struct{ values Values }

// OnConnection sets the values in c's filter state; it never refuses a connection.
func (f Filter) OnConnection(c *listener.Conn) bool {
	e := connEntry(c)
	f.values.Apply(c.FilterState(), &e, c.SetUpstreamCluster)
	return true
}

// connEntry is what a format string can know of a new connection.
func connEntry(c *listener.Conn) accesslog.Entry {
	return accesslog.Entry{
		DownstreamRemoteAddress:       addrString(c.RemoteAddr()),
		DownstreamDirectRemoteAddress: addrString(c.DirectRemoteAddr()),
		DownstreamLocalAddress:        addrString(c.LocalAddr()),
		RequestedServerName:           c.ServerName(),
		ConnectionID:                  c.ID(),
		DynamicMetadata:               c.DynamicMetadata(),
		FilterState:                   c.FilterState(),
	}
}

func addrString(a interface{ String() string }) string {
	if a == nil {
		return ""
	}
	return a.String()
}
