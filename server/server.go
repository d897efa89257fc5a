package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	adminv3 "github.com/envoyproxy/go-control-plane/envoy/admin/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/legateproxy/legate/admin"
	"github.com/legateproxy/legate/admin/configdump"
	"github.com/legateproxy/legate/cluster"
	"github.com/legateproxy/legate/cluster/cds"
	"github.com/legateproxy/legate/config"
	"github.com/legateproxy/legate/extensions"
	"github.com/legateproxy/legate/httpproxy"
	"github.com/legateproxy/legate/httpproxy/rds"
	"github.com/legateproxy/legate/internal/clock"
	"github.com/legateproxy/legate/internal/exepages"
	"github.com/legateproxy/legate/internal/registry"
	"github.com/legateproxy/legate/listener"
	"github.com/legateproxy/legate/listener/lds"
	"github.com/legateproxy/legate/logging"
	"github.com/legateproxy/legate/options"
	"github.com/legateproxy/legate/overload"
	"github.com/legateproxy/legate/runtime"
	"github.com/legateproxy/legate/stats"
	"github.com/legateproxy/legate/stats/sinks/hystrix"
	"github.com/legateproxy/legate/stats/tags"
	"github.com/legateproxy/legate/tlsutil"
	"github.com/legateproxy/legate/xds"
	"github.com/legateproxy/legate/xds/resource"
)

// State is the server state as /ready, /server_info and server.state report
// it. The numbers are Envoy's (ServerInfo.State).
type State int32

const (
	Live            State = 0
	Draining        State = 1
	PreInitializing State = 2
	Initializing    State = 3
)

func (s State) String() string { return adminv3.ServerInfo_State(s).String() }

// Server is one running Legate. Build it with New, then Run it.
type Server struct {
	opts  *options.Options
	boot  *config.Bootstrap
	start time.Time
	// ext are the extensions Legate is built with (boot.Extensions, else extensions.New's).
	ext *registry.Registry
	// staticDeps are the static listeners with the xDS resources they
	// subscribe to (those that decode; the data plane reports the others).
	staticDeps []*lds.Listener

	logs         *logging.Registry
	log          *logging.Logger
	store        *stats.Store
	runtime      *runtime.Runtime
	runtimeStats runtime.Stats
	clusters     *cluster.Manager
	hystrix      *hystrix.Sink  // nil without an envoy.stat_sinks.hystrix sink
	sinkClosers  []func() error // close the statsd, dog_statsd and metrics_service sinks
	certs        *tlsutil.Registry
	data         dataPlane
	xds          *xds.Client    // nil without dynamic resources or EDS clusters
	cds          *cds.Discovery // with xds: CDS and EDS, the cluster manager's xDS side
	lds          *lds.LDS       // with xds and lds_config: the listener manager's xDS side
	// cdsInitialized is closed when CDS's init target is ready (nil without cds_config): LDS
	// starts then.
	cdsInitialized chan struct{}
	sds            *tlsutil.SDS    // with xds: the static secrets, then SDS
	ecds           *httpproxy.ECDS // with xds: the HTTP filters' configurations over ECDS
	routes         *rds.Discovery  // with xds: RDS, VHDS and SRDS, the route table's xDS side
	adminStats     adminStats
	stats          stats.ServerStats
	admin          *admin.Server // nil when the bootstrap has no admin block
	reg            *admin.Registry
	dumps          *configdump.Registry
	init           *Init
	adminLF        *reopenableFile // admin access log, nil when none
	hot            hotRestart      // hot-restart socket and parent connection

	initialized  atomic.Bool // the init manager finished and the listeners accept
	healthFailed atomic.Bool // /healthcheck/fail in effect
	quitOnce     sync.Once
	quit         chan struct{}
	bootLoadedAt time.Time
	clock        clock.Clock // the one clock, passed to every component
	onLive       []func()    // run once, when the listeners first accept (OnLive)
}

// New builds every component from the options and the validated bootstrap
// without binding anything, so --mode validate can stop right after it.
// warnings are the loader's notes (unknown fields ignored), logged and
// counted in server.static_unknown_fields.
func New(opts *options.Options, boot *config.Bootstrap, warnings []string) (*Server, error) {
	// The one clock every component takes (internal/clock's rule).
	clk := clock.Real()
	s := &Server{
		opts:         opts,
		boot:         boot,
		clock:        clk,
		start:        clk.Now(),
		reg:          admin.NewRegistry(),
		certs:        tlsutil.NewRegistry(clk.Now),
		dumps:        configdump.NewRegistry(),
		init:         NewInit("Server"),
		quit:         make(chan struct{}),
		bootLoadedAt: clk.Now(),
	}
	if s.ext = boot.Extensions; s.ext == nil {
		ext, err := extensions.New()
		if err != nil {
			return nil, err
		}
		s.ext = ext
	}
	logCfg := logging.Config{
		Level:           opts.LogLevel,
		ComponentLevels: opts.ComponentLogLevel,
		Format:          opts.LogFormat,
		Escaped:         opts.LogFormatEscaped,
		Path:            opts.LogPath,
		FineGrain:       opts.EnableFineGrainLogging,
		Now:             clk.Now,
	}
	if lf := boot.Proto.GetApplicationLogConfig().GetLogFormat(); lf != nil {
		// Envoy refuses both sources of the format rather than pick one.
		if opts.LogFormatSet {
			return nil, errors.New("application_log_config.log_format: only one of application_log_config.log_format and --log-format can be specified")
		}
		if j := lf.GetJsonFormat(); j != nil {
			logCfg.JSONFormat = j.AsMap()
		} else if t := lf.GetTextFormat(); t != "" {
			logCfg.Format = t
		}
	}
	logs, err := logging.New(logCfg)
	if err != nil {
		return nil, err
	}
	s.logs = logs
	s.log = logs.Logger("main")

	storeCfg, err := stats.FromProto(boot.Proto.GetStatsConfig())
	if err != nil {
		return nil, err
	}
	storeCfg.FlushInterval = boot.StatsFlushInterval
	storeCfg.FlushOnAdmin = boot.StatsFlushOnAdmin
	storeCfg.FakeSymbolTable = opts.UseFakeSymbolTable
	storeCfg.Clock = clk
	for _, t := range opts.StatsTags {
		storeCfg.Tags.Fixed = append(storeCfg.Tags.Fixed, tags.Tag{Name: t.Name, Value: t.Value})
	}
	if s.store, err = stats.New(storeCfg); err != nil {
		return nil, err
	}
	s.store.Register("server.", &s.stats)
	// The overload manager exists before the admin, whose connections count against its
	// global connection limit.
	s.data.overload = overload.New(boot.Overload, s.store, clk)
	s.stats.Concurrency.Set(uint64(opts.Concurrency))
	s.stats.Version.Set(versionNumber())
	s.stats.HotRestartEpoch.Set(uint64(opts.RestartEpoch))
	s.stats.State.Set(uint64(PreInitializing))
	for _, w := range warnings {
		s.log.Warnf("%s", w)
		s.stats.StaticUnknownFields.Inc()
	}

	rtCfg, err := runtime.ConfigFromProto(boot.Proto.GetLayeredRuntime())
	if err != nil {
		return nil, err
	}
	rtCfg.ServiceCluster = s.Node().GetCluster()
	rtCfg.Stats = &s.runtimeStats
	rtCfg.Log = logs.Logger("runtime")
	rtCfg.Clock = clk
	s.store.Register("runtime.", &s.runtimeStats)
	if s.runtime, err = runtime.New(rtCfg); err != nil {
		return nil, err
	}

	// Each build step runs its own packages' code: a checkpoint between them keeps their pages
	// of the binary from adding up (internal/exepages).
	exepages.Checkpoint()
	if err := s.buildSinks(); err != nil {
		return nil, err
	}
	exepages.Checkpoint()
	if err := s.buildClusterManager(); err != nil {
		return nil, err
	}
	exepages.Checkpoint()
	if err := s.buildHTTPFilters(); err != nil {
		return nil, err
	}
	if err := s.buildXDS(); err != nil {
		return nil, err
	}
	exepages.Checkpoint()
	if err := s.buildDataPlane(); err != nil {
		return nil, err
	}
	exepages.Checkpoint()
	if err := s.addStaticDumps(); err != nil {
		return nil, err
	}

	exepages.Checkpoint()
	if a := boot.Admin; a != nil {
		var accessLog io.Writer
		if a.AccessLogPath != "" {
			f, err := openReopenable(a.AccessLogPath)
			if err != nil {
				return nil, fmt.Errorf("admin.access_log_path: %w", err)
			}
			s.adminLF = f
			accessLog = f
		}
		adminLog := logs.Logger("admin")
		s.admin = admin.New(admin.Config{
			Address:   net.JoinHostPort(a.Address, strconv.FormatUint(uint64(a.Port), 10)),
			AccessLog: accessLog,
			Warnf:     adminLog.Warnf,
			Now:       s.clock.Now,
			OnCrossOrigin: func(r *http.Request) {
				s.adminStats.CrossOriginRefused.Inc()
				adminLog.Warnf("refused cross-origin %s %s (Origin %q, Sec-Fetch-Site %q)", r.Method, r.URL.Path, r.Header.Get("Origin"), r.Header.Get("Sec-Fetch-Site"))
			},
			AllowedHosts: s.opts.AdminAllowedHosts,
			OnForeignHost: func(r *http.Request) {
				s.adminStats.ForeignHostRefused.Inc()
				adminLog.Warnf("refused %s %s for Host %q (set %s to allow it)", r.Method, r.URL.Path, r.Host, admin.AllowedHostsEnv)
			},
			Limit: s.adminLimit(a),
		}, s.reg)
		s.store.Register("admin.", &s.adminStats)
	}
	if s.hystrix != nil {
		s.hystrix.SetMaxPendingRequests(s.clusterMaxPending)
	}
	if err := s.registerEndpoints(); err != nil {
		return nil, err
	}
	return s, nil
}

func (s *Server) registerEndpoints() error {
	var eps []admin.Endpoint
	eps = append(eps, admin.HomeEndpoints(s.reg)...)
	eps = append(eps, admin.ServerEndpoints(s)...)
	eps = append(eps, admin.ConfigDumpEndpoint(s.dumps))
	eps = append(eps, admin.StatsEndpoints(s.store)...)
	eps = append(eps, admin.LoggingEndpoint(s.logs))
	eps = append(eps, admin.ClustersEndpoint(s.clusters))
	eps = append(eps, admin.CertsEndpoint(s.certs))
	eps = append(eps, admin.ListenersEndpoint(s.data.listeners))
	eps = append(eps, admin.DrainListenersEndpoint(s.data.listeners, s.quitAfterInFlight))
	eps = append(eps, admin.HystrixEndpoints(s.hystrix)...)
	eps = append(eps, admin.RuntimeEndpoints(s.runtime)...)
	eps = append(eps, admin.HealthCheckEndpoints(&s.healthFailed, s.updateState)...)
	profilePath := config.DefaultProfilePath
	if s.boot.Admin != nil {
		profilePath = s.boot.Admin.ProfilePath
	}
	eps = append(eps, admin.NewProfiler(profilePath, s.opts.EnableMutexTracing).Endpoints()...)
	for _, e := range eps {
		if err := s.reg.Register(e); err != nil {
			return err
		}
	}
	return nil
}

// Run serves until ctx is done, a SIGTERM/SIGINT arrives or /quitquitquit is
// posted, then shuts down cleanly. It returns nil on a clean shutdown.
func (s *Server) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGUSR1)
	defer signal.Stop(sigs)

	// Goroutines end when ctx is cancelled; cancel before waiting, so an
	// early return cannot hang.
	var wg sync.WaitGroup
	defer func() {
		cancel()
		wg.Wait()
	}()

	hctx, endWatch := s.signalsDuring(ctx, sigs)
	err := s.startHotRestart(hctx)
	if sig := endWatch(); sig != nil {
		s.log.Warnf("caught %v while starting hot restart: exiting", sig)
		s.stopHotRestart()
		return nil
	}
	if err != nil {
		s.stopHotRestart()
		return err
	}
	if s.admin != nil {
		if err := s.listenAdmin(); err != nil {
			s.stopHotRestart()
			return err
		}
		if p := s.opts.AdminAddressPath; p != "" {
			if err := os.WriteFile(p, []byte(s.admin.Addr().String()), 0o644); err != nil {
				s.admin.Shutdown(context.Background())
				return fmt.Errorf("--admin-address-path %s: %w", p, err)
			}
		}
		wg.Go(func() {
			if err := s.admin.Serve(); err != nil {
				s.log.Errorf("admin server: %v", err)
			}
		})
		s.log.Infof("admin address: %s", s.admin.Addr())
	}
	wg.Go(func() { s.store.Run(ctx) })
	wg.Go(func() { s.runtime.Run(ctx) })
	wg.Go(func() { s.clusters.Run(ctx) })
	wg.Go(func() { s.data.pools.Run(ctx) })
	wg.Go(func() { s.data.als.Run(ctx) })
	wg.Go(func() { s.data.overload.Run(ctx) })
	if s.xds != nil {
		// The cluster side subscribes (the bootstrap's EDS clusters, CDS) before the client
		// runs, and stops after it returned.
		s.cds.Start()
		s.routes.Start()
		if s.lds != nil {
			if initialized := s.cdsInitialized; initialized != nil {
				wg.Go(func() {
					select {
					case <-initialized:
						s.lds.Start()
					case <-ctx.Done():
					}
				})
			} else {
				s.lds.Start()
			}
		}
		wg.Go(func() {
			s.xds.Run(ctx)
			s.cds.Stop()
			s.routes.Stop()
			if s.lds != nil {
				s.lds.Stop()
			}
		})
	}
	s.store.BeforeFlush(s.refreshServerStats)
	s.store.BeforeFlush(s.refreshHotRestartStats)
	s.runHotRestart(ctx)

	exepages.Checkpoint()
	s.stats.State.Set(uint64(Initializing))
	s.init.Start()
	initStart := s.clock.Now()
	// A signal must end the process in every state: while initialization
	// waits (a first xDS fetch, a warming cluster) SIGTERM and SIGINT quit
	// at once, as nothing serves yet that a drain would protect.
	for waiting := true; waiting; {
		select {
		case <-s.init.Done():
			s.stats.InitializationTimeMs.Record(uint64(s.clock.Now().Sub(initStart).Milliseconds()))
			if err := s.startWorkers(ctx, &wg); err != nil {
				return err
			}
			waiting = false
		case <-ctx.Done():
			waiting = false
		case <-s.quit:
			waiting = false
		case sig := <-sigs:
			if sig == syscall.SIGUSR1 {
				if err := s.ReopenLogs(); err != nil {
					s.log.Errorf("reopening logs: %v", err)
				}
				continue
			}
			s.log.Warnf("caught %v while initializing: exiting", sig)
			s.Quit()
			waiting = false
		}
	}

	draining := false
	for running := true; running; {
		select {
		case <-ctx.Done():
			running = false
		case <-s.quit:
			running = false
		case sig := <-sigs:
			switch sig {
			case syscall.SIGUSR1:
				if err := s.ReopenLogs(); err != nil {
					s.log.Errorf("reopening logs: %v", err)
				}
			case syscall.SIGTERM:
				if draining {
					running = false // a second SIGTERM does not wait
					break
				}
				// Drain for --drain-time-s (connections are told to close),
				// then exit, so a load balancer in front sees no reset.
				s.log.Warnf("caught SIGTERM: draining listeners for %v, then exiting", s.opts.DrainTime)
				draining = true
				s.data.listeners.DrainListeners(listener.DrainRequest{Graceful: true}, s.quitAfterInFlight)
				wg.Go(func() { s.quitWhenIdle(ctx) })
			default:
				s.log.Warnf("caught %v", sig)
				running = false
			}
		}
	}
	s.log.Infof("shutting down server")
	cancel()
	s.shutdown()
	return nil
}

// signalsDuring watches sigs while a start-up step that waits on another process runs (the
// hot restart handshake with a parent that may never answer): SIGTERM or SIGINT cancels the
// returned context, so that the step ends at once, as a signal must end the process in every
// state; SIGUSR1 reopens the logs. end stops the watch and returns the signal that cancelled
// the step, or nil.
func (s *Server) signalsDuring(ctx context.Context, sigs <-chan os.Signal) (_ context.Context, end func() os.Signal) {
	ctx, cancel := context.WithCancel(ctx)
	var caught os.Signal
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case sig := <-sigs:
				if sig == syscall.SIGUSR1 {
					if err := s.ReopenLogs(); err != nil {
						s.log.Errorf("reopening logs: %v", err)
					}
					continue
				}
				caught = sig
				cancel()
				return
			case <-ctx.Done():
				return
			}
		}
	}()
	return ctx, func() os.Signal {
		cancel()
		<-done
		return caught
	}
}

// startWorkers starts the listeners once initialization is done and makes
// the server LIVE. On failure the server is shut down.
func (s *Server) startWorkers(ctx context.Context, wg *sync.WaitGroup) error {
	exepages.Checkpoint()
	s.log.Infof("all dependencies initialized. starting workers")
	s.inheritListenSockets()
	if err := s.data.listeners.Start(); err != nil {
		s.log.Criticalf("%v", err)
		s.shutdown()
		return err
	}
	// LIVE once the listeners accept, as Envoy's workers have their listeners when it
	// goes LIVE: a /ready probe must not send traffic to ports not yet bound.
	s.initialized.Store(true)
	s.updateState()
	wg.Go(func() { s.data.listeners.Run(ctx) })
	s.handOver()
	for _, f := range s.onLive {
		f()
	}
	return nil
}

// OnLive adds f to what runs once start-up is over: the listeners accept and the server is
// LIVE. Call it before Run.
func (s *Server) OnLive(f func()) { s.onLive = append(s.onLive, f) }

// shutdown closes listeners, pools, streams, the admin server and log files,
// in that order. Run's goroutines end with its context.
func (s *Server) shutdown() {
	s.stopHotRestart()
	s.data.listeners.Close()
	s.data.pools.Close()
	if s.hystrix != nil {
		s.hystrix.Close() // ends the never-idle dashboard streams
	}
	for _, closeSink := range s.sinkClosers {
		closeSink()
	}
	shutdownCtx, done := context.WithTimeout(context.Background(), 5*time.Second)
	defer done()
	if s.admin != nil {
		s.admin.Shutdown(shutdownCtx)
	}
	s.data.accessLogs.Close()
	if s.adminLF != nil {
		s.adminLF.Close()
	}
}

// quitWhenIdle ends a SIGTERM drain early once no downstream connection is
// left: waiting out the whole drain time would only delay a restart.
func (s *Server) quitWhenIdle(ctx context.Context) {
	tick := s.clock.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C():
			if s.data.listeners.ActiveConnections() == 0 {
				s.log.Infof("drain complete: no downstream connections left")
				s.quitAfterInFlight() // one may have been accepted since
				return
			}
		}
	}
}

// InitOnly runs initialization to completion and returns, for --mode init_only.
func (s *Server) InitOnly(ctx context.Context) error {
	s.init.Start()
	select {
	case <-s.init.Done():
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Init is the server's init manager, for components to register targets.
func (s *Server) Init() *Init { return s.init }

// Stats is the server's stats store.
func (s *Server) Stats() *stats.Store { return s.store }

// AdminAddr is the bound admin address, or nil.
func (s *Server) AdminAddr() string {
	if s.admin == nil || s.admin.Addr() == nil {
		return ""
	}
	return s.admin.Addr().String()
}

// State is the current server state.
func (s *Server) State() State {
	switch {
	case !s.init.Started():
		return PreInitializing
	case !s.initialized.Load():
		return Initializing
	case s.healthFailed.Load():
		return Draining
	}
	return Live
}

// updateState publishes the state to server.state and server.live.
func (s *Server) updateState() {
	st := s.State()
	s.stats.State.Set(uint64(st))
	if st == Live {
		s.stats.Live.Set(1)
	} else {
		s.stats.Live.Set(0)
	}
}

// refreshServerStats runs before every stats flush, as Envoy updates its
// server gauges when it flushes.
func (s *Server) refreshServerStats() {
	s.updateState()
	s.stats.Uptime.Set(uint64(s.clock.Now().Sub(s.start).Seconds()))
	m := admin.Memory()
	s.stats.MemoryAllocated.Set(m.Allocated)
	s.stats.MemoryHeapSize.Set(m.HeapSize)
	s.stats.MemoryPhysicalSize.Set(m.TotalPhysicalBytes)
	s.stats.DaysUntilFirstCertExpiring.Set(s.certs.DaysUntilFirstCertExpiring())
	s.stats.TotalConnections.Set(uint64(s.data.listeners.ActiveConnections()))
	s.stats.StatsRecentLookups.Set(s.store.RecentLookupsTotal())
}

// drainGrace bounds how long the end of a drain waits for the connections the listeners
// accepted to finish their requests (HTTP/1 responses carry connection: close, HTTP/2
// connections had their GOAWAY), as the connection manager's drain_timeout bounds HTTP/2's.
const drainGrace = 5 * time.Second

// quitAfterInFlight ends a drain: the listeners stop accepting (what the kernel queued is
// still accepted and served), the connections already accepted finish their requests, within
// drainGrace, and the server quits. Quitting at once would cut the requests admitted in the
// drain's last moments.
func (s *Server) quitAfterInFlight() {
	s.data.listeners.StopListeners(false)
	tick := s.clock.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	grace, graceTimer := clock.After(s.clock, drainGrace)
	defer graceTimer.Stop()
	for s.data.listeners.ActiveConnections() > 0 {
		select {
		case <-tick.C():
		case <-grace:
			s.log.Warnf("drain: %d downstream connections still open %v after the listeners stopped; closing them", s.data.listeners.ActiveConnections(), drainGrace)
			s.Quit()
			return
		}
	}
	s.Quit()
}

// Quit starts a clean shutdown (POST /quitquitquit).
func (s *Server) Quit() { s.quitOnce.Do(func() { close(s.quit) }) }

// ReopenLogs reopens the application log and the admin access log.
func (s *Server) ReopenLogs() error {
	var errs []error
	if err := s.logs.Reopen(); err != nil {
		errs = append(errs, err)
	}
	if err := s.data.accessLogs.Reopen(); err != nil {
		errs = append(errs, err)
	}
	if err := s.clusters.Reopen(); err != nil {
		errs = append(errs, err)
	}
	if s.adminLF != nil {
		if err := s.adminLF.Reopen(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// HotRestartVersion is the /hot_restart_version body.
func (s *Server) HotRestartVersion() string {
	if s.opts.DisableHotRestart {
		return "disabled"
	}
	return HotRestartVersion
}

// UnreadyTargets implements /init_dump: the listeners' init managers as
// Envoy dumps them (mask "listener"): every listener, static or from LDS,
// until the server is LIVE, then those warming on LDS. Legate also lists
// the server's own manager while it is pending (mask "server"), so a stuck
// start-up (a cluster warming, a first xDS fetch) is visible.
func (s *Server) UnreadyTargets(mask string) *adminv3.UnreadyTargetsDumps {
	out := &adminv3.UnreadyTargetsDumps{}
	if mask != "" && mask != "listener" && mask != "server" {
		return out
	}
	if mask != "listener" {
		if pending := s.init.Unready(); len(pending) > 0 {
			d := &adminv3.UnreadyTargetsDumps_UnreadyTargetsDump{Name: "init manager " + s.init.Name()}
			for _, p := range pending {
				d.TargetNames = append(d.TargetNames, "target "+p)
			}
			out.UnreadyTargetsDumps = append(out.UnreadyTargetsDumps, d)
		}
	}
	if mask != "server" {
		out.UnreadyTargetsDumps = append(out.UnreadyTargetsDumps, s.staticListenerInitDumps()...)
	}
	if mask != "server" && s.lds != nil {
		out.UnreadyTargetsDumps = append(out.UnreadyTargetsDumps, s.lds.InitDumps(s.initialized.Load())...)
	}
	return out
}

// staticListenerInitDumps are the static listeners' init managers, which
// Envoy dumps until the workers start: one entry per listener, with the
// subscriptions it still waits for (none: no target_names).
func (s *Server) staticListenerInitDumps() []*adminv3.UnreadyTargetsDumps_UnreadyTargetsDump {
	if s.initialized.Load() {
		return nil
	}
	pending := map[string]bool{}
	for _, p := range s.init.Unready() {
		pending[p] = true
	}
	ready := func(target string) bool { return !pending[target] }
	out := make([]*adminv3.UnreadyTargetsDumps_UnreadyTargetsDump, 0, len(s.staticDeps))
	for _, l := range s.staticDeps {
		out = append(out, &adminv3.UnreadyTargetsDumps_UnreadyTargetsDump{
			Name: lds.InitManagerName(l.Name, l.Config.Proto),
			TargetNames: slices.Concat(ownerInitTargets(l.Routes, rds.InitTarget, ready),
				ownerInitTargets(l.ScopedRoutes, rds.ScopedInitTarget, ready),
				ownerInitTargets(l.Extensions, httpproxy.ECDSInitTarget, ready),
				ownerInitTargets(l.Secrets, tlsutil.SDSInitTarget, ready)),
		})
	}
	return out
}

// ownerInitTargets names the init targets of deps that are not ready yet, target naming each
// as its owner does (the route table's RDS and SRDS, the connection manager's ECDS, TLS's
// SDS).
func ownerInitTargets(deps []resource.Dependency, target func(name string) string, ready func(target string) bool) []string {
	var out []string
	for _, d := range deps {
		if t := target(d.Name); !ready(t) {
			out = append(out, "target "+t)
		}
	}
	return out
}

// ServerInfo implements /server_info.
func (s *Server) ServerInfo() *adminv3.ServerInfo {
	now := s.clock.Now()
	up := durationpb.New(time.Duration(now.Sub(s.start).Seconds()) * time.Second)
	return &adminv3.ServerInfo{
		Version:            VersionString(),
		State:              adminv3.ServerInfo_State(s.State()),
		UptimeCurrentEpoch: up,
		UptimeAllEpochs:    durationpb.New(time.Duration(now.Sub(s.firstStart()).Seconds()) * time.Second),
		HotRestartVersion:  s.HotRestartVersion(),
		CommandLineOptions: s.opts.CommandLineOptions(),
		Node:               s.Node(),
	}
}

// Node is the effective local node: the bootstrap's, with the command line's
// service cluster, node and zone winning, and Legate's user agent.
func (s *Server) Node() *corev3.Node {
	n := &corev3.Node{}
	if s.boot.Proto.GetNode() != nil {
		n = proto.Clone(s.boot.Proto.GetNode()).(*corev3.Node)
	}
	if s.opts.ServiceCluster != "" {
		n.Cluster = s.opts.ServiceCluster
	}
	if s.opts.ServiceNode != "" {
		n.Id = s.opts.ServiceNode
	}
	if s.opts.ServiceZone != "" {
		if n.Locality == nil {
			n.Locality = &corev3.Locality{}
		}
		n.Locality.Zone = s.opts.ServiceZone
	}
	n.UserAgentName = "envoy"
	n.UserAgentVersionType = &corev3.Node_UserAgentBuildVersion{UserAgentBuildVersion: BuildVersion()}
	n.Extensions = nodeExtensions(s.ext)
	return n
}

// versionNumber is server.version: the first six hex digits of the revision,
// as Envoy computes it.
func versionNumber() uint64 {
	v, err := strconv.ParseUint(revision[:6], 16, 64)
	if err != nil {
		return 0
	}
	return v
}
