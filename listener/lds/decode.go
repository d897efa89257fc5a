package lds

import (
	"errors"
	"fmt"

	"google.golang.org/protobuf/types/known/anypb"

	"github.com/legateproxy/legate/config"
	"github.com/legateproxy/legate/internal/registry"
	"github.com/legateproxy/legate/xds/resource"
	"github.com/legateproxy/legate/xds/watch"
)

// Listener is a decoded and validated LDS resource: its converted configuration and the
// dynamic resources it warms on.
type Listener struct {
	*resource.Listener
	// Config is the converted listener; Config.Proto is the decoded proto.
	Config *config.Listener
}

// DecodeListener decodes an LDS resource: the Any's type URL, protoc-gen-validate rules,
// config.ListenerFromProto (which decodes the network filters' typed_config with ext; nil
// only lists them), and the rds, scoped_rds, config_discovery and sds_config sources its
// filter chains depend on.
func DecodeListener(a *anypb.Any, ext *registry.Registry) (*Listener, error) {
	l, err := resource.UnmarshalListener(a)
	if err != nil {
		return nil, err
	}
	at := fmt.Sprintf("listener %q", l.GetName())
	if l.GetName() == "" {
		return nil, errors.New(`listener "": name is empty; an LDS listener needs a name`)
	}
	if err := l.ValidateAll(); err != nil {
		return nil, fmt.Errorf("%s: %w", at, watch.Flatten(err))
	}
	cfg, err := config.ListenerFromProto(l, config.Limits{Extensions: ext})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", at, err)
	}
	deps, err := resource.ListenerDependencies(l)
	if err != nil {
		return nil, err
	}
	return &Listener{Listener: deps, Config: cfg}, nil
}
