package resource

import (
	"fmt"
	"path/filepath"
	"strings"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"sigs.k8s.io/yaml"

	// The bootstrap package registers the message types of every extension Legate implements,
	// so that typed_config values inside file-delivered resources resolve.
	_ "github.com/legateproxy/legate/bootstrap"
)

// ParseResponseFile parses the contents of a path config source: a DiscoveryResponse in YAML
// (.yaml, .yml) or JSON (any other name), as Envoy reads it. Unknown fields are errors.
func ParseResponseFile(name string, data []byte) (*discoveryv3.DiscoveryResponse, error) {
	switch strings.ToLower(filepath.Ext(name)) {
	case ".yaml", ".yml":
		j, err := yaml.YAMLToJSON(data)
		if err != nil {
			return nil, fmt.Errorf("%s: invalid YAML: %v", name, err)
		}
		data = j
	}
	out := &discoveryv3.DiscoveryResponse{}
	if err := protojson.Unmarshal(data, out); err != nil {
		return nil, fmt.Errorf("%s: not a DiscoveryResponse: %v", name, err)
	}
	return out, nil
}
