package xds

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"sync"
	"time"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"

	"github.com/legateproxy/legate/cluster"
	"github.com/legateproxy/legate/config"
	"github.com/legateproxy/legate/httpproxy/route"
	"github.com/legateproxy/legate/internal/clock"
	"github.com/legateproxy/legate/lb"
	"github.com/legateproxy/legate/logging"
	"github.com/legateproxy/legate/stats"
	"github.com/legateproxy/legate/xds/resource"
	xdswatch "github.com/legateproxy/legate/xds/watch"
)

// CDSInitTarget is the name of the init target the client registers for CDS: ready once the
// first CDS response (or its initial_fetch_timeout) has been handled and every cluster it added
// has received its first EDS assignment or timed out.
const CDSInitTarget = "cds"

// Config holds a Client's configuration and dependencies. Clusters and Stats are required;
// every other field has the default stated in its comment.
type Config struct {
	// DynamicResources is the bootstrap's dynamic_resources (cds_config and ads_config are
	// used; lds_config belongs to the listener side). Nil means no CDS; the client then only
	// serves the EDS clusters of the bootstrap.
	DynamicResources *bootstrapv3.Bootstrap_DynamicResources
	// Node is sent to management servers: the bootstrap node with the --service-* overrides,
	// user_agent_name and user_agent_build_version already applied by the caller.
	Node *corev3.Node
	// Clusters is the cluster manager CDS and EDS update.
	Clusters *cluster.Manager
	// Stats is the store for cluster_manager.cds.*, cluster.<name>.* EDS and control_plane.*.
	Stats *stats.Store
	// Logger logs stream failures and rejected updates; nil discards.
	Logger *logging.Logger
	// Init registers the CDS init target (see CDSInitTarget); nil means none.
	Init func(name string) (ready func(), err error)
	// Dial connects to a host of the named bootstrap cluster for gRPC and REST sources; the
	// server sets it to add TLS for clusters with a transport socket. Nil dials plain TCP to a
	// host picked from Clusters.Get(name), and refuses clusters with a transport socket.
	Dial func(ctx context.Context, cluster string) (net.Conn, error)
	// Clock schedules backoff, polling and initial fetch timeouts; nil means the system clock.
	Clock clock.Clock
	// Limits are the command-line limits applied to CDS clusters (--max-obj-name-len).
	Limits config.Limits
	// BackoffBase and BackoffMax bound the reconnect backoff; zero means DefaultBackoffBase and
	// DefaultBackoffMax.
	BackoffBase, BackoffMax time.Duration
	// Rand is the backoff jitter source; nil means math/rand/v2.
	Rand func() uint64
	// FilePollInterval is how often path sources are checked; zero means
	// DefaultFilePollInterval.
	FilePollInterval time.Duration

	// RouteOptions trial-compile RDS route configurations before they are accepted: the
	// server sets the HTTP filters' per-route configuration check (typed_per_filter_config)
	// and the cluster lookup, so that what the connection managers would refuse is NACKed.
	// The zero value checks the routes alone.
	RouteOptions route.Options
	// ExtensionCheck checks an HTTP filter configuration discovered over ECDS as the filter
	// factories would (the server builds it from its HTTP filter registry: the type must have
	// a factory, which must accept the configuration). It runs, after the filter's type_urls,
	// on the configurations a warming listener waits for, so that a first configuration its
	// filter would refuse is NACKed with the reason and ends the wait (the filter then serves
	// its default_config, or 500); while filters discovering the configuration are built,
	// their own checks replace it. It runs on an xDS goroutine without locks and must not
	// block. Nil checks type_urls alone.
	ExtensionCheck func(tc *corev3.TypedExtensionConfig) error

	// Secrets watches the SDS secrets of CDS clusters and LDS listeners (tlsutil.SDS, built
	// on this client); nil refuses them.
	Secrets SecretWatcher
}

// SecretWatcher watches SDS secrets (tlsutil.SDS.Watch): onChange runs after each change.
type SecretWatcher interface {
	Watch(cs *corev3.ConfigSource, name string, onChange func()) (xdswatch.Subscription, error)
}

// Client is Legate's xDS client for CDS and EDS: it opens the transports the bootstrap's
// config sources name (ADS, gRPC state-of-the-world and delta, REST, files), applies clusters to
// the cluster manager and assignments to EDS clusters, and ACKs or NACKs each response.
//
// Concurrency: New and Run are called once by the server. Every transport runs on its own
// goroutine, started and awaited by Run. mu guards the CDS and EDS state (cds, eds, muxes);
// handlers take it while applying a response, so updates are serialised. ClustersDumpExtras and
// ClustersConfigDump may be called from any goroutine.
type Client struct {
	cfg         Config
	log         *logging.Logger
	clock       clock.Clock
	node        *corev3.Node
	rand        func() uint64
	backoffBase time.Duration
	backoffMax  time.Duration
	filePoll    time.Duration
	cpStats     ControlPlaneStats
	cpReg       *stats.Registration
	connCount   int64

	// testHook, when set (tests only), sees every handled response and transport failure.
	testHook func(typeURL, version string, err error)

	mu  sync.Mutex // guards the fields below and the CDS, EDS and LDS handlers' state
	ads *mux
	ran bool
	cds *cdsHandler
	eds *edsHandler
	lds *ldsHandler

	// rds and ecds are the named subscriptions (their own locks; see namedHandler).
	rds, ecds *namedHandler

	// srdsMu guards srds, vhds, scoped and nextScopedID (SRDS, srds.go; VHDS, vhds.go);
	// taken before an SRDS handler's mutex and after muxMu.
	srdsMu       sync.Mutex
	srds         map[*mux]*srdsHandler
	vhds         map[*mux]*vhdsHandler
	scoped       map[uint64]*scopedWatch
	nextScopedID uint64

	muxMu sync.Mutex // guards muxes, watched, runCtx and wg.Add; taken after mu
	muxes map[string]*mux
	// watched are the subscriptions of the types owners watch (Watch), by type URL.
	watched map[string]*namedHandler
	runCtx  context.Context
	wg      sync.WaitGroup
}

// New validates the dynamic_resources config sources and builds a Client. Nothing is dialled
// until Run.
func New(cfg Config) (*Client, error) {
	if cfg.Clusters == nil || cfg.Stats == nil {
		return nil, errors.New("xds: Clusters and Stats are required")
	}
	c := &Client{
		cfg: cfg, log: cfg.Logger, clock: cfg.Clock, node: cfg.Node, rand: cfg.Rand,
		backoffBase: cfg.BackoffBase, backoffMax: cfg.BackoffMax, filePoll: cfg.FilePollInterval,
		muxes: map[string]*mux{}, watched: map[string]*namedHandler{}, srds: map[*mux]*srdsHandler{}, vhds: map[*mux]*vhdsHandler{}, scoped: map[uint64]*scopedWatch{},
	}
	c.rds = newNamedHandler(c, rdsKind)
	c.ecds = newNamedHandler(c, ecdsKind)
	if c.clock == nil {
		c.clock = clock.Real()
	}
	if c.rand == nil {
		c.rand = rand.Uint64
	}
	if c.backoffBase <= 0 {
		c.backoffBase = DefaultBackoffBase
	}
	if c.backoffMax <= 0 {
		c.backoffMax = DefaultBackoffMax
	}
	if c.filePoll <= 0 {
		c.filePoll = DefaultFilePollInterval
	}
	dr := cfg.DynamicResources
	if ads := dr.GetAdsConfig(); ads != nil {
		api, err := resource.APISourceFromProto(ads)
		if err != nil {
			return nil, fmt.Errorf("dynamic_resources.ads_config.%w", err)
		}
		if api.Type == resource.REST {
			return nil, errors.New("dynamic_resources.ads_config.api_type = REST; ADS needs GRPC or DELTA_GRPC")
		}
		c.ads = newMux(c, "ads", resource.Source{ADS: true}, &api, true)
		c.muxes["ads"] = c.ads
	}
	if dr.GetCdsResourcesLocator() != "" {
		return nil, fmt.Errorf("dynamic_resources.cds_resources_locator = %q; xdstp:// locators are not supported", dr.GetCdsResourcesLocator())
	}
	c.eds = newEDSHandler(c)
	if cs := dr.GetCdsConfig(); cs != nil {
		src, err := resource.SourceFromProto(cs)
		if err != nil {
			return nil, fmt.Errorf("dynamic_resources.cds_config.%w", err)
		}
		if src.Self {
			return nil, errors.New("dynamic_resources.cds_config.self is not valid here; self needs a parent resource")
		}
		m, err := c.muxFor(src, resource.ClusterType)
		if err != nil {
			return nil, fmt.Errorf("dynamic_resources.cds_config: %w", err)
		}
		c.cds = newCDSHandler(c, src, m)
		if cfg.Init != nil {
			ready, err := cfg.Init(CDSInitTarget)
			if err != nil {
				c.cds.reg.Unregister()
				return nil, fmt.Errorf("xds: %w", err)
			}
			c.cds.initReady = ready
		}
	}
	c.cpReg = cfg.Stats.Register("control_plane.", &c.cpStats)
	return c, nil
}

// muxFor returns the transport for src and typeURL, creating it (and starting it when Run is
// running). Sources with the same Key share a transport; ADS sources share the ADS stream.
func (c *Client) muxFor(src resource.Source, typeURL string) (*mux, error) {
	m, _, err := c.muxForStarted(src, typeURL)
	return m, err
}

// muxForStarted is muxFor that also reports whether Run has started.
func (c *Client) muxForStarted(src resource.Source, typeURL string) (*mux, bool, error) {
	c.muxMu.Lock()
	defer c.muxMu.Unlock()
	started := c.runCtx != nil
	if src.ADS {
		if c.ads == nil {
			return nil, started, errors.New("ads is set but dynamic_resources.ads_config is not")
		}
		return c.ads, started, nil
	}
	key := src.Key() + "|" + resource.ShortType(typeURL)
	if m := c.muxes[key]; m != nil {
		return m, started, nil
	}
	m := newMux(c, key, src, src.API, false)
	m.typeURL = typeURL
	c.muxes[key] = m
	if started {
		c.startLocked(m)
	}
	return m, started, nil
}

// startLocked starts m's goroutine; muxMu is held.
func (c *Client) startLocked(m *mux) {
	ctx := c.runCtx
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		m.run(ctx)
	}()
}

// Run subscribes the bootstrap's EDS clusters, starts every transport and CDS's initial fetch
// timeout, and returns after ctx ends and every transport goroutine has returned.
func (c *Client) Run(ctx context.Context) error {
	c.mu.Lock()
	if c.ran {
		c.mu.Unlock()
		return errors.New("xds: Run called twice")
	}
	c.ran = true
	// Subscribe before runCtx is set, so that muxFor creates transports without starting them;
	// the loop below starts each one once.
	c.eds.bindStaticLocked()
	if c.cds != nil {
		c.cds.startLocked()
	}
	if c.lds != nil {
		c.lds.startLocked()
	}
	c.mu.Unlock()
	c.muxMu.Lock()
	c.runCtx = ctx
	for _, m := range c.muxes {
		c.startLocked(m)
	}
	c.muxMu.Unlock()
	<-ctx.Done()
	c.wg.Wait()
	c.mu.Lock()
	if c.cds != nil {
		c.cds.stopLocked()
	}
	if c.lds != nil {
		c.lds.stopLocked()
	}
	c.eds.stopLocked()
	c.mu.Unlock()
	for _, h := range c.namedHandlers() {
		h.stop()
	}
	c.stopSRDS()
	c.stopVHDS()
	c.cpReg.Unregister()
	return nil
}

// dial connects to a host of the named cluster.
func (c *Client) dial(ctx context.Context, name string) (net.Conn, error) {
	if c.cfg.Dial != nil {
		return c.cfg.Dial(ctx, name)
	}
	cl := c.cfg.Clusters.Get(name)
	if cl == nil {
		return nil, fmt.Errorf("xds: cluster %q: %w", name, errNoCluster)
	}
	if cl.Config().TransportSocket != nil {
		return nil, fmt.Errorf("xds: cluster %q has a transport_socket; the server must provide a TLS dialer", name)
	}
	h, err := cl.Pick(&lb.Context{})
	if err != nil {
		return nil, fmt.Errorf("xds: cluster %q: %w", name, err)
	}
	d := net.Dialer{Timeout: cl.Config().ConnectTimeout}
	return d.DialContext(ctx, "tcp", h.Address())
}

// sleep waits d on the client's clock; false when ctx ended first.
func (c *Client) sleep(ctx context.Context, d time.Duration) bool {
	done := make(chan struct{})
	t := c.clock.AfterFunc(d, func() { close(done) })
	select {
	case <-ctx.Done():
		t.Stop()
		return false
	case <-done:
		return true
	}
}

// connected counts open gRPC streams into control_plane.connected_state (1 while any is open).
func (c *Client) connected(delta int64) {
	c.mu.Lock()
	c.connCount += delta
	if c.connCount > 0 {
		c.cpStats.ConnectedState.Set(1)
	} else {
		c.cpStats.ConnectedState.Set(0)
	}
	c.mu.Unlock()
}

// notify tells the test hook about a handled response or a failure.
func (c *Client) notify(typeURL, version string, err error) {
	if h := c.testHook; h != nil {
		h(typeURL, version, err)
	}
}

// ControlPlaneStats returns the control_plane.* stats.
func (c *Client) ControlPlaneStats() *ControlPlaneStats { return &c.cpStats }

// batcher is the optional cluster-manager API that publishes the active cluster map once for a
// whole batch of additions, warm-ups and removals instead of once per cluster (which makes a
// 10,000-cluster update quadratic). The client uses it when cluster.Manager provides it; fn
// calls AddOrUpdate, Remove and ApplyAssignment, so Batch must not hold Manager.mu while fn runs.
type batcher interface{ Batch(fn func()) }

// batch runs fn, inside the cluster manager's batch when it has one.
func (c *Client) batch(fn func()) {
	if b, ok := any(c.cfg.Clusters).(batcher); ok {
		b.Batch(fn)
		return
	}
	fn()
}
