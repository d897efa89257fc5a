package config

import (
	"fmt"
	"strings"

	xdscorev3 "github.com/cncf/xds/go/xds/core/v3"
	xdsmatcherv3 "github.com/cncf/xds/go/xds/type/matcher/v3"
	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	tsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/matching/common_inputs/transport_socket/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/legateproxy/legate/internal/matcher"
	"github.com/legateproxy/legate/internal/matcher/transportsocket"
	"github.com/legateproxy/legate/tlsutil"
)

// SocketMatchMetadataNamespace is the filter metadata namespace of endpoints and localities
// that transport_socket_matches compare against.
const SocketMatchMetadataNamespace = "envoy.transport_socket_match"

// TransportSocketMatch is one entry of a cluster's transport_socket_matches.
type TransportSocketMatch struct {
	// Name names the match's stats (cluster.<stat name>.<Name>.total_match_count).
	Name string
	// Labels are the match's fields, each value in the canonical form SocketMatchLabels
	// gives; every one must be in an endpoint's (or locality's) metadata, with an equal value.
	Labels          map[string]string
	TransportSocket *corev3.TransportSocket
}

// SocketMatchLabels reads a Struct as match labels: each value becomes the deterministic
// encoding of its protobuf Value, so that two labels are equal exactly when their values
// are (a string "1" and the number 1 differ, as in Envoy).
func SocketMatchLabels(s *structpb.Struct) map[string]string {
	fields := s.GetFields()
	if len(fields) == 0 {
		return nil
	}
	out := make(map[string]string, len(fields))
	for k, v := range fields {
		b, err := proto.MarshalOptions{Deterministic: true}.Marshal(v)
		if err != nil {
			// A Value that does not marshal (an invalid UTF-8 string) equals nothing.
			b = []byte{0xff}
		}
		out[k] = string(b)
	}
	return out
}

// socketMatchMetadata returns the envoy.transport_socket_match labels of md.
func socketMatchMetadata(md *corev3.Metadata) map[string]string {
	return SocketMatchLabels(md.GetFilterMetadata()[SocketMatchMetadataNamespace])
}

// labelsMatch reports whether every label of want is in have with the same value; an
// empty want matches anything, even no metadata (Envoy's metadataLabelMatch).
func labelsMatch(want, have map[string]string) bool {
	for k, v := range want {
		if got, ok := have[k]; !ok || got != v {
			return false
		}
	}
	return true
}

// MatchTransportSocket selects the transport socket of an endpoint whose
// envoy.transport_socket_match metadata is endpoint, in a locality whose metadata is
// locality: the first match the endpoint's metadata satisfies, else the first the
// locality's satisfies. It returns that match's index + 1, or 0 for the cluster's
// transport_socket.
func (c *Cluster) MatchTransportSocket(endpoint, locality map[string]string) int {
	for _, have := range []map[string]string{endpoint, locality} {
		for i := range c.TransportSocketMatches {
			if labelsMatch(c.TransportSocketMatches[i].Labels, have) {
				return i + 1
			}
		}
	}
	return 0
}

// TransportSocketFor returns the transport socket MatchTransportSocket's result i selects.
func (c *Cluster) TransportSocketFor(i int) *corev3.TransportSocket {
	if i <= 0 || i > len(c.TransportSocketMatches) {
		return c.TransportSocket
	}
	return c.TransportSocketMatches[i-1].TransportSocket
}

// TransportSocketPath names the field of the socket MatchTransportSocket's result i
// selects, for errors.
func (c *Cluster) TransportSocketPath(i int) string {
	if i <= 0 || i > len(c.TransportSocketMatches) {
		return fmt.Sprintf("cluster %q: transport_socket", c.Name)
	}
	return fmt.Sprintf("cluster %q: transport_socket_matches[%d].transport_socket", c.Name, i-1)
}

// socketMatches converts transport_socket_matches, checking each socket as the cluster's
// own is checked, so that a bad one fails the load rather than the first connection.
func (b *clusterBuilder) socketMatches(c *clusterv3.Cluster, out *Cluster) {
	seen := map[string]bool{}
	for i, m := range c.GetTransportSocketMatches() {
		at := fmt.Sprintf("transport_socket_matches[%d]", i)
		if m.GetName() == "" {
			b.fail("%s.name: empty; each match needs a name for its stats", at)
			continue
		}
		if seen[m.GetName()] {
			b.fail("%s.name = %q: listed twice; match names must be unique", at, m.GetName())
			continue
		}
		seen[m.GetName()] = true
		if _, err := tlsutil.Upstream(b.ext, at+".transport_socket", m.GetTransportSocket()); err != nil {
			b.fail("%v", err)
			continue
		}
		out.TransportSocketMatches = append(out.TransportSocketMatches, TransportSocketMatch{
			Name:            m.GetName(),
			Labels:          SocketMatchLabels(m.GetMatch()),
			TransportSocket: m.GetTransportSocket(),
		})
	}
	if m := c.GetTransportSocketMatcher(); m != nil && b.err == nil {
		b.socketMatcher(m, out)
	}
}

// socketMatcher compiles transport_socket_matcher, whose actions name one of
// transport_socket_matches (MatchTransportSocket's index of it).
func (b *clusterBuilder) socketMatcher(m *xdsmatcherv3.Matcher, out *Cluster) {
	byName := map[string]int{}
	for i, tm := range out.TransportSocketMatches {
		byName[tm.Name] = i + 1
	}
	compiled, err := matcher.Compile(m, "transport_socket_matcher", matcher.Domain[transportsocket.Data, int]{
		Registry: b.ext,
		Inputs:   transportsocket.Inputs,
		Action: func(path string, a *xdscorev3.TypedExtensionConfig) (int, error) {
			var act tsv3.TransportSocketNameAction
			if a.GetTypedConfig() == nil || !a.GetTypedConfig().MessageIs(&act) {
				return 0, fmt.Errorf("%s.typed_config: type %q (name %q): not implemented by Legate; a transport socket matcher's action is a TransportSocketNameAction", path, a.GetTypedConfig().GetTypeUrl(), a.GetName())
			}
			if err := a.GetTypedConfig().UnmarshalTo(&act); err != nil {
				return 0, fmt.Errorf("%s.typed_config: %w", path, err)
			}
			i, ok := byName[act.GetName()]
			if !ok {
				return 0, fmt.Errorf("%s.typed_config.name = %q; no transport_socket_matches entry has that name", path, act.GetName())
			}
			return i, nil
		},
	})
	if err != nil {
		b.fail("%v", err)
		return
	}
	out.TransportSocketMatcher = compiled
	out.SocketMatcherReadsFilterState = hasAny(m.ProtoReflect(), string((&tsv3.FilterStateInput{}).ProtoReflect().Descriptor().FullName()))
}

// hasAny reports whether m holds, at any depth, a google.protobuf.Any of the message type
// named full (an input of a matcher, wherever the matcher nests it).
func hasAny(m protoreflect.Message, full string) bool {
	if a, ok := m.Interface().(*anypb.Any); ok {
		url := a.GetTypeUrl()
		return url[strings.LastIndexByte(url, '/')+1:] == full
	}
	found := false
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		switch {
		case fd.Kind() != protoreflect.MessageKind && fd.Kind() != protoreflect.GroupKind:
		case fd.IsList():
			for i := 0; i < v.List().Len() && !found; i++ {
				found = hasAny(v.List().Get(i).Message(), full)
			}
		case fd.IsMap():
			if fd.MapValue().Kind() == protoreflect.MessageKind {
				v.Map().Range(func(_ protoreflect.MapKey, mv protoreflect.Value) bool {
					found = hasAny(mv.Message(), full)
					return !found
				})
			}
		default:
			found = hasAny(v.Message(), full)
		}
		return !found
	})
	return found
}

// socketMatchCriteria reads a health check's transport_socket_match_criteria: set (even
// empty, which selects the first match) or nil.
func socketMatchCriteria(s *structpb.Struct) map[string]string {
	if s == nil {
		return nil
	}
	if m := SocketMatchLabels(s); m != nil {
		return m
	}
	return map[string]string{}
}
