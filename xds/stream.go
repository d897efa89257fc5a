package xds

import (
	"errors"
	"fmt"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"

	"github.com/legateproxy/legate/xds/resource"
	xdswatch "github.com/legateproxy/legate/xds/watch"
)

var _ xdswatch.Streams = (*Client)(nil)

// streamHandler is the handler of a type an owner applies whole (Client.Stream) on one
// transport: it hands each response to the owner's Applier.
type streamHandler struct {
	m       *mux
	typeURL string
	a       xdswatch.Applier
}

// SetNames changes the names subscribed on the handler's transport.
func (s *streamHandler) SetNames(add, remove []string) { s.m.setNames(s.typeURL, add, remove) }

func (s *streamHandler) apply(_ *mux, u update) error {
	return s.a.Apply(s, xdswatch.Response{Version: u.version, Resources: u.resources, Names: u.names, Aliases: u.aliases, Removed: u.removed, Full: u.full})
}

func (s *streamHandler) failed(*mux) { s.a.Failed(s) }

// Stream subscribes a to the resources of typeURL that cs delivers (xds/watch.Streams): the
// owners of CDS, EDS, LDS, SRDS and VHDS apply each response whole through it.
func (c *Client) Stream(typeURL string, cs *corev3.ConfigSource, wildcard bool, a xdswatch.Applier) (xdswatch.Stream, error) {
	src, err := resource.SourceFromProto(cs)
	if err != nil {
		return nil, err
	}
	if src.Self {
		return nil, errors.New("self is not supported")
	}
	m, err := c.muxFor(src, typeURL)
	if err != nil {
		return nil, err
	}
	m.mu.Lock()
	w := m.watches[typeURL]
	if w == nil {
		s := &streamHandler{m: m, typeURL: typeURL, a: a}
		m.watches[typeURL] = &watch{typeURL: typeURL, h: s, wildcard: wildcard, names: map[string]struct{}{}, dirty: true}
		m.mu.Unlock()
		m.signal()
		return s, nil
	}
	m.mu.Unlock()
	if s, ok := w.h.(*streamHandler); ok && s.a == a && w.wildcard == wildcard {
		return s, nil
	}
	return nil, fmt.Errorf("xds: %s resources from %s are already watched by another owner", resource.ShortType(typeURL), m.key)
}

// HasADS reports whether the bootstrap configures an ADS stream.
func (c *Client) HasADS() bool { return c.ads != nil }
