package resource

import (
	"fmt"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"

	// The bootstrap package also registers the message types of every extension Legate
	// implements, so that typed_config values inside file-delivered resources resolve.
	"github.com/legateproxy/legate/bootstrap"
)

// ParseResponseFile parses the contents of a path config source: a DiscoveryResponse in YAML
// (.yaml, .yml) or JSON (any other name), read with the rules Envoy's loader applies to files
// (bootstrap.Unmarshal: single values for lists, enum names in any case, TypedStructs opened,
// ...). Unknown fields are errors.
func ParseResponseFile(name string, data []byte) (*discoveryv3.DiscoveryResponse, error) {
	format := bootstrap.FormatOf(name)
	if format == bootstrap.FormatAuto {
		format = bootstrap.FormatJSON
	}
	out := &discoveryv3.DiscoveryResponse{}
	if err := bootstrap.Unmarshal(name, data, format, out); err != nil {
		return nil, fmt.Errorf("%s: not a DiscoveryResponse: %w", name, err)
	}
	return out, nil
}
