package runtime

import (
	"errors"
	"fmt"
	"time"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"

	"github.com/legateproxy/legate/internal/clock"
	"github.com/legateproxy/legate/logging"
)

// Config is the bootstrap's layered_runtime plus what the runtime needs from
// the rest of the server.
type Config struct {
	// Layers are layered_runtime.layers, lowest priority first. Without a
	// layered_runtime there are no layers (and no admin layer).
	Layers []LayerConfig
	// ServiceCluster is --service-cluster (node.cluster), appended to disk
	// layer paths with append_service_cluster.
	ServiceCluster string
	// Stats receives the runtime.* stats; nil uses a private, unlisted set.
	Stats *Stats
	// Log is the "runtime" component logger; nil logs nothing.
	Log *logging.Logger
	// Random returns the random numbers FeatureEnabled draws; nil uses
	// math/rand/v2.
	Random func() uint64
	// PollInterval is how often Run checks disk layer symlink roots for a
	// swap; zero means one second.
	PollInterval time.Duration
	// Clock makes Run's poll ticker; nil means the system clock.
	Clock clock.Clock
}

// LayerConfig is one layered_runtime.layers entry: a name and exactly one of
// the layer kinds.
type LayerConfig struct {
	Name string
	// Static is static_layer, a google.protobuf.Struct as plain values (the
	// shape structpb.Struct.AsMap returns: nested maps, float64 numbers).
	Static map[string]any
	// Disk is disk_layer.
	Disk *DiskLayer
	// Admin is admin_layer: the layer POST /runtime_modify changes.
	Admin bool
	// RTDS is rtds_layer; its values come from SetRTDSLayer.
	RTDS *RTDSLayer
}

// DiskLayer is RuntimeLayer.DiskLayer.
type DiskLayer struct {
	// SymlinkRoot is the symbolic link whose target tree holds the values;
	// swapping the link reloads the layer.
	SymlinkRoot string
	// Subdirectory is read below the root.
	Subdirectory string
	// AppendServiceCluster appends the service cluster to the path.
	AppendServiceCluster bool
}

// RTDSLayer is RuntimeLayer.RtdsLayer: the RTDS resource name. The config
// source is the xDS client's business.
type RTDSLayer struct {
	Name string
}

// kinds returns how many layer kinds are set.
func (l *LayerConfig) kinds() int {
	n := 0
	if l.Static != nil {
		n++
	}
	if l.Disk != nil {
		n++
	}
	if l.Admin {
		n++
	}
	if l.RTDS != nil {
		n++
	}
	return n
}

// validate checks the layer list as Envoy's LoaderImpl does: unique names,
// exactly one kind per layer, at most one admin layer, and static layers that
// hold only strings, numbers, bools and structs.
func (c *Config) validate() error {
	names := map[string]bool{}
	admins := 0
	for i := range c.Layers {
		l := &c.Layers[i]
		field := fmt.Sprintf("layered_runtime.layers[%d]", i)
		if names[l.Name] {
			return fmt.Errorf("%s.name = %q; duplicate layer name", field, l.Name)
		}
		names[l.Name] = true
		switch l.kinds() {
		case 0:
			return fmt.Errorf("%s (%q): layer specifier not set; must set one of static_layer, disk_layer, admin_layer, rtds_layer", field, l.Name)
		case 1:
		default:
			return fmt.Errorf("%s (%q): more than one layer specifier set; must set exactly one", field, l.Name)
		}
		if l.Admin {
			admins++
			if admins > 1 {
				return fmt.Errorf("%s (%q): too many admin layers; at most one may be specified", field, l.Name)
			}
		}
		if l.Disk != nil && l.Disk.SymlinkRoot == "" {
			return fmt.Errorf("%s.disk_layer.symlink_root = \"\"; must be set", field)
		}
	}
	return nil
}

// ConfigFromProto converts the bootstrap's layered_runtime. A nil message
// (no layered_runtime) gives no layers; a layered_runtime with no layers gets
// one admin layer with an empty name, as Envoy does.
func ConfigFromProto(lr *bootstrapv3.LayeredRuntime) (Config, error) {
	var cfg Config
	if lr == nil {
		return cfg, nil
	}
	if len(lr.GetLayers()) == 0 {
		cfg.Layers = []LayerConfig{{Admin: true}}
		return cfg, nil
	}
	for i, l := range lr.GetLayers() {
		lc := LayerConfig{Name: l.GetName()}
		switch spec := l.GetLayerSpecifier().(type) {
		case *bootstrapv3.RuntimeLayer_StaticLayer:
			lc.Static = spec.StaticLayer.AsMap()
		case *bootstrapv3.RuntimeLayer_DiskLayer_:
			lc.Disk = &DiskLayer{
				SymlinkRoot:          spec.DiskLayer.GetSymlinkRoot(),
				Subdirectory:         spec.DiskLayer.GetSubdirectory(),
				AppendServiceCluster: spec.DiskLayer.GetAppendServiceCluster(),
			}
		case *bootstrapv3.RuntimeLayer_AdminLayer_:
			lc.Admin = true
		case *bootstrapv3.RuntimeLayer_RtdsLayer_:
			lc.RTDS = &RTDSLayer{Name: spec.RtdsLayer.GetName()}
		default:
			return Config{}, fmt.Errorf("layered_runtime.layers[%d] (%q): layer specifier not set", i, l.GetName())
		}
		cfg.Layers = append(cfg.Layers, lc)
	}
	return cfg, nil
}

// ErrNoAdminLayer is returned by Modify when no admin layer is configured.
// /runtime_modify answers 503 with the body "No admin layer specified".
var ErrNoAdminLayer = errors.New("No admin layer specified") //nolint:staticcheck // Envoy's exact body text.
