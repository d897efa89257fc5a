package listener

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"time"

	"github.com/legateproxy/legate/config"
	"github.com/legateproxy/legate/internal/registry"
	"github.com/legateproxy/legate/listener/listenerfilter"
)

// accepted is what the listener filters learn about a new connection.
type accepted struct {
	listenerfilter.Conn
	peeked []byte // bytes read and not consumed: the start of the stream the chain reads
}

// hello returns what the TLS (or HTTP) inspector read for filter chain matching.
func (a *accepted) hello() clientHello {
	return clientHello{serverName: a.ServerName, alpn: a.ALPN}
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

// runFilters runs the listener's listener filters in configuration order over the
// connection's first bytes, which b buffers (and keeps for the filter chain). It reports
// false when the connection must be closed (a filter refused it, the client closed, or
// listener_filters_timeout passed without continue_on_listener_filters_timeout). On that
// timeout with continue set, the remaining filters are skipped, as in Envoy.
func (m *Manager) runFilters(info *listenerInfo, b *filterBuffer, a *accepted) bool {
	if len(info.filters) == 0 {
		return true
	}
	st := &info.stats.s
	st.DownstreamPreCxActive.Inc()
	defer st.DownstreamPreCxActive.Dec()
	if info.filterTimeout > 0 {
		// Real clock: a socket deadline, which the runtime poller compares with the system clock.
		b.nc.SetReadDeadline(time.Now().Add(info.filterTimeout))
		defer b.nc.SetReadDeadline(time.Time{})
	}
	for _, f := range info.filters {
		for {
			drained, s := f.OnData(b.data(), &a.Conn)
			b.drain(drained)
			if s == listenerfilter.Done {
				break
			}
			switch s {
			case listenerfilter.Fail:
				st.DownstreamListenerFilterError.Inc()
				return false
			case listenerfilter.Close:
				return false
			}
			if err := b.fill(); err != nil {
				return info.filterReadFailed(err, a)
			}
		}
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
	for _, f := range li.filters {
		if rf, ok := f.(listenerfilter.ReadFailer); ok {
			rf.ReadFailed(&a.Conn)
		}
	}
	return false
}

// buildListenerFilters builds the listener's listener_filters from the extension registry.
func (m *Manager) buildListenerFilters(info *listenerInfo, l *config.Listener) error {
	for _, lf := range l.ListenerFilters {
		u := lf.TypedConfig.GetTypeUrl()
		factory, e, ok := registry.Lookup(m.cfg.Extensions, listenerfilter.Filters, lf.Name, u)
		// A typed_config selects by its type alone, as Envoy finds every extension: the
		// name is then free text.
		if !ok || u != "" && e.TypeURL() != u {
			return unknownListenerFilter(m.cfg.Extensions, lf)
		}
		cfg, err := e.Decode(lf.Path+".typed_config", lf.TypedConfig)
		if err != nil {
			return err
		}
		f, err := factory(&listenerfilter.Context{Path: lf.Path, Listener: l, Stats: m.cfg.Stats, Logger: m.cfg.Logger}, cfg)
		if err != nil {
			return err
		}
		info.filters = append(info.filters, f)
	}
	return nil
}

// unknownListenerFilter is the error for a listener filter no extension implements.
func unknownListenerFilter(r *registry.Registry, lf config.ListenerFilter) error {
	var names []string
	for e := range registry.All(r, listenerfilter.Filters) {
		names = append(names, e.Name)
	}
	implemented := "none is"
	if len(names) > 0 {
		implemented = "only " + strings.Join(names, ", ") + " are"
	}
	if u := lf.TypedConfig.GetTypeUrl(); u != "" {
		return fmt.Errorf("%s.typed_config = %q: unsupported listener filter; %s implemented", lf.Path, u, implemented)
	}
	return fmt.Errorf("%s.name = %q: unsupported listener filter; %s implemented", lf.Path, lf.Name, implemented)
}
