package listener

import (
	"context"
	"fmt"
	"net"
	"strings"
	"sync"

	"google.golang.org/protobuf/types/known/structpb"

	"github.com/legateproxy/legate/internal/filterstate"
)

// internalAddr is an Envoy internal address: envoy://<listener>/<endpoint id>.
type internalAddr struct{ listener, endpointID string }

func (a internalAddr) Network() string { return "envoy_internal" }
func (a internalAddr) String() string  { return "envoy://" + a.listener + "/" + a.endpointID }

// internalClient is the address an internal connection's client end has, as in Envoy.
var internalClient = internalAddr{listener: "internal_client_address"}

// internalListener is the "socket" of an internal listener: DialInternal hands it the server
// end of a pipe, which its accept loops take as they take TCP connections, so filter chains,
// drains and stats work the same.
type internalListener struct {
	m     *Manager
	addr  internalAddr
	size  int           // each direction's buffer
	conns chan net.Conn // unbuffered: a dial completes when an accept loop takes it
	done  chan struct{}
	once  sync.Once
}

// internalListen registers and returns the internal listener called name; it replaces an
// earlier one of the same name (a listener update that rebinds).
func (m *Manager) internalListen(name string) *internalListener {
	l := &internalListener{m: m, addr: internalAddr{listener: name}, size: m.cfg.InternalListener.BufferSize, conns: make(chan net.Conn), done: make(chan struct{})}
	m.internal.Store(name, l)
	return l
}

func (l *internalListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

// Close stops the listener: dials to its name fail from now on, until a new version binds.
func (l *internalListener) Close() error {
	l.once.Do(func() {
		close(l.done)
		l.m.internal.CompareAndDelete(l.addr.listener, l)
	})
	return nil
}

func (l *internalListener) Addr() net.Addr { return l.addr }

// DialInternal connects to the internal listener an envoy_internal_address names, given as
// its address string "envoy://<server_listener_name>/<endpoint_id>" (a cluster host's
// address). It waits, until ctx ends, for an accept loop to take the connection. The
// returned connection is in memory: no socket, no port.
func (m *Manager) DialInternal(ctx context.Context, address string) (net.Conn, error) {
	rest, ok := strings.CutPrefix(address, "envoy://")
	if !ok {
		return nil, fmt.Errorf("internal address %q: not an envoy:// address", address)
	}
	l, id := m.internalByAddress(rest)
	if l == nil {
		return nil, fmt.Errorf("internal address %q: no internal listener of that name", address)
	}
	client, server := newPipe(l.size, internalClient, internalAddr{listener: l.addr.listener, endpointID: id})
	server.metadata = PassthroughMetadata(ctx)
	server.shared = filterstate.Upstream(ctx)
	select {
	case l.conns <- server:
		return client, nil
	case <-l.done:
		return nil, fmt.Errorf("internal address %q: the listener closed", address)
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

type passthroughKey struct{}

// WithPassthroughMetadata returns ctx carrying the dynamic metadata an internal_upstream
// transport socket passes (passthrough_metadata): DialInternal gives it to the internal
// listener's connection (Conn.DynamicMetadata).
func WithPassthroughMetadata(ctx context.Context, md map[string]*structpb.Struct) context.Context {
	return context.WithValue(ctx, passthroughKey{}, md)
}

// PassthroughMetadata returns the metadata WithPassthroughMetadata put in ctx; nil for none.
func PassthroughMetadata(ctx context.Context) map[string]*structpb.Struct {
	md, _ := ctx.Value(passthroughKey{}).(map[string]*structpb.Struct)
	return md
}

// internalByAddress splits "<listener>/<endpoint id>" at the first slash that leaves a
// registered listener name before it (names and ids may both hold slashes).
func (m *Manager) internalByAddress(rest string) (*internalListener, string) {
	for i := 0; i < len(rest); i++ {
		if rest[i] != '/' {
			continue
		}
		if v, ok := m.internal.Load(rest[:i]); ok {
			return v.(*internalListener), rest[i+1:]
		}
	}
	if v, ok := m.internal.Load(rest); ok {
		return v.(*internalListener), ""
	}
	return nil, ""
}
