package listener

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/protobuf/types/known/structpb"

	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	"google.golang.org/protobuf/proto"

	"github.com/legateproxy/legate/config"
	"github.com/legateproxy/legate/internal/clock"
	"github.com/legateproxy/legate/internal/filterstate"
	"github.com/legateproxy/legate/internal/grpcclient"
	"github.com/legateproxy/legate/internal/registry"
	"github.com/legateproxy/legate/logging"
	"github.com/legateproxy/legate/overload"
	"github.com/legateproxy/legate/stats"
)

// ErrDirectionStopped refuses a listener addition or modification in a traffic direction
// that /drain_listeners has stopped.
var ErrDirectionStopped = errors.New("listeners in this traffic direction are stopped")

// ManagerConfig holds the Manager's dependencies. Stats is required; every other field has
// the default stated in its comment.
type ManagerConfig struct {
	// Stats is the store the listener_manager.* and listener.<address>.* stats live in.
	Stats *stats.Store
	// Logger logs accept errors and connection decisions; nil discards.
	Logger *logging.Logger
	// Clock times drains, connection lengths and last_updated; nil means the system clock.
	Clock clock.Clock
	// DrainTime is --drain-time-s; DrainStrategy is --drain-strategy.
	DrainTime     time.Duration
	DrainStrategy DrainStrategy
	// Rand is the random source of gradual draining and of names for unnamed listeners; nil
	// means math/rand/v2.
	Rand func() uint64
	// Workers is --concurrency: each listening socket is served by this many accept loops,
	// and listener.<address>.worker_<N>.* counts what loop N accepted. 0 means 1.
	Workers int
	// HealthCheckFailed reports the /healthcheck/fail state: while true, Conn.DrainClose is
	// true on listeners with drain_type DEFAULT. Nil means never failed.
	HealthCheckFailed func() bool
	// Overload is the overload manager's state: its connection actions and global connection
	// limit apply at accept. Nil means no overload manager.
	Overload *overload.State
	// Runtime returns the runtime's integer value of key, or def when unset: each listener's
	// connection limit is envoy.resource_limits.listener.<name>.connection_limit. Nil means no
	// runtime, so no limit.
	Runtime func(key string, def uint64) uint64
	// InternalListener is the envoy.bootstrap.internal_listener bootstrap extension; nil
	// refuses listeners with internal_listener, as Envoy does without the extension.
	InternalListener *config.InternalListener
	// AccessLogs builds a listener's access_log, which logs the connections closed because
	// no filter chain matched them; nil refuses a listener that sets access_log.
	AccessLogs func(l *config.Listener) (NoChainLog, error)
	// Extensions holds the listener filters (listenerfilter.Filters), the network filters
	// (ConnFilters, TerminalFilters), the UDP listener filters (UDPFilters) and the matching
	// inputs a filter_chain_matcher may use (internal/matcher/network); nil refuses listeners
	// with listener_filters, a filter_chain_matcher, network filters or a UDP address.
	Extensions *registry.Registry
	// Services are the server's values the network filters' and UDP listener filters'
	// factories find in ChainContext.Services and PacketContext.Services (the HTTP connection
	// manager's, the TCP proxy's, the UDP proxy's); nil gives none.
	Services Services
	// Dial reaches a cluster's hosts for the network filters that call a gRPC service
	// (ChainContext.Dial); nil fails their calls.
	Dial grpcclient.Dial
}

// NoChainLog logs a connection that no filter chain matched, on the connection's goroutine
// before it closes.
type NoChainLog func(c NoChainConn)

// NoChainConn is what a listener knows of a connection no filter chain matched.
type NoChainConn struct {
	Start         time.Time
	Local, Remote net.Addr // the original destination when restored; the PROXY header's source
	DirectRemote  net.Addr // the socket's peer
	SNI           string   // from the TLS inspector; empty without one
	ID            uint64   // the connection's id (Conn.ID)
	// Metadata is the connection's dynamic metadata (Conn.DynamicMetadata); read only.
	Metadata map[string]*structpb.Struct
	// FilterState is what the listener filters put in the connection's filter state; nil
	// for nothing.
	FilterState *filterstate.State
}

// Manager is the listener manager (Envoy's ListenerManagerImpl): it binds the listeners,
// accepts their connections, selects each connection's filter chain and hands it to the
// chain's handler, and adds, updates (in place when only filter chains change), drains,
// stops and removes listeners.
//
// Concurrency: every method is safe for concurrent use. Control operations (add, update,
// remove, stop, Start, Close) serialise on mu; the accept loops read a listener's current
// version through an atomic pointer and never take mu. Goroutines: the accept loops (Workers
// per socket) and one goroutine per accepted connection; Close (or the end of Run) closes
// the sockets and connections and waits for all of them.
type Manager struct {
	cfg   ManagerConfig
	drain *DrainManager
	stats managerStats
	// active counts open downstream connections across every listener and
	// version, for server.total_connections and for draining on SIGTERM.
	active atomic.Int64
	// accepted counts connections accepted and not yet counted in active (their serveConn
	// has not run that far): a drain's end must not take them for an idle server.
	accepted atomic.Int64
	// connIDs numbers accepted connections (Conn.ID), starting at 1. The server has one
	// Manager, so the ids are unique in the process, as Envoy's connection ids are.
	connIDs atomic.Uint64
	// internal holds the bound internal listeners by name (string -> *internalListener), for
	// DialInternal, which takes no manager lock.
	internal sync.Map

	mu       sync.Mutex // guards the fields below
	entries  []*entry   // active listeners in insertion order
	retiring []*retiring
	shared   map[string]*sharedStats // listener stats by prefix
	stopped  stopState
	// inherited are listening sockets taken over from a hot-restart parent,
	// by configured address; bind uses them before binding anew.
	inherited map[string]net.Listener
	bound     bool // Start has run
	running   bool // accept loops run
	closed    bool

	wg sync.WaitGroup // accept loops, connection goroutines, drain-end callbacks
}

// stopState records which directions /drain_listeners stopped.
type stopState uint8

const (
	stopNone stopState = iota
	stopInbound
	stopAll
)

// retiring is a listener version, or some filter chains of one, being drained after an
// update or removal.
type retiring struct {
	name        string
	static      bool
	versionInfo string
	lastUpdated time.Time
	v           *version
	chains      []*chain
	whole       bool // the whole listener (update or removal), not filter chains only
	timer       clock.Timer
}

// NewManager returns a manager without listeners.
func NewManager(cfg ManagerConfig) (*Manager, error) {
	if cfg.Stats == nil {
		return nil, fmt.Errorf("listener manager: no stats store")
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.Real()
	}
	if cfg.Rand == nil {
		cfg.Rand = rand.Uint64
	}
	if cfg.Workers <= 0 {
		cfg.Workers = 1
	}
	if cfg.HealthCheckFailed == nil {
		cfg.HealthCheckFailed = func() bool { return false }
	}
	m := &Manager{cfg: cfg, shared: map[string]*sharedStats{}}
	m.drain = NewDrainManager(DrainConfig{Time: cfg.DrainTime, Strategy: cfg.DrainStrategy, Clock: cfg.Clock, Rand: cfg.Rand})
	m.drain.onDrain(m.serverDrainStarted)
	cfg.Stats.Register("listener_manager.", &m.stats)
	return m, nil
}

func (m *Manager) healthCheckFailed() bool { return m.cfg.HealthCheckFailed() }

// ActiveConnections is the number of downstream connections open on every
// listener, old versions included.
func (m *Manager) ActiveConnections() int64 { return m.active.Load() + m.accepted.Load() }

// directionStopped reports whether /drain_listeners stopped l's traffic
// direction. m.mu must be held.
func (m *Manager) directionStopped(l *config.Listener) bool {
	return m.stopped == stopAll || m.stopped == stopInbound && l.TrafficDirection == config.DirectionInbound
}

// SkipIfStopped reports whether l's traffic direction is stopped, counting
// it in listener_manager.listener_stopped_skipped when it is: LDS skips such
// a listener and applies the rest of its update, as Envoy does.
func (m *Manager) SkipIfStopped(l *config.Listener) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.directionStopped(l) {
		return false
	}
	m.stats.ListenerStoppedSkipped.Inc()
	return true
}

// SetWarming publishes listener_manager.total_listeners_warming: the
// listeners LDS holds back until their routes, secrets or extension
// configurations arrive never reach the manager while they warm, so LDS
// gives their number.
func (m *Manager) SetWarming(n int) { m.stats.TotalListenersWarming.Set(uint64(n)) }

// DrainManager returns the server drain manager (for SIGTERM and hot restart drains).
func (m *Manager) DrainManager() *DrainManager { return m.drain }

// AddStatic adds the bootstrap's static listeners, in order. Static listeners cannot be
// updated or removed through AddOrUpdate and Remove.
func (m *Manager) AddStatic(ls []*config.Listener) error {
	for _, l := range ls {
		if _, err := m.addOrUpdate(l, "", true); err != nil {
			return err
		}
	}
	return nil
}

// AddOrUpdate adds the listener l or replaces the one with the same name (LDS). It reports
// whether anything changed: an identical configuration is a no-op. When only the filter
// chains differ the listener is updated in place: unchanged chains keep their connections and
// removed or changed chains drain. Otherwise the new version takes over the sockets (or binds
// new ones when the addresses change) and the old version drains for the drain time, after
// which its remaining connections are closed.
func (m *Manager) AddOrUpdate(l *config.Listener, versionInfo string) (bool, error) {
	return m.addOrUpdate(l, versionInfo, false)
}

func (m *Manager) addOrUpdate(l *config.Listener, versionInfo string, static bool) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return false, fmt.Errorf("listener %q: the listener manager is closed", l.Name)
	}
	name := l.Name
	if name == "" {
		name = m.uuid()
	}
	if m.directionStopped(l) {
		return false, fmt.Errorf("listener %q cannot be added or modified: %w", name, ErrDirectionStopped)
	}
	idx := slices.IndexFunc(m.entries, func(e *entry) bool { return e.name == name })
	if idx < 0 {
		return true, m.add(name, l, versionInfo, static)
	}
	e := m.entries[idx]
	if e.static != static {
		return false, fmt.Errorf("listener %q: a static listener cannot be updated or removed by LDS, nor an LDS listener by the bootstrap", name)
	}
	old := e.cur.Load()
	if proto.Equal(old.cfg.Proto, l.Proto) {
		return false, nil
	}
	return true, m.update(e, old, l, versionInfo)
}

func (m *Manager) add(name string, l *config.Listener, versionInfo string, static bool) error {
	v, err := m.newVersion(name, l, nil)
	if err != nil {
		return err
	}
	e := &entry{name: name, static: static, versionInfo: versionInfo, lastUpdated: m.cfg.Clock.Now()}
	e.cur.Store(v)
	if m.bound {
		if e.sockets, err = m.bind(e); err != nil {
			m.stats.ListenerCreateFailure.Inc()
			m.discard(v, nil)
			return err
		}
		m.stats.ListenerCreateSuccess.Add(uint64(m.cfg.Workers))
		m.startAccepting(e)
	}
	m.entries = append(m.entries, e)
	m.stats.ListenerAdded.Inc()
	m.stats.TotalListenersActive.Set(uint64(len(m.entries)))
	return nil
}

func (m *Manager) update(e *entry, old *version, l *config.Listener, versionInfo string) error {
	inPlace := sameExceptChains(old.cfg, l)
	var reuse *version
	if inPlace {
		reuse = old
	}
	v, err := m.newVersion(e.name, l, reuse)
	if err != nil {
		return err
	}
	sameSockets := inPlace || sameAddresses(old.cfg, l)
	var sockets []*socket
	if m.bound && !sameSockets {
		probe := &entry{name: e.name}
		probe.cur.Store(v)
		if sockets, err = m.bind(probe); err != nil {
			m.stats.ListenerCreateFailure.Inc()
			m.discard(v, old)
			return err
		}
		for _, s := range sockets {
			s.entry = e
		}
	}
	oldVersionInfo, oldUpdated := e.versionInfo, e.lastUpdated
	e.cur.Store(v)
	e.versionInfo, e.lastUpdated = versionInfo, m.cfg.Clock.Now()
	if m.bound && !sameSockets {
		for _, s := range e.sockets {
			s.ln.Close()
		}
		e.sockets = sockets
		m.startAccepting(e)
	}
	if m.bound {
		// As in Envoy, every new listener version is added to each worker.
		m.stats.ListenerCreateSuccess.Add(uint64(m.cfg.Workers))
	}
	m.stats.ListenerModified.Inc()
	if inPlace {
		m.stats.ListenerInPlaceUpdated.Inc()
		var gone []*chain
		kept := v.allChains()
		for _, c := range old.allChains() {
			if !slices.Contains(kept, c) {
				gone = append(gone, c)
			}
		}
		if len(gone) > 0 {
			m.retire(&retiring{name: e.name, static: e.static, chains: gone, v: old})
		}
		return nil
	}
	m.retire(&retiring{name: e.name, static: e.static, versionInfo: oldVersionInfo, lastUpdated: oldUpdated, v: old, chains: old.allChains(), whole: true})
	return nil
}

// Remove removes the LDS listener called name: it stops accepting at once and its
// connections drain for the drain time. It reports whether the listener existed.
func (m *Manager) Remove(name string) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	idx := slices.IndexFunc(m.entries, func(e *entry) bool { return e.name == name })
	if idx < 0 || m.closed {
		return false, nil
	}
	e := m.entries[idx]
	if e.static {
		return false, fmt.Errorf("listener %q: a static listener cannot be removed", name)
	}
	m.entries = slices.Delete(m.entries, idx, idx+1)
	for _, s := range e.sockets {
		s.ln.Close()
	}
	v := e.cur.Load()
	m.retire(&retiring{name: name, versionInfo: e.versionInfo, lastUpdated: e.lastUpdated, v: v, chains: v.allChains(), whole: true})
	m.stats.ListenerRemoved.Inc()
	m.stats.TotalListenersActive.Set(uint64(len(m.entries)))
	return true, nil
}

// newVersion builds a listener version. With reuse (an in-place update) the listener-level
// state is shared and chains whose configuration is unchanged are kept. mu is held.
func (m *Manager) newVersion(name string, l *config.Listener, reuse *version) (*version, error) {
	v := &version{cfg: l}
	if l.Internal && m.cfg.InternalListener == nil {
		return nil, fmt.Errorf("listener %q: internal_listener: set, but the bootstrap has no %s extension (bootstrap_extensions), which internal listeners need", name, config.InternalListenerExtension)
	}
	if len(l.AccessLogs) > 0 {
		if m.cfg.AccessLogs == nil {
			return nil, fmt.Errorf("listener %q: access_log: listener access logs are not available", name)
		}
		log, err := m.cfg.AccessLogs(l)
		if err != nil {
			return nil, fmt.Errorf("listener %q: %w", name, err)
		}
		v.noChainLog = log
	}
	if reuse != nil {
		v.info = reuse.info
	} else {
		addr := l.Address.String()
		prefix := statPrefix(l.StatPrefix, addr)
		sh := m.shared[prefix]
		if sh == nil {
			sh = newSharedStats(m.cfg.Stats, prefix, m.cfg.Workers)
			m.shared[prefix] = sh
		}
		sh.refs++
		if l.UDP != nil {
			sh.addUDP(m.cfg.Stats)
		}
		v.info = &listenerInfo{
			mgr: m, name: name, stats: sh,
			inbound:           l.TrafficDirection == config.DirectionInbound,
			drainType:         l.DrainType,
			bufferLimit:       l.PerConnectionBufferLimitBytes,
			filterTimeout:     l.ListenerFiltersTimeout,
			continueOnTimeout: l.ContinueOnListenerFiltersTimeout,
			handOff:           l.UseOriginalDst,
			limitKey:          connectionLimitKey(name),
		}
		if err := m.buildListenerFilters(v.info, l); err != nil {
			m.discard(v, reuse)
			return nil, fmt.Errorf("listener %q: %w", name, err)
		}
	}
	if l.UDP != nil {
		h, err := m.newPacketHandler(name, l)
		if err != nil {
			m.discard(v, reuse)
			return nil, err
		}
		v.udp = h
		return v, nil
	}
	var old []*chain
	if reuse != nil {
		old = reuse.allChains()
	}
	build := func(path string, fc *config.FilterChain) (*chain, error) {
		for _, c := range old {
			if proto.Equal(c.cfg.Proto, fc.Proto) {
				return c, nil
			}
		}
		return m.newChain(v.info, l, path, fc)
	}
	for i, fc := range l.FilterChains {
		c, err := build(fmt.Sprintf("filter_chains[%d]", i), fc)
		if err != nil {
			m.discard(v, reuse)
			return nil, err
		}
		v.chains = append(v.chains, c)
	}
	if l.DefaultFilterChain != nil {
		c, err := build("default_filter_chain", l.DefaultFilterChain)
		if err != nil {
			m.discard(v, reuse)
			return nil, err
		}
		v.def = c
	}
	if l.FilterChainMatcher != nil {
		var err error
		if v.matcher, err = m.compileChainMatcher(name, l, v.chains); err != nil {
			m.discard(v, reuse)
			return nil, err
		}
	}
	return v, nil
}

// newChain builds one filter chain's handler from the factory of its terminal filter. On an
// error the network filters built so far are closed.
func (m *Manager) newChain(info *listenerInfo, l *config.Listener, path string, fc *config.FilterChain) (*chain, error) {
	c, err := m.buildChain(info, l, path, fc)
	if err != nil {
		c.closeHandler()
		return nil, err
	}
	return c, nil
}

func (m *Manager) buildChain(info *listenerInfo, l *config.Listener, path string, fc *config.FilterChain) (*chain, error) {
	c := &chain{cfg: fc, info: info, drain: newDrainSignal()}
	if d := m.drain.current(); d != nil && info.drainType == config.DrainDefault && d.dir.covers(info.inbound) {
		c.drain.begin(d.start)
	}
	if len(fc.Filters) == 0 {
		return c, nil
	}
	ctx := &ChainContext{Listener: l, Chain: fc, StatPrefix: info.stats.prefix, Stats: m.cfg.Stats, Logger: m.cfg.Logger,
		Now: m.cfg.Clock.Now, Dial: m.cfg.Dial, Services: m.cfg.Services}
	last := len(fc.Filters) - 1
	for i, f := range fc.Filters[:last] {
		cf, ok := m.connFilter(f)
		if !ok {
			if _, terminal := m.terminalFilter(f); terminal {
				return c, fmt.Errorf("listener %q: %s.filters[%d]: %q is a terminal filter; it must be the last filter of its chain", info.name, path, i, f.Name)
			}
			return c, m.unknownFilter(info.name, path, i, f)
		}
		filter, err := cf(ctx, f.Config)
		if err != nil {
			return c, fmt.Errorf("listener %q: %s.filters[%d]: %w", info.name, path, i, err)
		}
		c.filters = append(c.filters, filter)
	}
	factory, ok := m.terminalFilter(fc.Filters[last])
	if !ok {
		if _, conn := m.connFilter(fc.Filters[last]); conn {
			return c, fmt.Errorf("listener %q: %s.filters[%d]: %q is not a terminal filter; the last filter of a chain must be one (tcp_proxy, http_connection_manager, echo, direct_response)", info.name, path, last, fc.Filters[last].Name)
		}
		return c, m.unknownFilter(info.name, path, last, fc.Filters[last])
	}
	h, err := factory(ctx, fc.Filters[last].Config)
	if err != nil {
		return c, fmt.Errorf("listener %q: %s: %w", info.name, path, err)
	}
	c.handler = h
	return c, nil
}

// connFilter finds the factory of a non-terminal network filter in the extension registry.
func (m *Manager) connFilter(f config.NetworkFilter) (ConnFilterFactory, bool) {
	cf, _, ok := registry.Lookup(m.cfg.Extensions, ConnFilters, f.Name, f.TypeURL)
	return cf, ok
}

// terminalFilter finds the factory of a terminal network filter in the extension registry.
func (m *Manager) terminalFilter(f config.NetworkFilter) (HandlerFactory, bool) {
	h, _, ok := registry.Lookup(m.cfg.Extensions, TerminalFilters, f.Name, f.TypeURL)
	return h, ok
}

func (m *Manager) unknownFilter(listener, path string, i int, f config.NetworkFilter) error {
	return fmt.Errorf("listener %q: %s.filters[%d]: name = %q, typed_config type %q: no such network filter; known filters: %v",
		listener, path, i, f.Name, f.TypeURL, m.networkFilterNames())
}

// networkFilterNames lists the network filters a chain may name, sorted.
func (m *Manager) networkFilterNames() []string {
	var names []string
	for e := range registry.All(m.cfg.Extensions, ConnFilters) {
		names = append(names, e.Name)
	}
	for e := range registry.All(m.cfg.Extensions, TerminalFilters) {
		names = append(names, e.Name)
	}
	slices.Sort(names)
	return slices.Compact(names)
}

// discard undoes a version that will not serve: closes the handlers of chains built for it
// and releases its stats unless they belong to reuse. mu is held.
func (m *Manager) discard(v *version, reuse *version) {
	var kept []*chain
	if reuse != nil {
		kept = reuse.allChains()
	}
	for _, c := range v.allChains() {
		if !slices.Contains(kept, c) {
			c.shutdown()
		}
	}
	if reuse == nil || v.info != reuse.info {
		m.release(v.info.stats)
	}
	v.closeUDP()
}

// release drops a reference to shared stats. mu is held.
func (m *Manager) release(sh *sharedStats) {
	sh.refs--
	if sh.refs == 0 {
		delete(m.shared, sh.prefix)
		sh.unregister()
	}
}

// retire starts draining r's chains; after the drain time their connections are closed.
// mu is held.
func (m *Manager) retire(r *retiring) {
	now := m.cfg.Clock.Now()
	for _, c := range r.chains {
		c.drain.begin(now)
	}
	if r.whole {
		m.stats.TotalListenersDraining.Inc()
	} else {
		m.stats.TotalFilterChainsDraining.Add(uint64(len(r.chains)))
	}
	m.retiring = append(m.retiring, r)
	r.timer = m.cfg.Clock.AfterFunc(m.drain.DrainTime(), func() { m.finishRetiring(r) })
}

// finishRetiring ends r's drain: its connections are closed and its chains forgotten.
func (m *Manager) finishRetiring(r *retiring) {
	m.mu.Lock()
	i := slices.Index(m.retiring, r)
	if m.closed || i < 0 {
		m.mu.Unlock()
		return
	}
	m.wg.Add(1)
	defer m.wg.Done()
	m.retiring = slices.Delete(m.retiring, i, i+1)
	if r.whole {
		m.stats.TotalListenersDraining.Dec()
		m.release(r.v.info.stats)
	} else {
		m.stats.TotalFilterChainsDraining.Sub(uint64(len(r.chains)))
	}
	m.mu.Unlock()
	for _, c := range r.chains {
		c.shutdown()
	}
	if r.whole {
		r.v.closeUDP()
	}
}

// serverDrainStarted marks the chains of the listeners a server drain covers.
func (m *Manager) serverDrainStarted(dir DrainDirection, start time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, e := range m.entries {
		v := e.cur.Load()
		if v.info.drainType != config.DrainDefault || !dir.covers(v.info.inbound) {
			continue
		}
		for _, c := range v.allChains() {
			c.drain.begin(start)
		}
	}
}

// Start binds every listener added so far; listeners added later bind as they are added.
// On error nothing stays bound and the error names the listener and the address.
func (m *Manager) Start() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return fmt.Errorf("listener manager: closed")
	}
	if m.bound {
		return nil
	}
	for i, e := range m.entries {
		s, err := m.bind(e)
		if err != nil {
			m.stats.ListenerCreateFailure.Inc()
			for _, done := range m.entries[:i] {
				for _, s := range done.sockets {
					s.ln.Close()
				}
				done.sockets = nil
			}
			return err
		}
		e.sockets = s
	}
	m.bound = true
	m.stats.ListenerCreateSuccess.Add(uint64(m.cfg.Workers * len(m.entries)))
	m.stats.WorkersStarted.Set(1)
	return nil
}

// startAccepting starts the accept loops of e's sockets when the manager runs. mu is held.
func (m *Manager) startAccepting(e *entry) {
	if !m.running {
		return
	}
	for _, s := range e.sockets {
		if pl, ok := s.ln.(*packetListener); ok {
			m.wg.Add(1)
			s.loops.Add(1)
			go m.packetLoop(s, pl)
			continue
		}
		for w := 0; w < m.cfg.Workers; w++ {
			m.wg.Add(1)
			s.loops.Add(1)
			go m.acceptLoop(s, w)
		}
	}
}

// Run binds the listeners if Start has not, accepts connections until ctx is done, then
// closes everything as Close does. It returns nil after a clean shutdown.
func (m *Manager) Run(ctx context.Context) error {
	if err := m.Start(); err != nil {
		return err
	}
	m.mu.Lock()
	if m.running || m.closed {
		m.mu.Unlock()
		return fmt.Errorf("listener manager: already running or closed")
	}
	m.running = true
	for _, e := range m.entries {
		if !e.stopped {
			m.startAccepting(e)
		}
	}
	m.mu.Unlock()
	<-ctx.Done()
	m.Close()
	return nil
}

// Close stops accepting, cancels drains, closes every connection (their handlers must then
// return) and waits for the manager's goroutines. Calling it again waits again.
func (m *Manager) Close() {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		m.wg.Wait()
		return
	}
	m.closed = true
	var chains []*chain
	var versions []*version
	for _, e := range m.entries {
		for _, s := range e.sockets {
			s.ln.Close()
		}
		chains = append(chains, e.cur.Load().allChains()...)
		versions = append(versions, e.cur.Load())
	}
	for _, r := range m.retiring {
		r.timer.Stop()
		chains = append(chains, r.chains...)
		if r.whole {
			versions = append(versions, r.v)
		}
	}
	m.retiring = nil
	m.mu.Unlock()
	m.drain.Close()
	for _, c := range chains {
		c.shutdown()
	}
	for _, v := range versions {
		v.closeUDP()
	}
	m.wg.Wait()
}

// StopListeners stops accepting on every listener, or only on INBOUND listeners with
// inboundOnly: their sockets close while established connections carry on. Later additions
// and modifications in the stopped direction are refused. listener_manager.listener_stopped
// counts each listener stopped.
func (m *Manager) StopListeners(inboundOnly bool) {
	m.mu.Lock()
	var stopping []*socket
	defer func() {
		m.mu.Unlock()
		for _, s := range stopping { // closed once what the kernel queued is accepted
			s.awaitStopped(m)
		}
	}()
	if inboundOnly {
		m.stopped = max(m.stopped, stopInbound)
	} else {
		m.stopped = stopAll
	}
	for _, e := range m.entries {
		if e.stopped || inboundOnly && !e.cur.Load().info.inbound {
			continue
		}
		e.stopped = true
		for _, s := range e.sockets {
			s.stopAccepting(m)
			stopping = append(stopping, s)
		}
		m.stats.ListenerStopped.Inc()
	}
}

// DrainRequest is a POST /drain_listeners.
type DrainRequest struct {
	InboundOnly bool // inboundonly
	Graceful    bool // graceful
	SkipExit    bool // skip_exit (only with Graceful)
}

// DrainListeners carries out /drain_listeners. Without Graceful the listeners stop at once.
// With Graceful, unless a drain covering the direction already runs, a drain sequence starts
// (--drain-time-s, --drain-strategy); when it ends the listeners stop and exit is called,
// unless SkipExit, in which case the listeners keep running and connections keep draining.
// exit runs on a timer goroutine and may be nil.
func (m *Manager) DrainListeners(r DrainRequest, exit func()) {
	if !r.Graceful {
		m.StopListeners(r.InboundOnly)
		return
	}
	dir := DrainAll
	if r.InboundOnly {
		dir = DrainInboundOnly
	}
	if m.drain.Draining(dir) {
		return
	}
	m.drain.StartDrainSequence(dir, func() {
		if r.SkipExit {
			return
		}
		m.StopListeners(r.InboundOnly)
		if exit != nil {
			exit()
		}
	})
}

// Status is one listener as /listeners shows it.
type Status struct {
	Name string
	// Addresses are the bound addresses (the OS-chosen port for port 0), address first, then
	// additional_addresses; the configured ones when the listener is not bound.
	Addresses []config.Address
}

// Statuses returns the active listeners in insertion order.
func (m *Manager) Statuses() []Status {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]Status, 0, len(m.entries))
	for _, e := range m.entries {
		cfg := e.cur.Load().cfg
		addrs := append([]config.Address{cfg.Address}, cfg.AdditionalAddresses...)
		for i, s := range e.sockets {
			if i < len(addrs) {
				addrs[i] = boundAddress(addrs[i], s.ln.Addr())
			}
		}
		out = append(out, Status{Name: e.name, Addresses: addrs})
	}
	return out
}

// Addrs returns each bound listener's socket addresses by listener name.
func (m *Manager) Addrs() map[string][]net.Addr {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make(map[string][]net.Addr, len(m.entries))
	for _, e := range m.entries {
		for _, s := range e.sockets {
			out[e.name] = append(out[e.name], s.ln.Addr())
		}
	}
	return out
}

// boundAddress is configured with the host and port the socket actually has.
func boundAddress(configured config.Address, a net.Addr) config.Address {
	var ap netip.AddrPort
	switch t := a.(type) {
	case *net.TCPAddr:
		ap = t.AddrPort()
	case *net.UDPAddr:
		ap = t.AddrPort()
	default:
		return configured
	}
	ip := ap.Addr()
	if c, err := netip.ParseAddr(configured.Host); err == nil && c.Unmap().Is4() {
		ip = ip.Unmap()
	}
	configured.Host = ip.String()
	configured.Port = uint32(ap.Port())
	return configured
}

// uuid returns a random version 4 UUID, the name Envoy gives a listener without one.
func (m *Manager) uuid() string {
	var b [16]byte
	for i := 0; i < 16; i += 8 {
		r := m.cfg.Rand()
		for j := 0; j < 8; j++ {
			b[i+j] = byte(r >> (8 * j))
		}
	}
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

// handOffTarget returns the listener that serves a connection redirected to dst from a
// use_original_dst listener v: the listener bound to dst itself (bind_to_port: false ones
// included), else one on the wildcard address of dst's family and port, else v, as Envoy's
// hand-off does. It takes mu, on this path only: a redirected connection is rare next to the
// control operations that hold it.
func (m *Manager) handOffTarget(v *version, dst netip.AddrPort) *version {
	dst = unmapped(dst)
	wildcard := netip.IPv4Unspecified()
	if dst.Addr().Is6() {
		wildcard = netip.IPv6Unspecified()
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	var fallback *version
	for _, e := range m.entries {
		cur := e.cur.Load()
		for _, a := range append([]config.Address{cur.cfg.Address}, cur.cfg.AdditionalAddresses...) {
			ip, err := netip.ParseAddr(a.Host)
			if a.Kind == config.PipeAddress || err != nil || uint32(dst.Port()) != a.Port {
				continue
			}
			switch ip.Unmap() {
			case dst.Addr():
				return cur
			case wildcard:
				if fallback == nil {
					fallback = cur
				}
			}
		}
	}
	if fallback != nil {
		return fallback
	}
	return v
}

// sameExceptChains reports whether b differs from a in filter chains only (Envoy's condition
// for an in-place filter chain update).
func sameExceptChains(a, b *config.Listener) bool {
	x := proto.Clone(a.Proto).(*listenerv3.Listener)
	y := proto.Clone(b.Proto).(*listenerv3.Listener)
	x.FilterChains, x.DefaultFilterChain, x.FilterChainMatcher = nil, nil, nil
	y.FilterChains, y.DefaultFilterChain, y.FilterChainMatcher = nil, nil, nil
	return proto.Equal(x, y)
}

// sameAddresses reports whether the two configurations listen on the same sockets.
func sameAddresses(a, b *config.Listener) bool {
	return a.BindToPort == b.BindToPort && a.IPv4Compat == b.IPv4Compat &&
		slices.Equal(append([]config.Address{a.Address}, a.AdditionalAddresses...), append([]config.Address{b.Address}, b.AdditionalAddresses...))
}
