package statsd

import (
	"bufio"
	"net"
	"net/netip"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/legateproxy/legate/internal/clock/clocktest"
	"github.com/legateproxy/legate/stats"
	"github.com/legateproxy/legate/stats/histogram"
	"github.com/legateproxy/legate/stats/tags"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// manualClock never moves: the store never ticks and the tests flush it themselves.
func manualClock() *clocktest.Fake { return clocktest.NewFake(time.Unix(1735689600, 0)) }

// upstream is a cluster's stats as Envoy names them.
type upstream struct {
	RqTotal  stats.Counter   `stat:"upstream_rq_total"`
	RqRetry  stats.Counter   `stat:"upstream_rq_retry"` // never incremented: unused, not sent
	CxActive stats.Gauge     `stat:"upstream_cx_active"`
	RqTime   stats.Histogram `stat:"upstream_rq_time,unit=ms"`
	Ratio    stats.Histogram `stat:"ratio,unit=percent"`
}

// newStore returns a store with the cluster "backend" and the command-line tag region:eu.
func newStore(t *testing.T) (*stats.Store, *upstream) {
	t.Helper()
	store, err := stats.New(stats.Config{Clock: manualClock(), FlushInterval: time.Second,
		Tags: tags.Config{Fixed: []tags.Tag{{Name: "region", Value: "eu"}}}})
	if err != nil {
		t.Fatal(err)
	}
	u := new(upstream)
	store.Register("cluster.backend.", u)
	return store, u
}

// lineRe is a statsd line: name, value, type and DogStatsD tags.
var lineRe = regexp.MustCompile(`^([A-Za-z0-9_.]+):([0-9]+|[0-9.]+(?:e-[0-9]+)?)\|(c|g|ms|h)(?:\|#([^|]*))?$`)

// parseLines checks that every line of a datagram or stream parses and returns them.
func parseLines(t *testing.T, payload string) []string {
	t.Helper()
	lines := strings.Split(payload, "\n")
	for _, l := range lines {
		if !lineRe.MatchString(l) {
			t.Errorf("line %q is not a statsd line", l)
		}
	}
	return lines
}

// udpCollector is a statsd UDP listener on 127.0.0.1.
type udpCollector struct {
	t    *testing.T
	conn net.PacketConn
}

func newUDPCollector(t *testing.T) *udpCollector {
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pc.Close() })
	return &udpCollector{t: t, conn: pc}
}

func (c *udpCollector) addr() netip.AddrPort {
	return c.conn.LocalAddr().(*net.UDPAddr).AddrPort()
}

// datagrams reads n datagrams (5 s at most).
func (c *udpCollector) datagrams(n int) []string {
	c.t.Helper()
	c.conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	var out []string
	buf := make([]byte, 65536)
	for len(out) < n {
		m, _, err := c.conn.ReadFrom(buf)
		if err != nil {
			c.t.Fatalf("after %q: %v", out, err)
		}
		out = append(out, string(buf[:m]))
	}
	return out
}

// TestStatsdUDP flushes a store into a statsd sink: each used counter's delta and used gauge's
// value arrives in its own datagram under its full name and the prefix, without tags; unused
// stats are not sent. Histogram values arrive as they are recorded, before any flush, also
// from histograms registered after the sink was added.
func TestStatsdUDP(t *testing.T) {
	for _, c := range []struct{ prefix, want string }{{"", "envoy"}, {"edge", "edge"}} {
		col := newUDPCollector(t)
		store, u := newStore(t)
		k, err := NewUDP(col.addr(), Options{Prefix: c.prefix})
		if err != nil {
			t.Fatal(err)
		}
		store.AddSink(k)
		u.RqTime.Record(12)
		u.Ratio.Record(histogram.PercentValue(0.25))
		late := new(upstream)
		store.Register("cluster.late.", late)
		late.RqTime.Record(1500)
		store.Register("cluster.late.", &struct{}{}).Histogram("dynamic_us", stats.Unit(histogram.Microseconds)).Record(7)
		got := col.datagrams(4)
		want := []string{c.want + ".cluster.backend.upstream_rq_time:12|ms", c.want + ".cluster.backend.ratio:0.25|h",
			c.want + ".cluster.late.upstream_rq_time:1500|ms", c.want + ".cluster.late.dynamic_us:7|ms"}
		if !slices.Equal(got, want) {
			t.Errorf("prefix %q: histogram values = %q; want %q", c.prefix, got, want)
		}
		u.RqTotal.Add(3)
		u.CxActive.Set(7)
		store.Flush()
		got = col.datagrams(2)
		want = []string{c.want + ".cluster.backend.upstream_rq_total:3|c", c.want + ".cluster.backend.upstream_cx_active:7|g"}
		if !slices.Equal(got, want) {
			t.Errorf("prefix %q: first flush = %q; want %q", c.prefix, got, want)
		}
		u.RqTotal.Add(2)
		store.Flush()
		got = col.datagrams(2)
		want[0] = c.want + ".cluster.backend.upstream_rq_total:2|c"
		if !slices.Equal(got, want) {
			t.Errorf("prefix %q: second flush = %q; want the delta %q", c.prefix, got, want)
		}
		for _, d := range got {
			parseLines(t, d)
		}
		k.Close()
	}
}

// TestDogStatsdTagsAndDatagrams checks DogStatsD lines (tag-extracted names, then the tags,
// the command-line ones first as Envoy orders them) and their packing into datagrams of at most
// max_bytes_per_datagram.
func TestDogStatsdTagsAndDatagrams(t *testing.T) {
	counter := "envoy.cluster.upstream_rq_total:3|c|#region:eu,envoy.cluster_name:backend"
	gauge := "envoy.cluster.upstream_cx_active:7|g|#region:eu,envoy.cluster_name:backend"
	for _, c := range []struct {
		max  int
		want []string
	}{
		{0, []string{counter, gauge}},                                     // one line per datagram
		{len(counter) + 1 + len(gauge), []string{counter + "\n" + gauge}}, // both fit exactly
		{len(counter) + len(gauge), []string{counter, gauge}},             // one byte short
		{10, []string{counter, gauge}},                                    // each too long: alone
	} {
		col := newUDPCollector(t)
		store, u := newStore(t)
		k, err := NewUDP(col.addr(), Options{Tags: true, MaxDatagram: c.max})
		if err != nil {
			t.Fatal(err)
		}
		store.AddSink(k)
		u.RqTime.Record(12)
		if got, want := col.datagrams(1)[0], "envoy.cluster.upstream_rq_time:12|ms|#region:eu,envoy.cluster_name:backend"; got != want {
			t.Errorf("max %d: histogram datagram %q; want %q", c.max, got, want)
		}
		u.RqTotal.Add(3)
		u.CxActive.Set(7)
		store.Flush()
		got := col.datagrams(len(c.want))
		if !slices.Equal(got, c.want) {
			t.Errorf("max %d: datagrams %q; want %q", c.max, got, c.want)
		}
		for _, d := range got {
			if c.max > len(counter) && len(d) > c.max {
				t.Errorf("max %d: datagram of %d bytes", c.max, len(d))
			}
			parseLines(t, d)
		}
		k.Close()
	}
}

// tcpCollector accepts statsd connections on 127.0.0.1 and delivers their lines.
type tcpCollector struct {
	ln    net.Listener
	conns chan net.Conn
}

func newTCPCollector(t *testing.T) *tcpCollector {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c := &tcpCollector{ln: ln, conns: make(chan net.Conn, 8)}
	go func() {
		for {
			nc, err := ln.Accept()
			if err != nil {
				close(c.conns)
				return
			}
			c.conns <- nc
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		for nc := range c.conns {
			nc.Close()
		}
	})
	return c
}

func (c *tcpCollector) dial() (net.Conn, error) { return net.Dial("tcp", c.ln.Addr().String()) }

// next waits (5 s at most) for the next connection.
func (c *tcpCollector) next(t *testing.T) (net.Conn, *bufio.Reader) {
	t.Helper()
	select {
	case nc := <-c.conns:
		nc.SetReadDeadline(time.Now().Add(5 * time.Second))
		return nc, bufio.NewReader(nc)
	case <-time.After(5 * time.Second):
		t.Fatal("no statsd connection within 5s")
		return nil, nil
	}
}

func readLines(t *testing.T, r *bufio.Reader, n int) []string {
	t.Helper()
	var out []string
	for len(out) < n {
		l, err := r.ReadString('\n')
		if err != nil {
			t.Fatalf("after %q: %v", out, err)
		}
		out = append(out, parseLines(t, strings.TrimSuffix(l, "\n"))...)
	}
	return out
}

// TestStatsdTCP flushes over TCP: newline-terminated lines with full names (no tags) on one
// connection, and a new connection once the collector has closed the first.
func TestStatsdTCP(t *testing.T) {
	col := newTCPCollector(t)
	store, u := newStore(t)
	k := NewTCP(col.dial, Options{Prefix: "p", Tags: true})
	defer k.Close()
	store.AddSink(k)
	u.RqTotal.Add(4)
	u.CxActive.Set(1)
	u.RqTime.Record(5)
	u.RqTime.Record(6)
	store.Flush()
	nc, r := col.next(t)
	want := []string{"p.cluster.backend.upstream_rq_time:5|ms", "p.cluster.backend.upstream_rq_time:6|ms",
		"p.cluster.backend.upstream_rq_total:4|c", "p.cluster.backend.upstream_cx_active:1|g"}
	if got := readLines(t, r, 4); !slices.Equal(got, want) {
		t.Errorf("first flush = %q; want %q", got, want)
	}
	u.RqTotal.Inc()
	store.Flush()
	want = want[2:]
	want[0] = "p.cluster.backend.upstream_rq_total:1|c"
	if got := readLines(t, r, 2); !slices.Equal(got, want) {
		t.Errorf("second flush = %q; want %q", got, want)
	}

	// The collector goes away: flushes fail until one redials. Bounded by the 5 s wait.
	nc.Close()
	deadline := time.Now().Add(5 * time.Second)
	var second net.Conn
	for second == nil && time.Now().Before(deadline) {
		store.Flush()
		select {
		case second = <-col.conns:
		case <-time.After(20 * time.Millisecond):
		}
	}
	if second == nil {
		t.Fatal("the sink did not redial within 5s")
	}
	defer second.Close()
	second.SetReadDeadline(time.Now().Add(5 * time.Second))
	want[0] = "p.cluster.backend.upstream_rq_total:0|c"
	if got := readLines(t, bufio.NewReader(second), 2); !slices.Equal(got, want) {
		t.Errorf("after redial = %q; want %q", got, want)
	}
}

// TestFlushAllocations checks that a flush allocates nothing once the buffers have grown, nor
// does sending a histogram value (checked without the race detector, which defeats sync.Pool).
func TestFlushAllocations(t *testing.T) {
	col := newUDPCollector(t)
	k, err := NewUDP(col.addr(), Options{Tags: true, MaxDatagram: 512})
	if err != nil {
		t.Fatal(err)
	}
	defer k.Close()
	snap := &stats.Snapshot{}
	for i := range 100 {
		m := stats.Metric{Name: "cluster.backend.upstream_rq_total", TagExtractedName: "cluster.upstream_rq_total",
			Tags: []tags.Tag{{Name: "envoy.cluster_name", Value: "backend"}}}
		snap.Counters = append(snap.Counters, stats.CounterSample{Metric: m, Delta: uint64(i), Used: true})
		snap.Gauges = append(snap.Gauges, stats.GaugeSample{Metric: m, Value: uint64(i), Used: true})
	}
	k.Flush(snap)
	if n := testing.AllocsPerRun(20, func() { k.Flush(snap) }); n != 0 {
		t.Errorf("Flush allocates %v times; want 0", n)
	}
	if raceEnabled {
		return
	}
	m := &snap.Counters[0].Metric
	k.OnHistogramComplete(m, histogram.Milliseconds, 12)
	if n := testing.AllocsPerRun(100, func() { k.OnHistogramComplete(m, histogram.Milliseconds, 12) }); n != 0 {
		t.Errorf("OnHistogramComplete allocates %v times; want 0", n)
	}
}
