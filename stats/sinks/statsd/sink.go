package statsd

import (
	"net"
	"net/netip"
	"strconv"
	"sync"
	"time"

	"github.com/legateproxy/legate/stats"
)

// DefaultPrefix starts every name when the sink configures no prefix, as in Envoy.
const DefaultPrefix = "envoy"

// defaultWriteTimeout bounds a TCP flush, so that a collector that stops reading delays the
// flusher by at most this long; the connection is then dropped and redialled at the next flush.
const defaultWriteTimeout = time.Second

// Dialer opens the connection of a TCP sink (to a host of its cluster).
type Dialer func() (net.Conn, error)

// Options configure a Sink.
type Options struct {
	// Prefix starts every name; empty means DefaultPrefix.
	Prefix string
	// Tags sends tag-extracted names followed by "|#name:value,…" (DogStatsD).
	Tags bool
	// MaxDatagram packs lines, separated by newlines, into UDP datagrams of at most this many
	// bytes; zero sends each line in its own datagram.
	MaxDatagram int
	// WriteTimeout bounds each TCP flush; zero means one second.
	WriteTimeout time.Duration
}

// Sink sends each flush to a statsd collector over UDP or TCP.
type Sink struct {
	opts Options
	udp  *net.UDPConn // UDP sinks
	dial Dialer       // TCP sinks

	mu     sync.Mutex // guards what follows: Flush and Close
	tcp    net.Conn   // the TCP connection, nil until dialled or after a failed write
	closed bool
	line   []byte // the line being built
	out    []byte // the datagram (UDP) or the flush's lines (TCP) not yet written
}

// NewUDP returns a sink sending datagrams to addr.
func NewUDP(addr netip.AddrPort, opts Options) (*Sink, error) {
	c, err := net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(addr))
	if err != nil {
		return nil, err
	}
	return &Sink{opts: withDefaults(opts), udp: c}, nil
}

// NewTCP returns a sink writing lines over a connection from dial, opened at the first flush
// and again after a failed write. Tags and MaxDatagram do not apply.
func NewTCP(dial Dialer, opts Options) *Sink {
	opts.Tags, opts.MaxDatagram = false, 0
	return &Sink{opts: withDefaults(opts), dial: dial}
}

func withDefaults(o Options) Options {
	if o.Prefix == "" {
		o.Prefix = DefaultPrefix
	}
	if o.WriteTimeout <= 0 {
		o.WriteTimeout = defaultWriteTimeout
	}
	return o
}

// Flush sends the used counters' deltas and the used gauges' values. Its buffers are kept
// between flushes, so a flush allocates nothing once they have grown.
func (k *Sink) Flush(s *stats.Snapshot) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.closed {
		return
	}
	k.out = k.out[:0]
	for i := range s.Counters {
		if c := &s.Counters[i]; c.Used {
			k.add(&c.Metric, c.Delta, 'c')
		}
	}
	for i := range s.Gauges {
		if g := &s.Gauges[i]; g.Used {
			k.add(&g.Metric, g.Value, 'g')
		}
	}
	if k.udp != nil {
		k.sendDatagram()
	} else {
		k.writeTCP()
	}
}

// add builds one line and queues it: over TCP newline-terminated; over UDP packed into the
// current datagram as Envoy packs them (a line that cannot fit in any datagram goes alone).
func (k *Sink) add(m *stats.Metric, v uint64, typ byte) {
	k.line = k.appendLine(k.line[:0], m, v, typ)
	if k.udp == nil {
		k.out = append(append(k.out, k.line...), '\n')
		return
	}
	switch {
	case len(k.line) >= k.opts.MaxDatagram:
		k.udp.Write(k.line) // a lost datagram is statsd's contract; Envoy ignores the error too
		return
	case len(k.out)+1+len(k.line) > k.opts.MaxDatagram:
		k.sendDatagram()
	case len(k.out) > 0:
		k.out = append(k.out, '\n')
	}
	k.out = append(k.out, k.line...)
}

// appendLine appends "<prefix>.<name>:<v>|<typ>", then the tags of a DogStatsD sink.
func (k *Sink) appendLine(b []byte, m *stats.Metric, v uint64, typ byte) []byte {
	name := m.Name
	if k.opts.Tags {
		name = m.TagExtractedName
	}
	b = append(b, k.opts.Prefix...)
	b = append(b, '.')
	b = append(b, name...)
	b = append(b, ':')
	b = strconv.AppendUint(b, v, 10)
	b = append(b, '|', typ)
	if !k.opts.Tags {
		return b
	}
	for i, t := range m.Tags {
		if i == 0 {
			b = append(b, "|#"...)
		} else {
			b = append(b, ',')
		}
		b = append(b, t.Name...)
		b = append(b, ':')
		b = append(b, t.Value...)
	}
	return b
}

func (k *Sink) sendDatagram() {
	if len(k.out) > 0 {
		k.udp.Write(k.out)
		k.out = k.out[:0]
	}
}

// writeTCP writes the flush's lines, dialling first if needed. The lines of a flush that
// cannot be written are dropped, as Envoy drops them when the collector is unreachable.
func (k *Sink) writeTCP() {
	if len(k.out) == 0 {
		return
	}
	if k.tcp == nil {
		c, err := k.dial()
		if err != nil {
			return
		}
		k.tcp = c
	}
	k.tcp.SetWriteDeadline(time.Now().Add(k.opts.WriteTimeout))
	if _, err := k.tcp.Write(k.out); err != nil {
		k.tcp.Close()
		k.tcp = nil
	}
}

// Close closes the sink's socket; later flushes send nothing.
func (k *Sink) Close() error {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.closed {
		return nil
	}
	k.closed = true
	if k.udp != nil {
		return k.udp.Close()
	}
	if k.tcp != nil {
		return k.tcp.Close()
	}
	return nil
}
