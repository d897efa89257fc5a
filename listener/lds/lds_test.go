package lds

import (
	"errors"
	"strings"
	"testing"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	"google.golang.org/protobuf/proto"

	"github.com/legateproxy/legate/config"
	"github.com/legateproxy/legate/stats"
	"github.com/legateproxy/legate/xds/resource"
	"github.com/legateproxy/legate/xds/watch"
)

// refusingStreams is an xDS client whose Stream fails with err (nil: succeeds).
type refusingStreams struct{ err error }

func (r refusingStreams) Stream(string, *corev3.ConfigSource, bool, watch.Applier) (watch.Stream, error) {
	return nil, r.err
}
func (refusingStreams) HasADS() bool { return false }

type noListeners struct{}

func (noListeners) AddOrUpdate(*config.Listener, string) (bool, error) { return false, nil }
func (noListeners) Remove(string) (bool, error)                        { return false, nil }
func (noListeners) ConfigDump(func(string) bool) proto.Message         { return nil }

func noDeps(*resource.Listener, func()) (Warming, error) { return nil, errors.New("unused") }

// TestNewConfigErrors checks what New refuses in lds_config, each error naming its field.
func TestNewConfigErrors(t *testing.T) {
	store, err := stats.New(stats.Config{})
	if err != nil {
		t.Fatal(err)
	}
	ads := &corev3.ConfigSource{ConfigSourceSpecifier: &corev3.ConfigSource_Ads{Ads: &corev3.AggregatedConfigSource{}}}
	self := &corev3.ConfigSource{ConfigSourceSpecifier: &corev3.ConfigSource_Self{Self: &corev3.SelfConfigSource{}}}
	cfg := func(dr *bootstrapv3.Bootstrap_DynamicResources, client watch.Streams) Config {
		return Config{Client: client, Deps: noDeps, DynamicResources: dr, Listeners: noListeners{}, Stats: store}
	}
	if l, err := New(cfg(&bootstrapv3.Bootstrap_DynamicResources{}, refusingStreams{})); l != nil || err != nil {
		t.Errorf("New without lds_config = %v, %v; want nil, nil", l, err)
	}
	for _, tc := range []struct {
		name   string
		dr     *bootstrapv3.Bootstrap_DynamicResources
		client watch.Streams
		want   string
	}{
		{"locator", &bootstrapv3.Bootstrap_DynamicResources{LdsConfig: ads, LdsResourcesLocator: "xdstp://x/y"}, refusingStreams{}, "dynamic_resources.lds_resources_locator"},
		{"self", &bootstrapv3.Bootstrap_DynamicResources{LdsConfig: self}, refusingStreams{}, "dynamic_resources.lds_config.self is not valid here"},
		{"stream refused", &bootstrapv3.Bootstrap_DynamicResources{LdsConfig: ads}, refusingStreams{errors.New("ads is set but dynamic_resources.ads_config is not")}, "dynamic_resources.lds_config: ads is set"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := New(cfg(tc.dr, tc.client)); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("New() error = %v; want one containing %q", err, tc.want)
			}
		})
	}
}

// TestInitManagerName checks Envoy's spelling of a listener's init manager, with a hash that
// follows the configuration.
func TestInitManagerName(t *testing.T) {
	a := InitManagerName("l1", &listenerv3.Listener{Name: "l1"})
	if !strings.HasPrefix(a, "init manager Listener-local-init-manager l1 ") {
		t.Errorf("InitManagerName = %q; want Envoy's prefix and the listener's name", a)
	}
	if b := InitManagerName("l1", &listenerv3.Listener{Name: "l1"}); b != a {
		t.Errorf("InitManagerName of an equal configuration = %q; want %q", b, a)
	}
	if c := InitManagerName("l1", &listenerv3.Listener{Name: "l1", StatPrefix: "x"}); c == a {
		t.Errorf("InitManagerName of another configuration = %q; want a different hash", c)
	}
}
