package listener

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"sync"
	"syscall"

	"github.com/legateproxy/legate/config"
	"github.com/legateproxy/legate/internal/registry"
	"github.com/legateproxy/legate/logging"
	"github.com/legateproxy/legate/stats"
)

// UDP listeners. A listener on a UDP address binds one socket and one read loop
// (packetLoop) hands each datagram to the current version's PacketHandler, built by the
// UDPFilters factory of the listener's one listener filter (the UDP proxy). The socket sits
// in the entry like a TCP one, behind a net.Listener whose Accept waits for Close, so that
// /listeners, drains, updates and Close treat both alike. A version's handler is closed
// when the version stops serving: discarded, retired at the end of its drain, or at Close.

// PacketHandler serves a UDP listener's datagrams.
type PacketHandler interface {
	// Packet handles one datagram that from sent to the listener's socket pc. data is only
	// valid during the call. Packet is called by one goroutine at a time.
	Packet(pc *net.UDPConn, from netip.AddrPort, data []byte)
	// Close ends what the handler holds (its sessions).
	Close() error
}

// PacketContext is what a PacketHandlerFactory builds a handler from.
type PacketContext struct {
	// Listener is the listener's configuration.
	Listener *config.Listener
	// Stats is the server's stats store.
	Stats *stats.Store
	// Logger is the listener manager's logger (may be nil).
	Logger *logging.Logger
	// Services are the server's values for the filters that need them (ManagerConfig.Services).
	Services Services
}

// PacketHandlerFactory builds a UDP listener's handler from its listener filter's
// configuration, as the configuration path decoded and checked it (config.UDPListener.Config);
// an error refuses the listener.
type PacketHandlerFactory func(ctx *PacketContext, config any) (PacketHandler, error)

// UDPFilters is the kind of UDP listener filter extensions (Envoy's
// envoy.filters.udp_listener.*): the UDP proxy registers its factory with
//
//	registry.Add(b, listener.UDPFilters, Name, &pb.Config{}, factory)
//
// and the listener manager builds a UDP listener's handler through the frozen registry. How
// the filter's typed_config becomes the value its factory gets is package config's kind,
// config.UDPListenerFilterConfigs, under the same name.
var UDPFilters = registry.Kind[PacketHandlerFactory]{Category: registry.UDPListenerFilter, Facet: "udp"}

// newPacketHandler builds v's handler for a UDP listener. mu is held.
func (m *Manager) newPacketHandler(name string, l *config.Listener) (PacketHandler, error) {
	factory, _, ok := registry.Lookup(m.cfg.Extensions, UDPFilters, l.UDP.FilterName, l.UDP.FilterTypeURL)
	if !ok {
		return nil, fmt.Errorf("listener %q: listener_filters[0] (%s): UDP listeners are not available", name, l.UDP.FilterName)
	}
	h, err := factory(&PacketContext{Listener: l, Stats: m.cfg.Stats, Logger: m.cfg.Logger, Services: m.cfg.Services}, l.UDP.Config)
	if err != nil {
		return nil, fmt.Errorf("listener %q: listener_filters[0]: %w", name, err)
	}
	return h, nil
}

// maxDatagram is the longest UDP payload; the read buffer holds it so that every
// max_rx_datagram_size can be checked without truncation by the kernel.
const maxDatagram = 65535

// msgTrunc is the flag of a datagram the kernel truncated to the read buffer.
const msgTrunc = syscall.MSG_TRUNC

// udpListenerStats are listener.<address>.udp.*, registered for UDP listeners.
type udpListenerStats struct {
	DownstreamRxDatagramDropped stats.Counter `stat:"downstream_rx_datagram_dropped"`
}

// addUDP registers sh's udp.* stats once. mu is held.
func (sh *sharedStats) addUDP(store *stats.Store) {
	if sh.udp == nil {
		sh.udp = &udpListenerStats{}
		sh.regs = append(sh.regs, store.Register(sh.prefix+"udp.", sh.udp))
	}
}

// closeUDP closes v's packet handler, if it has one.
func (v *version) closeUDP() {
	if v.udp != nil {
		v.udp.Close()
	}
}

// packetListener is a bound UDP socket seen as a net.Listener: no connection is ever
// accepted; Accept waits for Close, which closes the socket and ends the read loop.
type packetListener struct {
	pc     *net.UDPConn
	once   sync.Once
	closed chan struct{}
}

func listenUDP(a config.Address) (*packetListener, error) {
	network := "udp4"
	if ip, err := netip.ParseAddr(a.Host); err == nil && ip.Is6() && !ip.Is4In6() {
		network = "udp6"
	}
	lc := net.ListenConfig{Control: reusePort}
	pc, err := lc.ListenPacket(context.Background(), network, net.JoinHostPort(a.Host, strconv.FormatUint(uint64(a.Port), 10)))
	if err != nil {
		return nil, err
	}
	return &packetListener{pc: pc.(*net.UDPConn), closed: make(chan struct{})}, nil
}

func (p *packetListener) Accept() (net.Conn, error) {
	<-p.closed
	return nil, net.ErrClosed
}

func (p *packetListener) Close() error {
	err := net.ErrClosed
	p.once.Do(func() {
		close(p.closed)
		err = p.pc.Close()
	})
	return err
}

func (p *packetListener) Addr() net.Addr { return p.pc.LocalAddr() }

// packetLoop reads s's datagrams until the socket closes and hands each to the handler of
// the entry's current version. A datagram longer than max_rx_datagram_size is dropped (the
// kernel flags it truncated).
func (m *Manager) packetLoop(s *socket, pl *packetListener) {
	defer m.wg.Done()
	defer s.loops.Done()
	buf := make([]byte, maxDatagram)
	for {
		n, _, flags, from, err := pl.pc.ReadMsgUDPAddrPort(buf, nil)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue // an ICMP error of an earlier send, and the like
		}
		v := s.entry.cur.Load()
		if flags&msgTrunc != 0 || n > int(v.cfg.UDP.MaxRxDatagramSize) || v.udp == nil {
			v.info.stats.udp.DownstreamRxDatagramDropped.Inc()
			continue
		}
		v.udp.Packet(pl.pc, from, buf[:n])
	}
}
