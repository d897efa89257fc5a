package listener

import (
	"errors"
	"io"
	"net"
	"os"
	"time"

	"github.com/legateproxy/legate/config"
	"github.com/legateproxy/legate/listener/httpinspector"
	"github.com/legateproxy/legate/listener/proxyprotocol"
)

// accepted is what the listener filters learn about a new connection.
type accepted struct {
	peeked []byte // bytes read and not consumed: the start of the stream the chain reads
	hello  clientHello
	tls    bool // the TLS inspector saw a ClientHello
	// restored is the connection's local address as original_dst or a PROXY header gave it;
	// remote is the PROXY header's source. nil: the socket's own address.
	restored *net.TCPAddr
	remote   *net.TCPAddr
}

// filterBuffer is Envoy's listener filter buffer: the bytes read from a new connection for
// the listener filters. A filter that consumes bytes (the PROXY protocol header) drains them;
// inspectors only look. What is left reaches the filter chain first.
type filterBuffer struct {
	nc  net.Conn
	buf []byte
	off int // start of the undrained bytes
}

// maxFilterBuffer bounds what the listener filters may read: the largest ClientHello the TLS
// inspector takes (64 KiB) after the largest PROXY v2 header (64 KiB), with room for records.
const maxFilterBuffer = 160 << 10

func (b *filterBuffer) data() []byte { return b.buf[b.off:] }

func (b *filterBuffer) drain(n int) { b.off += n }

// fill reads more bytes from the connection.
func (b *filterBuffer) fill() error {
	if len(b.buf) == cap(b.buf) {
		if len(b.buf) >= maxFilterBuffer {
			return errFilterBufferFull
		}
		b.buf = append(b.buf, make([]byte, max(2048, len(b.buf)))...)[:len(b.buf)]
	}
	n, err := b.nc.Read(b.buf[len(b.buf):cap(b.buf)])
	b.buf = b.buf[:len(b.buf)+n]
	if n > 0 {
		return nil
	}
	if err == nil {
		err = io.ErrNoProgress
	}
	return err
}

var errFilterBufferFull = errors.New("listener filters read their maximum without deciding")

// step is one listener filter's look at the buffered bytes.
type step uint8

const (
	stepNeedMore step = iota
	stepDone
	stepClose
)

// needsData reports whether a listener filter reads the connection's first bytes.
func (li *listenerInfo) needsData() bool {
	return li.proxyProtocol != nil || li.tlsInspector || li.httpInspector != nil
}

// runFilters runs the listener filters that read the start of the connection, in the order
// Envoy configurations put them: the PROXY protocol header comes first on the wire, then the
// TLS inspector, then the HTTP inspector. It reports false when the connection must be
// closed (a filter refused it, the client closed, or listener_filters_timeout passed without
// continue_on_listener_filters_timeout). On that timeout with continue set, the remaining
// filters are skipped, as in Envoy.
func (m *Manager) runFilters(info *listenerInfo, nc net.Conn, a *accepted) bool {
	st := &info.stats.s
	st.DownstreamPreCxActive.Inc()
	defer st.DownstreamPreCxActive.Dec()
	if info.filterTimeout > 0 {
		// Real clock: a socket deadline, which the runtime poller compares with the system clock.
		nc.SetReadDeadline(time.Now().Add(info.filterTimeout))
		defer nc.SetReadDeadline(time.Time{})
	}
	b := &filterBuffer{nc: nc}
	filters := [...]func([]byte, *accepted) (int, step){
		info.proxyProtocolStep(nc),
		info.tlsInspectorStep,
		info.httpInspectorStep,
	}
	for _, f := range filters {
		for {
			drained, s := f(b.data(), a)
			b.drain(drained)
			if s == stepDone {
				break
			}
			if s == stepClose {
				return false
			}
			if err := b.fill(); err != nil {
				if ok := info.filterReadFailed(err, a); ok {
					a.peeked = b.data()
					return true
				}
				return false
			}
		}
	}
	if d := b.data(); len(d) > 0 {
		a.peeked = d
	}
	return true
}

// filterReadFailed accounts for a read that failed while a listener filter waited for
// bytes, and reports whether the connection goes on (a timeout with
// continue_on_listener_filters_timeout).
func (li *listenerInfo) filterReadFailed(err error, a *accepted) bool {
	st := &li.stats.s
	switch {
	case errors.Is(err, os.ErrDeadlineExceeded):
		st.DownstreamPreCxTimeout.Inc()
		return li.continueOnTimeout
	case errors.Is(err, io.EOF):
		st.DownstreamListenerFilterRemoteClose.Inc()
	default:
		st.DownstreamListenerFilterError.Inc()
	}
	if li.httpInspector != nil && !a.tls {
		li.httpInspector.ReadError()
	}
	return false
}

// proxyProtocolStep returns the PROXY protocol filter's step for the connection nc (a no-op
// without the filter).
func (li *listenerInfo) proxyProtocolStep(nc net.Conn) func([]byte, *accepted) (int, step) {
	return func(b []byte, a *accepted) (int, step) {
		if li.proxyProtocol == nil {
			return 0, stepDone
		}
		h, res := li.proxyProtocol.OnData(b)
		switch res {
		case proxyprotocol.NeedMore:
			return 0, stepNeedMore
		case proxyprotocol.Absent:
			return 0, stepDone
		case proxyprotocol.Close:
			li.mgr.cfg.Logger.Debugf("listener '%s': closing connection from %s: bad or missing PROXY protocol header", li.name, nc.RemoteAddr())
			return 0, stepClose
		}
		if !h.Local {
			a.remote = net.TCPAddrFromAddrPort(h.Source)
			local := nc.LocalAddr()
			if a.restored != nil {
				local = a.restored
			}
			if l, ok := local.(*net.TCPAddr); !ok || l.AddrPort() != h.Destination {
				a.restored = net.TCPAddrFromAddrPort(h.Destination)
			}
		}
		return h.Len, stepDone
	}
}

// tlsInspectorStep is the TLS inspector: it tells TLS from raw bytes and, for TLS, reads the
// SNI and ALPN of the ClientHello.
func (li *listenerInfo) tlsInspectorStep(b []byte, a *accepted) (int, step) {
	if !li.tlsInspector {
		return 0, stepDone
	}
	h, err := parseClientHello(b)
	switch err {
	case nil:
		a.hello, a.tls = h, true
		return 0, stepDone
	case errNotTLS:
		return 0, stepDone
	case errHelloTooLarge:
		li.stats.s.DownstreamListenerFilterError.Inc()
		return 0, stepClose
	}
	return 0, stepNeedMore
}

// httpInspectorStep is the HTTP inspector: it reads the application protocol of a plain-text
// connection.
func (li *listenerInfo) httpInspectorStep(b []byte, a *accepted) (int, step) {
	if li.httpInspector == nil || a.tls {
		return 0, stepDone
	}
	proto, done := li.httpInspector.Inspect(b)
	if !done {
		return 0, stepNeedMore
	}
	if proto != "" {
		a.hello.alpn = []string{proto}
	}
	return 0, stepDone
}

// buildListenerFilters builds the configured listener filters that have a configuration.
func (m *Manager) buildListenerFilters(info *listenerInfo, l *config.Listener) error {
	if l.ProxyProtocol {
		f, err := proxyprotocol.FromAny(l.ProxyProtocolConfig, m.cfg.Stats)
		if err != nil {
			return err
		}
		info.proxyProtocol = f
	}
	if l.HTTPInspector {
		info.httpInspector = httpinspector.New(m.cfg.Stats)
	}
	return nil
}
