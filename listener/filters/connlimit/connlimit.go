// Package connlimit is Envoy's envoy.filters.network.connection_limit network filter
// (extensions.filters.network.connection_limit.v3.ConnectionLimit): a non-terminal filter
// that lets at most max_connections connections of its filter chain be open at once and
// closes the others, after delay when one is set.
//
// Fields: stat_prefix, max_connections and delay are implemented; runtime_enabled is refused
// with "not implemented by Legate".
//
// Stats, as Envoy's: connection_limit.<stat_prefix>.limited_connections (counter) and
// connection_limit.<stat_prefix>.active_connections (gauge).
package connlimit

import (
	"fmt"
	"sync/atomic"
	"time"

	clv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/connection_limit/v3"
	"google.golang.org/protobuf/proto"

	"github.com/legateproxy/legate/listener"
	"github.com/legateproxy/legate/stats"
)

// Name is the filter's Envoy name.
const Name = "envoy.filters.network.connection_limit"

// settings are the filter's configuration as the configuration path converts it.
type settings struct {
	statPrefix string
	max        int64
	delay      time.Duration
}

// parse is the filter's config.NetworkFilterParser.
func parse(m proto.Message) (any, error) {
	pb := m.(*clv3.ConnectionLimit)
	switch {
	case pb.GetRuntimeEnabled() != nil:
		return nil, fmt.Errorf("%s: runtime_enabled: not implemented by Legate", Name)
	case pb.GetStatPrefix() == "":
		return nil, fmt.Errorf("%s: stat_prefix: empty; it is required", Name)
	case pb.GetMaxConnections().GetValue() < 1:
		return nil, fmt.Errorf("%s: max_connections: %d; it must be at least 1", Name, pb.GetMaxConnections().GetValue())
	}
	return &settings{statPrefix: pb.GetStatPrefix(), max: int64(pb.GetMaxConnections().GetValue()), delay: pb.GetDelay().AsDuration()}, nil
}

func build(ctx *listener.ChainContext, config any) (listener.ConnFilter, error) {
	s, err := listener.ConfigOf[*settings](Name, config)
	if err != nil {
		return nil, err
	}
	prefix := "connection_limit." + s.statPrefix
	return &limiter{
		max:     s.max,
		delay:   s.delay,
		limited: ctx.Stats.Counter(stats.PrefixJoin(prefix, "limited_connections")),
		active:  ctx.Stats.Gauge(stats.PrefixJoin(prefix, "active_connections"), stats.Accumulate),
	}, nil
}

// limiter is one filter: the connections its chain has open.
type limiter struct {
	max     int64
	delay   time.Duration
	open    atomic.Int64
	limited *stats.Counter
	active  *stats.Gauge
}

// OnConnection admits c while fewer than max connections are open; an over-limit connection
// is held for delay, then closed.
func (l *limiter) OnConnection(c *listener.Conn) bool {
	if l.open.Add(1) > l.max {
		l.open.Add(-1)
		l.limited.Inc()
		if l.delay > 0 {
			l.hold(c)
		}
		return false
	}
	l.active.Inc()
	c.OnClose(func() {
		l.open.Add(-1)
		l.active.Dec()
	})
	return true
}

// hold waits delay before the connection is closed, or less if the client leaves first.
func (l *limiter) hold(c *listener.Conn) {
	// Real clock: a socket deadline, which the runtime poller compares with the system clock.
	c.SetReadDeadline(time.Now().Add(l.delay))
	var b [512]byte
	for {
		if _, err := c.Read(b[:]); err != nil {
			return
		}
	}
}
