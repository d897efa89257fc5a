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

	"github.com/legateproxy/legate/internal/clock"
	"github.com/legateproxy/legate/logging"
	"github.com/legateproxy/legate/stats"
	"github.com/legateproxy/legate/xds/resource"
)

// Config holds a Client's configuration and dependencies. Stats is required; every other field
// has the default stated in its comment.
type Config struct {
	// DynamicResources is the bootstrap's dynamic_resources (ads_config and lds_config are
	// used; cds_config belongs to the cluster side, package cluster/cds). Nil means neither
	// ADS nor LDS.
	DynamicResources *bootstrapv3.Bootstrap_DynamicResources
	// Node is sent to management servers: the bootstrap node with the --service-* overrides,
	// user_agent_name and user_agent_build_version already applied by the caller.
	Node *corev3.Node
	// Clusters is where the client finds the hosts of a source's cluster when Dial is nil
	// (cluster.Manager).
	Clusters HostPicker
	// Stats is the store for the subscriptions' stats and control_plane.*.
	Stats *stats.Store
	// Logger logs stream failures and rejected updates; nil discards.
	Logger *logging.Logger
	// Init registers the init targets of subscriptions made before Run; nil means none.
	Init func(name string) (ready func(), err error)
	// Dial connects to a host of the named bootstrap cluster for gRPC and REST sources; the
	// server sets it to add TLS for clusters with a transport socket. Nil dials plain TCP to a
	// host picked from Clusters.Get(name), and refuses clusters with a transport socket.
	Dial func(ctx context.Context, cluster string) (net.Conn, error)
	// Clock schedules backoff, polling and initial fetch timeouts; nil means the system clock.
	Clock clock.Clock
	// BackoffBase and BackoffMax bound the reconnect backoff; zero means DefaultBackoffBase and
	// DefaultBackoffMax.
	BackoffBase, BackoffMax time.Duration
	// Rand is the backoff jitter source; nil means math/rand/v2.
	Rand func() uint64
	// FilePollInterval is how often path sources are checked; zero means
	// DefaultFilePollInterval.
	FilePollInterval time.Duration
}

// HostPicker picks a host of a bootstrap cluster for a plain TCP connection
// (cluster.Manager.PlainHost): its address and connect timeout.
type HostPicker interface {
	PlainHost(cluster string) (addr string, connectTimeout time.Duration, err error)
}

// Client is Legate's xDS client: it opens the transports the config sources of its watchers
// name (ADS, gRPC state-of-the-world and delta, REST, files), hands each response to the
// owner of its type, and ACKs or NACKs it.
//
// Concurrency: New and Run are called once by the server. Every transport runs on its own
// goroutine, started and awaited by Run. mu guards ran and the count of open streams.
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

	ads *mux
	mu  sync.Mutex // guards ran and connCount
	ran bool

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
	if cfg.Stats == nil {
		return nil, errors.New("xds: Stats is required")
	}
	c := &Client{
		cfg: cfg, log: cfg.Logger, clock: cfg.Clock, node: cfg.Node, rand: cfg.Rand,
		backoffBase: cfg.BackoffBase, backoffMax: cfg.BackoffMax, filePoll: cfg.FilePollInterval,
		muxes: map[string]*mux{}, watched: map[string]*namedHandler{},
	}
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

// Run starts every transport and returns after ctx ends and every transport goroutine has
// returned.
func (c *Client) Run(ctx context.Context) error {
	c.mu.Lock()
	if c.ran {
		c.mu.Unlock()
		return errors.New("xds: Run called twice")
	}
	c.ran = true
	c.mu.Unlock()
	// Owners subscribed before runCtx is set, so muxFor created their transports without
	// starting them; the loop below starts each one once.
	c.muxMu.Lock()
	c.runCtx = ctx
	for _, m := range c.muxes {
		c.startLocked(m)
	}
	c.muxMu.Unlock()
	<-ctx.Done()
	c.wg.Wait()
	for _, h := range c.namedHandlers() {
		h.stop()
	}
	c.cpReg.Unregister()
	return nil
}

// dial connects to a host of the named cluster.
func (c *Client) dial(ctx context.Context, name string) (net.Conn, error) {
	if c.cfg.Dial != nil {
		return c.cfg.Dial(ctx, name)
	}
	if c.cfg.Clusters == nil {
		return nil, fmt.Errorf("xds: cluster %q: not an active cluster", name)
	}
	addr, timeout, err := c.cfg.Clusters.PlainHost(name)
	if err != nil {
		return nil, fmt.Errorf("xds: %w", err)
	}
	d := net.Dialer{Timeout: timeout}
	return d.DialContext(ctx, "tcp", addr)
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
