package server

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/legateproxy/legate/hotrestart"
	"github.com/legateproxy/legate/internal/clock"
	"github.com/legateproxy/legate/listener"
	"github.com/legateproxy/legate/stats"
)

// parentPollInterval is how often a child asks its parent for its open
// connections and drain state (cheap); the parent's statistics are imported
// every stats flush interval, as Envoy merges them on each flush.
const parentPollInterval = 500 * time.Millisecond

// parentFallbackGrace delays a parent's own exit past the child's
// --parent-shutdown-time-s timer, so a live child's terminate, which carries
// the parent's final stats, comes first.
const parentFallbackGrace = 2 * time.Second

// generationStat keeps the parent's share when the parent exits, so it
// counts generations (Envoy's retainParentGaugeValue).
const generationStat = "server.hot_restart_generation"

// managedGauges are server gauges refreshServerStats sets on every flush;
// refreshHotRestartStats adds the parent's share to them instead of the
// importer, whose additions the next Set would erase.
var managedGauges = []string{
	"server.parent_connections", "server.total_connections", "server.uptime",
	"server.memory_allocated", "server.memory_heap_size", "server.memory_physical_size",
}

// hotRestart is the server's side of hot restart: this epoch's socket, which
// serves the next epoch, and the connection to the previous epoch.
//
// The sequence, as Envoy's: the child binds its own socket, connects to the
// parent's and shakes hands, takes the admin socket, imports the parent's
// stats, initializes, takes the listening sockets by configured address,
// starts accepting, then tells the parent to stop accepting and drain. It
// keeps importing the parent's stats every parentPollInterval and tells the
// parent to exit once it is drained and idle, or when --parent-shutdown-time-s
// (the child's) has passed since the drain began, whichever comes first; the
// parent's final stats come with its reply. A parent whose child vanished
// exits on its own --parent-shutdown-time-s (plus parentFallbackGrace) after
// its drain began. Connections still open on the parent then are closed.
type hotRestart struct {
	sock  *hotrestart.Parent // this epoch's socket; nil when disabled or taken
	child *hotrestart.Child  // the parent epoch; nil without one
	imp   *stats.ParentImport
	// adminLn is the admin socket the parent passed, until Run serves it.
	adminLn net.Listener
	// start is when the first epoch started (uptime_all_epochs).
	start       time.Time
	parentConns atomic.Int64 // the parent's open connections, 0 once it is gone
	handedOver  chan struct{}
	draining    atomic.Bool   // this process drains for its child
	baseID      uint32        // the base id sock was bound with
	stop        chan struct{} // closed by stopHotRestart
	wg          sync.WaitGroup
}

// startHotRestart binds this epoch's socket and, from epoch 1 on, connects
// to the parent and takes its admin socket and stats. It runs first in Run.
func (s *Server) startHotRestart(ctx context.Context) error {
	h := &s.hot
	h.start = s.start
	h.handedOver = make(chan struct{})
	h.stop = make(chan struct{})
	s.stats.HotRestartGeneration.Set(1)
	epoch := s.opts.RestartEpoch
	if s.opts.DisableHotRestart {
		if epoch > 0 {
			return fmt.Errorf("--restart-epoch = %d: hot restart is disabled by --disable-hot-restart; only epoch 0 can start", epoch)
		}
		return nil
	}
	if err := s.bindHotRestart(); err != nil {
		return err
	}
	if epoch == 0 {
		return nil
	}
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	c, err := hotrestart.Connect(cctx, hotrestart.ChildConfig{
		SocketPath: s.opts.SocketPath,
		BaseID:     s.baseID(),
		Epoch:      epoch,
		Build:      VersionString(),
	})
	if err != nil {
		if s.opts.SkipHotRestartOnNoParent {
			s.log.Warnf("%v; starting without a parent (--skip-hot-restart-on-no-parent)", err)
			return nil
		}
		var ve *hotrestart.VersionError
		if errors.As(err, &ve) {
			return fmt.Errorf("%w (pass --skip-hot-restart-on-no-parent to start without the parent)", err)
		}
		return err
	}
	h.child = c
	// The requests below wait on the parent too; a signal ends them (Run's signalsDuring).
	stop := context.AfterFunc(ctx, c.Abort)
	defer stop()
	p := c.Parent()
	h.start = time.Unix(0, p.StartUnixNano)
	s.log.Infof("hot restart: connected to parent epoch %d (pid %d, build %s)", p.Epoch, p.PID, p.Build)
	if s.admin != nil {
		ln, err := c.ListenSocket(hotrestart.KindAdmin, s.adminAddress())
		if err != nil {
			s.log.Warnf("hot restart: admin socket: %v", err)
		}
		h.adminLn = ln
	}
	h.imp = s.store.NewParentImport(managedGauges...)
	if err := s.pollParent(); err != nil {
		s.log.Warnf("hot restart: parent stats: %v", err)
	}
	return nil
}

// bindHotRestart binds this epoch's socket (picking a free base id with
// --use-dynamic-base-id) and writes --base-id-path.
func (s *Server) bindHotRestart() error {
	cfg := hotrestart.ParentConfig{
		SocketPath: s.opts.SocketPath,
		SocketMode: os.FileMode(s.opts.SocketMode),
		BaseID:     s.opts.BaseID,
		Epoch:      s.opts.RestartEpoch,
		Build:      VersionString(),
		Start:      s.hot.start,
		Hooks:      s.parentHooks(),
		Logf:       s.log.Infof,
	}
	var err error
	if s.opts.UseDynamicBaseID {
		for cfg.BaseID = 0; cfg.BaseID < 1<<16; cfg.BaseID++ {
			if s.hot.sock, err = hotrestart.Listen(cfg); !errors.Is(err, hotrestart.ErrInUse) {
				break
			}
		}
	} else {
		s.hot.sock, err = hotrestart.Listen(cfg)
	}
	switch {
	case errors.Is(err, hotrestart.ErrInUse) && cfg.Epoch == 0:
		// As Envoy: a first epoch whose socket another process holds exits, rather than
		// serve beside it where its children could reach the wrong parent.
		return fmt.Errorf("--base-id = %d: %w: another Legate (or Envoy) runs with this base id; give this one its own --base-id, or pass --use-dynamic-base-id or --disable-hot-restart", cfg.BaseID, err)
	case err != nil:
		return fmt.Errorf("--base-id = %d, --restart-epoch = %d: %w", cfg.BaseID, cfg.Epoch, err)
	}
	s.hot.baseID = cfg.BaseID
	s.log.Infof("hot restart socket: %s", s.hot.sock.Name())
	if p := s.opts.BaseIDPath; p != "" {
		if err := os.WriteFile(p, []byte(strconv.FormatUint(uint64(cfg.BaseID), 10)), 0o644); err != nil {
			return fmt.Errorf("--base-id-path %s: %w", p, err)
		}
	}
	return nil
}

// baseID is the base id in use (the dynamic one once picked).
func (s *Server) baseID() uint32 {
	if s.hot.sock != nil {
		return s.hot.baseID
	}
	return s.opts.BaseID
}

// adminAddress is the configured admin address, as the parent and the child
// compare it.
func (s *Server) adminAddress() string {
	a := s.boot.Admin
	return net.JoinHostPort(a.Address, strconv.FormatUint(uint64(a.Port), 10))
}

// listenAdmin serves admin on the parent's admin socket when it passed one,
// else binds the admin address.
func (s *Server) listenAdmin() error {
	if ln := s.hot.adminLn; ln != nil {
		s.hot.adminLn = nil
		s.admin.ListenOn(ln)
		return nil
	}
	return s.admin.Listen()
}

// runHotRestart serves the next epoch and watches the previous one until ctx
// ends. Run starts it.
func (s *Server) runHotRestart(ctx context.Context) {
	if sock := s.hot.sock; sock != nil {
		s.hot.wg.Go(func() { sock.Serve(ctx) })
	}
	if s.hot.child != nil {
		s.hot.wg.Go(func() { s.superviseParent(ctx) })
	}
}

// stopHotRestart closes the socket and the parent connection and waits for
// their goroutines. A parent left running exits on its own timer.
func (s *Server) stopHotRestart() {
	if s.hot.stop == nil {
		return // Run ended before startHotRestart
	}
	select {
	case <-s.hot.stop:
	default:
		close(s.hot.stop)
	}
	if s.hot.sock != nil {
		s.hot.sock.Close()
	}
	if s.hot.child != nil {
		s.hot.child.Close()
	}
	if s.hot.adminLn != nil {
		s.hot.adminLn.Close()
	}
	s.hot.wg.Wait()
}

// inheritListenSockets asks the parent for the listening socket of every
// configured address, before the listener manager binds.
func (s *Server) inheritListenSockets() {
	c := s.hot.child
	if c == nil {
		return
	}
	got := map[string]net.Listener{}
	for _, a := range s.data.listeners.ListenAddresses() {
		ln, err := c.ListenSocket(hotrestart.KindListener, a.String())
		if err != nil {
			s.log.Warnf("hot restart: listening socket %s: %v", a, err)
			continue
		}
		if ln != nil {
			got[a.String()] = ln
			s.log.Infof("hot restart: took over listening socket %s (%s)", a, ln.Addr())
		}
	}
	s.data.listeners.InheritSockets(got)
}

// handOver tells the parent to stop accepting and drain, once this process
// accepts on the shared sockets.
func (s *Server) handOver() {
	s.data.listeners.ReleaseInherited()
	c := s.hot.child
	if c == nil {
		return
	}
	if err := c.Drain(); err != nil {
		s.log.Warnf("hot restart: telling the parent to drain: %v", err)
	} else {
		s.log.Infof("hot restart: parent told to stop accepting and drain; it exits when idle or after %v", s.opts.ParentShutdownTime)
	}
	close(s.hot.handedOver)
}

// superviseParent imports the parent's stats until it exits, and ends it
// when it is drained and idle or --parent-shutdown-time-s after handOver.
func (s *Server) superviseParent(ctx context.Context) {
	tick := s.clock.NewTicker(parentPollInterval)
	defer tick.Stop()
	statsTick := s.clock.NewTicker(s.store.FlushInterval())
	defer statsTick.Stop()
	handed := s.hot.handedOver
	var deadline <-chan struct{}
	for {
		select {
		case <-ctx.Done():
			return
		case <-handed:
			handed = nil
			var t clock.Timer
			deadline, t = clock.After(s.clock, s.opts.ParentShutdownTime)
			defer t.Stop()
		case <-deadline:
			s.terminateParent("--parent-shutdown-time-s elapsed")
			return
		case <-statsTick.C():
			if err := s.pollParent(); err != nil {
				s.log.Warnf("hot restart: parent gone: %v", err)
				s.parentGone()
				return
			}
		case <-tick.C():
			st, err := s.hot.child.Status()
			if err != nil {
				s.log.Warnf("hot restart: parent gone: %v", err)
				s.parentGone()
				return
			}
			s.hot.parentConns.Store(st.ActiveConnections)
			if deadline != nil && st.Draining && st.ActiveConnections == 0 {
				s.terminateParent("parent drained, no connection left")
				return
			}
		}
	}
}

// pollParent fetches and imports the parent's stats once.
func (s *Server) pollParent() error {
	st, err := s.hot.child.Stats()
	if err != nil {
		return err
	}
	s.importParent(st)
	return nil
}

func (s *Server) importParent(st hotrestart.Stats) {
	s.hot.parentConns.Store(st.ActiveConnections)
	if s.opts.SkipHotRestartParentStats {
		return
	}
	s.hot.imp.Apply(stats.ParentValues{Counters: st.Counters, Gauges: st.Gauges, HiddenGauges: st.HiddenGauges})
}

// terminateParent tells the parent to exit and imports its final stats.
func (s *Server) terminateParent(why string) {
	st, err := s.hot.child.Terminate()
	if err != nil {
		s.log.Warnf("hot restart: terminating the parent: %v", err)
	} else {
		s.importParent(st)
		s.log.Infof("hot restart: parent terminated (%s)", why)
	}
	s.parentGone()
}

// parentGone drops the parent's share of the gauges.
func (s *Server) parentGone() {
	s.hot.parentConns.Store(0)
	s.hot.imp.Release(generationStat)
	s.hot.child.Close()
}

// refreshHotRestartStats runs before each flush, after refreshServerStats:
// it adds the parent's share to the gauges that sets.
func (s *Server) refreshHotRestartStats() {
	s.stats.Uptime.Set(uint64(s.clock.Now().Sub(s.hot.start).Seconds()))
	pc := uint64(max(s.hot.parentConns.Load(), 0))
	s.stats.ParentConnections.Set(pc)
	s.stats.TotalConnections.Add(pc)
	if imp := s.hot.imp; imp != nil {
		s.stats.MemoryAllocated.Add(imp.ParentGauge("server.memory_allocated"))
		s.stats.MemoryHeapSize.Add(imp.ParentGauge("server.memory_heap_size"))
		s.stats.MemoryPhysicalSize.Add(imp.ParentGauge("server.memory_physical_size"))
	}
}

// parentHooks serve this process's child.
func (s *Server) parentHooks() hotrestart.Hooks {
	return hotrestart.Hooks{
		ListenSocket: s.data.listeners.ListenSocket,
		AdminSocket: func(address string) net.Listener {
			if s.admin == nil || s.adminAddress() != address {
				return nil
			}
			return s.admin.Listener()
		},
		AdminPassed: func() {
			// Stop serving admin here; requests in flight finish.
			s.hot.wg.Go(func() {
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				s.admin.Shutdown(ctx)
			})
		},
		Stats: s.childStats,
		Status: func() hotrestart.Stats {
			return hotrestart.Stats{ActiveConnections: s.data.listeners.ActiveConnections(), Draining: s.hot.draining.Load()}
		},
		Drain:     s.drainForChild,
		Terminate: s.terminateForChild,
		Exit:      s.Quit,
	}
}

// childStats is this process's snapshot for its child.
func (s *Server) childStats() hotrestart.Stats {
	v := s.store.ParentValues()
	return hotrestart.Stats{
		Counters:          v.Counters,
		Gauges:            v.Gauges,
		HiddenGauges:      v.HiddenGauges,
		ActiveConnections: s.data.listeners.ActiveConnections(),
		Draining:          s.hot.draining.Load(),
	}
}

// terminateForChild closes the data plane and returns the final stats. Closing
// unregisters the listeners' and connection managers' stats, so counters are
// taken before and after and the larger value kept (counters only grow);
// gauges are the after values, so what closed counts 0.
func (s *Server) terminateForChild() hotrestart.Stats {
	before := s.childStats()
	s.data.listeners.Close()
	after := s.childStats()
	for name, v := range before.Counters {
		if v > after.Counters[name] {
			after.Counters[name] = v
		}
	}
	return after
}

// drainForChild stops accepting (the child accepts on the same sockets) and
// drains connections for --drain-time-s with --drain-strategy. The child
// ends this process; should it vanish, this process exits on its own
// --parent-shutdown-time-s plus parentFallbackGrace after the drain began.
func (s *Server) drainForChild() {
	if !s.hot.draining.CompareAndSwap(false, true) {
		return
	}
	s.data.listeners.StopListeners(false)
	s.data.listeners.DrainManager().StartDrainSequence(listener.DrainAll, nil)
	t := s.clock.AfterFunc(s.opts.ParentShutdownTime+parentFallbackGrace, func() {
		s.log.Warnf("hot restart: the child did not end this process within --parent-shutdown-time-s (%v): exiting", s.opts.ParentShutdownTime)
		s.Quit()
	})
	s.hot.wg.Go(func() {
		select {
		case <-s.quit:
		case <-s.hot.stop:
		}
		t.Stop()
	})
}

// firstStart is when the first epoch of this line of hot restarts started.
func (s *Server) firstStart() time.Time {
	if s.hot.start.IsZero() {
		return s.start
	}
	return s.hot.start
}
