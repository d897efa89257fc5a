package httpproxy

import (
	"fmt"
	"sync"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/legateproxy/legate/logging"
	"github.com/legateproxy/legate/stats"
	"github.com/legateproxy/legate/xds/watch"
)

// ECDSInitTarget is Envoy's name for the init target of the ECDS subscription to name.
func ECDSInitTarget(name string) string { return "ExtensionConfigSubscription " + name }

// DecodeExtensionConfig decodes and validates an ECDS resource (a name and a typed_config
// are required). Whether its type suits a filter is for the filters that subscribed
// (config_discovery.type_urls). The name is returned whenever the resource has one.
func DecodeExtensionConfig(a *anypb.Any) (string, *corev3.TypedExtensionConfig, error) {
	pb := &corev3.TypedExtensionConfig{}
	name, err := watch.DecodeNamed(a, watch.ExtensionConfigType, "extension_config", pb, pb.GetName)
	if err != nil {
		return name, nil, err
	}
	return name, pb, nil
}

// ecdsStats are the ECDS-only stats of an HTTP filter configuration subscription, next to its
// subscription stats under extension_config_discovery.http_filter.<name>. As in Envoy,
// config_reload counts accepted changes, config_fail rejected configurations and initial
// fetch timeouts, and config_conflict filters that found the current configuration unfit
// (its type not in their type_urls, or refused by their factory) when they subscribed.
type ecdsStats struct {
	ConfigConflict stats.Counter `stat:"config_conflict"`
	ConfigFail     stats.Counter `stat:"config_fail"`
	ConfigReload   stats.Counter `stat:"config_reload"`
}

// ecdsObserver keeps one subscription's ecdsStats (watch.Observer).
type ecdsObserver struct {
	stats ecdsStats
	reg   *stats.Registration
}

func (o *ecdsObserver) Changed() { o.stats.ConfigReload.Inc() }
func (o *ecdsObserver) Failed()  { o.stats.ConfigFail.Inc() }
func (o *ecdsObserver) Done()    { o.reg.Unregister() }

// ecdsType is ECDS's resource type for the xDS client's watch API: a TypedExtensionConfig
// decodes to itself. It is Observed: each subscription has its ecdsStats in store.
type ecdsType struct{ store *stats.Store }

func (ecdsType) TypeURL() string { return watch.ExtensionConfigType }
func (ecdsType) Short() string   { return "ECDS" }

func (ecdsType) Decode(a *anypb.Any) (string, any, error) {
	name, tc, err := DecodeExtensionConfig(a)
	if err != nil {
		return name, nil, err
	}
	return name, tc, nil
}

func (ecdsType) StatPrefix(name string) string {
	return "extension_config_discovery.http_filter." + name + "."
}

func (ecdsType) InitTarget(name string) string { return ECDSInitTarget(name) }

func (t ecdsType) Observe(name string) watch.Observer {
	o := &ecdsObserver{}
	o.reg = t.store.Register(t.StatPrefix(name), &o.stats)
	return o
}

// ECDS is the connection manager's side of ECDS: it watches the configurations of HTTP
// filters discovered over xDS (http_filters[].config_discovery) through the xDS client,
// checking each new configuration as every filter sharing it would before any of them sees
// it. It serves the connection managers (ExtensionConfigProvider) and the warming LDS
// listeners (WatchWarming). Safe for concurrent use once SetClient was called.
type ECDS struct {
	typ    ecdsType
	client watch.Client
	// factory checks a configuration as the filter factories would (CheckDiscoveredFilter);
	// nil checks type_urls alone.
	factory func(tc *corev3.TypedExtensionConfig) error
	log     *logging.Logger
}

// NewECDS returns the ECDS owner whose subscriptions keep their stats in store. factory
// (may be nil) checks the configurations a warming listener waits for as its filters'
// factories will (CheckDiscoveredFilter); log (nil discards) reports conflicts.
func NewECDS(store *stats.Store, factory func(tc *corev3.TypedExtensionConfig) error, log *logging.Logger) *ECDS {
	return &ECDS{typ: ecdsType{store: store}, factory: factory, log: log}
}

// SetClient gives e the xDS client; it is called once, after the client is built and before
// anything watches.
func (e *ECDS) SetClient(c watch.Client) { e.client = c }

// extensionCheck is the check of one watch of the configuration called name: its type must
// be one of typeURLs (config_discovery.type_urls; none: any type), then build (the filter's
// factory; nil for none) must accept it.
func extensionCheck(name string, typeURLs []string, build func(*corev3.TypedExtensionConfig) (func(), error)) watch.Check {
	var c watch.Check
	if len(typeURLs) > 0 {
		c.Accept = func(v any) error {
			tc, _ := v.(*corev3.TypedExtensionConfig)
			if err := checkType(typeURLs, tc.GetTypedConfig().GetTypeUrl()); err != nil {
				return fmt.Errorf("extension config %q: %w", name, err)
			}
			return nil
		}
	}
	if build != nil {
		c.Build = func(v any) (func(), error) {
			tc, _ := v.(*corev3.TypedExtensionConfig)
			discard, err := build(tc)
			if err != nil {
				return nil, fmt.Errorf("extension config %q: %w", name, err)
			}
			return discard, nil
		}
	}
	return c
}

// ecdsWatch is one filter's watch: its check, and update with a generation of its own.
// Updates are serialised by mu and each hands over the subscription's current value, so that
// a notice delivered late never installs an older configuration over a newer one.
type ecdsWatch struct {
	check  watch.Check
	update func(gen uint64, tc *corev3.TypedExtensionConfig)

	mu  sync.Mutex
	gen uint64
	sub watch.Subscription // nil until Watch returned
}

func (w *ecdsWatch) Check() watch.Check { return w.check }

func (w *ecdsWatch) Update(v any) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.sub != nil {
		v = w.sub.Value()
	}
	w.gen++
	tc, _ := v.(*corev3.TypedExtensionConfig)
	w.update(w.gen, tc)
}

// WatchExtensionConfig implements ExtensionConfigProvider: it subscribes to the ECDS
// resource called name from cd.config_source — one subscription per name and transport,
// shared by every HTTP filter that discovers it, with its stats under
// extension_config_discovery.http_filter.<name>. — and calls update with every accepted new
// version (gen grows), and with nil when the first fetch times out or fails, or the resource
// is removed.
//
// Every new version must suit every watcher of the subscription before any of them sees it,
// as in Envoy (FilterConfigSubscription::onConfigUpdate): its typed_config type must be one of
// each watcher's type_urls (all of those are checked before any factory runs), then each
// check (nil: none) must accept it. Otherwise the response is NACKed with the error (naming
// the configuration and the rule), update_rejected and config_fail count it, the config dump
// shows it as error_state, and the previous version keeps serving; the discard of every check
// that accepted the rejected version is called at once.
//
// It returns the current configuration — nil until one arrives, and nil when it does not suit
// this filter (config_conflict counts that; the filter then serves its default) — its
// generation and cancel. A subscription made before the client runs registers an init
// target (ECDSInitTarget).
func (e *ECDS) WatchExtensionConfig(name string, cd *corev3.ExtensionConfigSource,
	check func(tc *corev3.TypedExtensionConfig) (discard func(), err error),
	update func(gen uint64, tc *corev3.TypedExtensionConfig)) (*corev3.TypedExtensionConfig, uint64, func(), error) {
	w := &ecdsWatch{check: extensionCheck(name, cd.GetTypeUrls(), check), update: update}
	sub, err := e.client.Watch(e.typ, cd.GetConfigSource(), name, w)
	if err != nil {
		return nil, 0, nil, fmt.Errorf("config_discovery.config_source.%w", err)
	}
	w.mu.Lock()
	w.sub = sub
	tc, _ := sub.Value().(*corev3.TypedExtensionConfig)
	gen := w.gen
	w.mu.Unlock()
	if tc != nil {
		if err := checkNow(w.check, tc); err != nil {
			if o, ok := sub.Observer().(*ecdsObserver); ok {
				o.stats.ConfigConflict.Inc()
			}
			e.log.Warnf("xds: ECDS: %v; the filter serves its default configuration", err)
			tc = nil
		}
	}
	return tc, gen, sub.Cancel, nil
}

// checkNow runs c on the configuration a filter found when it subscribed; what Build built
// is kept for the update that follows.
func checkNow(c watch.Check, tc *corev3.TypedExtensionConfig) error {
	if c.Accept != nil {
		if err := c.Accept(tc); err != nil {
			return err
		}
	}
	if c.Build != nil {
		if _, err := c.Build(tc); err != nil {
			return err
		}
	}
	return nil
}

// warmingWatch is a warming listener's watch of one of its filters' configurations.
type warmingWatch struct {
	check    watch.Check
	onChange func()
}

func (w warmingWatch) Check() watch.Check { return w.check }
func (w warmingWatch) Update(any)         { w.onChange() }

// WatchWarming watches, for a warming LDS listener (xds.ExtensionWatcher), the configuration
// called name one of its HTTP filters discovers from cs: the type must be one of typeURLs,
// and the filter factories must accept it. So a first configuration the filter would refuse
// is NACKed and ends the listener's wait, as Envoy's providers, made with the listener, check
// it. The factory check stands in for the filters: it runs only while no filter of the
// subscription has a check of its own (they make the same check, and their errors name the
// connection manager). onChange runs after each change.
func (e *ECDS) WatchWarming(cs *corev3.ConfigSource, name string, typeURLs []string, onChange func()) (watch.Subscription, error) {
	var build func(*corev3.TypedExtensionConfig) (func(), error)
	if f := e.factory; f != nil {
		build = func(tc *corev3.TypedExtensionConfig) (func(), error) { return nil, f(tc) }
	}
	c := extensionCheck(name, typeURLs, build)
	c.StandIn = true
	return e.client.Watch(e.typ, cs, name, warmingWatch{check: c, onChange: onChange})
}
