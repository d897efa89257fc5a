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
const ExtensionConfigType = "type.googleapis.com/envoy.config.core.v3.TypedExtensionConfig"

// DecodeExtensionConfig decodes an ECDS resource: the type URL, protoc-gen-validate rules (a
// name and a typed_config are required). Whether its type suits a filter is checked by the
// filter that subscribed (config_discovery.type_urls).
func DecodeExtensionConfig(a *anypb.Any) (*corev3.TypedExtensionConfig, error) {
	pb := &corev3.TypedExtensionConfig{}
	if _, err := watch.DecodeNamed(a, ExtensionConfigType, "extension_config", pb, pb.GetName); err != nil {
		return nil, err
	}
	return pb, nil
}

// ExtensionConfigName returns the name of an ECDS resource without validating it, or "".
func ExtensionConfigName(a *anypb.Any) string {
	pb := &corev3.TypedExtensionConfig{}
	if a.GetTypeUrl() != ExtensionConfigType || proto.Unmarshal(a.GetValue(), pb) != nil {
		return ""
	}
	return pb.GetName()
}

// CheckExtensionType checks that the typed_config of tc has one of the types typeURLs allows
// (an HTTP filter's config_discovery.type_urls; none allows any type), as Envoy checks each
// discovered filter configuration before a filter takes it.
func CheckExtensionType(typeURLs []string, tc *corev3.TypedExtensionConfig) error {
	if len(typeURLs) == 0 {
		return nil
	}
	u := tc.GetTypedConfig().GetTypeUrl()
	for _, a := range typeURLs {
		if a == u {
			return nil
		}
	}
	return fmt.Errorf("typed_config type %q is not one of config_discovery.type_urls %q", u, typeURLs)
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
		out = append(out, Dependency{Name: f.GetName(), Source: src, StatPrefix: hcm.GetStatPrefix(), TypeURLs: cd.GetTypeUrls()})
	}
	return out, nil
}
