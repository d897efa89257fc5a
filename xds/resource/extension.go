package resource

import (
	"fmt"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/legateproxy/legate/xds/watch"
)

// ExtensionConfigType is the type URL of ECDS resources (TypedExtensionConfig).
const ExtensionConfigType = watch.ExtensionConfigType

// ExtensionConfigName returns the name of an ECDS resource without validating it, or "".
func ExtensionConfigName(a *anypb.Any) string {
	pb := &corev3.TypedExtensionConfig{}
	if a.GetTypeUrl() != ExtensionConfigType || proto.Unmarshal(a.GetValue(), pb) != nil {
		return ""
	}
	return pb.GetName()
}

// hcmExtensionDependencies returns the ECDS configurations the HTTP filters of hcm discover
// (http_filters[].config_discovery) and the listener must wait for: those without
// apply_default_config_without_warming. path names the connection manager in errors.
func hcmExtensionDependencies(path string, hcm *hcmv3.HttpConnectionManager) ([]Dependency, error) {
	var out []Dependency
	for i, f := range hcm.GetHttpFilters() {
		cd := f.GetConfigDiscovery()
		if cd == nil || cd.GetApplyDefaultConfigWithoutWarming() {
			continue
		}
		src, err := SourceFromProto(cd.GetConfigSource())
		if err != nil {
			return nil, fmt.Errorf("%s.http_filters[%d].config_discovery.config_source.%w", path, i, err)
		}
		if src.Self {
			return nil, fmt.Errorf("%s.http_filters[%d].config_discovery.config_source.self is not supported", path, i)
		}
		out = append(out, Dependency{Name: f.GetName(), Source: src, Config: cd.GetConfigSource(), StatPrefix: hcm.GetStatPrefix(), TypeURLs: cd.GetTypeUrls()})
	}
	return out, nil
}
