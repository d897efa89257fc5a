package statsd

import (
	"net"
	"net/netip"
	"strconv"
	"sync"
	"time"

	"github.com/legateproxy/legate/stats"
	"github.com/legateproxy/legate/stats/histogram"
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

	histMu sync.Mutex // guards hist
	hist   []byte     // TCP: histogram lines recorded since the last flush
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
	if k.udp == nil { // the histogram values recorded since the last flush go first
		k.histMu.Lock()
		k.out = append(k.out, k.hist...)
		k.hist = k.hist[:0]
		k.histMu.Unlock()
	}
	for i := range s.Counters {
		if c := &s.Counters[i]; c.Used {
			k.add(&c.Metric, c.Delta, "|c")
		}
	}
	for i := range s.Gauges {
		if g := &s.Gauges[i]; g.Used {
			k.add(&g.Metric, g.Value, "|g")
		}
	}
	if k.udp != nil {
		k.sendDatagram()
	} else {
		k.writeTCP()
	}
}

// maxPendingHistograms bounds the histogram lines a TCP sink holds between two flushes;
// later values are dropped until the next flush.
const maxPendingHistograms = 1 << 20

// linePool holds the buffers of histogram lines sent over UDP from recording goroutines.
var linePool = sync.Pool{New: func() any { return new([]byte) }}

// OnHistogramComplete sends one recorded histogram value as Envoy does: "|h" with the value
// as a fraction for a percent histogram, "|ms" with the raw value for any other unit. Over
// UDP the line goes at once in its own datagram; over TCP it waits for the next flush, so
// that a slow collector never holds up the recording goroutine.
func (k *Sink) OnHistogramComplete(m *stats.Metric, unit stats.Unit, v uint64) {
	bp := linePool.Get().(*[]byte)
	b := k.appendHead((*bp)[:0], m)
	typ := "|ms"
	if unit == histogram.Percent {
		typ = "|h"
		b = strconv.AppendFloat(b, float64(float32(v)/histogram.PercentScale), 'g', 6, 32)
	} else {
		b = strconv.AppendUint(b, v, 10)
	}
	b = k.appendTail(b, m, typ)
	if k.udp != nil {
		k.udp.Write(b)
	} else {
		k.histMu.Lock()
		if len(k.hist)+len(b)+1 <= maxPendingHistograms {
			k.hist = append(append(k.hist, b...), '\n')
		}
		k.histMu.Unlock()
	}
	*bp = b
	linePool.Put(bp)
}

// add builds one line and queues it: over TCP newline-terminated; over UDP packed into the
// current datagram as Envoy packs them (a line that cannot fit in any datagram goes alone).
func (k *Sink) add(m *stats.Metric, v uint64, typ string) {
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

// appendLine appends "<prefix>.<name>:<v><typ>", then the tags of a DogStatsD sink.
func (k *Sink) appendLine(b []byte, m *stats.Metric, v uint64, typ string) []byte {
	return k.appendTail(strconv.AppendUint(k.appendHead(b, m), v, 10), m, typ)
}

// appendHead appends "<prefix>.<name>:", the name being the tag-extracted one for DogStatsD.
func (k *Sink) appendHead(b []byte, m *stats.Metric) []byte {
	name := m.Name
	if k.opts.Tags {
		name = m.TagExtractedName
	}
	b = append(b, k.opts.Prefix...)
	b = append(b, '.')
	b = append(b, name...)
	return append(b, ':')
}

// appendTail appends the type ("|c") and, for DogStatsD, the tags ("|#name:value,…").
func (k *Sink) appendTail(b []byte, m *stats.Metric, typ string) []byte {
	b = append(b, typ...)
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
	// Real clock: a socket deadline, which the runtime poller compares with the system clock.
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
