package httpproxy

import (
	"errors"
	"sync"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/legateproxy/legate/stats"
	"github.com/legateproxy/legate/xds/watch"
)

// oneSub is a watch.Client holding one subscription whose value the test sets; it records
// the watcher and the Observer the type gives the subscription, as the xDS client does.
type oneSub struct {
	mu  sync.Mutex
	val any
	w   watch.Watcher
	obs watch.Observer
	typ watch.Type
}

func (c *oneSub) Watch(t watch.Type, _ *corev3.ConfigSource, name string, w watch.Watcher) (watch.Subscription, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.w, c.typ = w, t
	if o, ok := t.(watch.Observed); ok && c.obs == nil {
		c.obs = o.Observe(name)
	}
	return c, nil
}

func (c *oneSub) set(v any) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.val = v
}

func (c *oneSub) Ready() bool        { return true }
func (c *oneSub) InitTarget() string { return "" }
func (c *oneSub) Cancel()            {}
func (c *oneSub) Value() any {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.val
}
func (c *oneSub) Observer() watch.Observer {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.obs
}

// newTestECDS is an ECDS owner on c with a stats store of its own.
func newTestECDS(t *testing.T, c watch.Client, factory func(*corev3.TypedExtensionConfig) error) *ECDS {
	t.Helper()
	store, err := stats.New(stats.Config{})
	if err != nil {
		t.Fatal(err)
	}
	e := NewECDS(store, factory, nil)
	e.SetClient(c)
	return e
}

func extConfig(typeURL string) *corev3.TypedExtensionConfig {
	return &corev3.TypedExtensionConfig{Name: "hc", TypedConfig: &anypb.Any{TypeUrl: typeURL}}
}

// TestECDSWatchDeliversCurrent: each update hands the filter the subscription's current
// configuration with a growing generation, so that a notice delivered late (the client calls
// watchers without locks) never installs an older configuration over a newer one.
func TestECDSWatchDeliversCurrent(t *testing.T) {
	c := &oneSub{}
	e := newTestECDS(t, c, nil)
	type got struct {
		gen uint64
		url string
	}
	var updates []got
	cur, gen, _, err := e.WatchExtensionConfig("hc", &corev3.ExtensionConfigSource{}, nil, func(g uint64, tc *corev3.TypedExtensionConfig) {
		updates = append(updates, got{g, tc.GetTypedConfig().GetTypeUrl()})
	})
	if err != nil || cur != nil || gen != 0 {
		t.Fatalf("WatchExtensionConfig = %v, %d, %v; want no configuration at generation 0", cur, gen, err)
	}
	older, newer := extConfig("type.googleapis.com/old"), extConfig("type.googleapis.com/new")
	c.set(newer)
	c.w.Update(older) // a late notice of the configuration newer replaced
	c.w.Update(newer)
	want := []got{{1, "type.googleapis.com/new"}, {2, "type.googleapis.com/new"}}
	if len(updates) != len(want) || updates[0] != want[0] || updates[1] != want[1] {
		t.Errorf("updates = %v; want %v", updates, want)
	}
}

// TestECDSWatchConflict: a filter whose type_urls exclude the current configuration gets
// none, and config_conflict counts it on the subscription's stats; config_reload and
// config_fail are the client's to count through the same Observer.
func TestECDSWatchConflict(t *testing.T) {
	c := &oneSub{}
	e := newTestECDS(t, c, nil)
	if _, _, _, err := e.WatchExtensionConfig("hc", &corev3.ExtensionConfigSource{}, nil, func(uint64, *corev3.TypedExtensionConfig) {}); err != nil {
		t.Fatal(err)
	}
	c.set(extConfig("type.googleapis.com/a"))
	cur, _, _, err := e.WatchExtensionConfig("hc", &corev3.ExtensionConfigSource{TypeUrls: []string{"type.googleapis.com/b"}}, nil, func(uint64, *corev3.TypedExtensionConfig) {})
	if err != nil || cur != nil {
		t.Fatalf("WatchExtensionConfig with other type_urls = %v, %v; want no configuration", cur, err)
	}
	c.obs.Changed()
	c.obs.Failed()
	o := c.obs.(*ecdsObserver)
	if got := [3]uint64{o.stats.ConfigConflict.Value(), o.stats.ConfigReload.Value(), o.stats.ConfigFail.Value()}; got != [3]uint64{1, 1, 1} {
		t.Errorf("config_conflict, config_reload, config_fail = %v; want 1 each", got)
	}
	if p := c.typ.StatPrefix("hc"); p != "extension_config_discovery.http_filter.hc." {
		t.Errorf("StatPrefix = %q", p)
	}
}

// TestECDSWarmingCheck: a warming listener's check is a stand-in: type_urls first, then the
// factory check, whose error names the configuration.
func TestECDSWarmingCheck(t *testing.T) {
	c := &oneSub{}
	refused := errors.New("refused by the factory")
	e := newTestECDS(t, c, func(*corev3.TypedExtensionConfig) error { return refused })
	changed := 0
	if _, err := e.WatchWarming(nil, "hc", []string{"type.googleapis.com/a"}, func() { changed++ }); err != nil {
		t.Fatal(err)
	}
	ck := c.w.(watch.Checker).Check()
	if !ck.StandIn {
		t.Error("the warming check is not a stand-in")
	}
	if err := ck.Accept(extConfig("type.googleapis.com/b")); err == nil {
		t.Error("Accept took a type outside type_urls")
	}
	if _, err := ck.Build(extConfig("type.googleapis.com/a")); !errors.Is(err, refused) || err.Error() != `extension config "hc": refused by the factory` {
		t.Errorf("Build = %v; want the factory's refusal naming the configuration", err)
	}
	c.w.Update(nil)
	if changed != 1 {
		t.Errorf("onChange ran %d times; want 1", changed)
	}
}
