package watch

import (
	"errors"
	"fmt"
	"strings"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/legateproxy/legate/bootstrap"
)

// Type URLs of the v3 resources Legate subscribes to.
const (
	ClusterType  = "type.googleapis.com/envoy.config.cluster.v3.Cluster"
	EndpointType = "type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment"
	ListenerType = "type.googleapis.com/envoy.config.listener.v3.Listener"
	RouteType    = "type.googleapis.com/envoy.config.route.v3.RouteConfiguration"
	SecretType   = "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.Secret"
	RuntimeType  = "type.googleapis.com/envoy.service.runtime.v3.Runtime"
	// ScopedRouteType is SRDS's ScopedRouteConfiguration; VirtualHostType is VHDS's
	// VirtualHost (delta only).
	ScopedRouteType = "type.googleapis.com/envoy.config.route.v3.ScopedRouteConfiguration"
	VirtualHostType = "type.googleapis.com/envoy.config.route.v3.VirtualHost"
	// ExtensionConfigType is ECDS's TypedExtensionConfig.
	ExtensionConfigType = "type.googleapis.com/envoy.config.core.v3.TypedExtensionConfig"
)

// v2TypeURLs are the v2 spellings of the types above, refused with a clear error.
var v2TypeURLs = map[string]string{
	"type.googleapis.com/envoy.api.v2.Cluster":               ClusterType,
	"type.googleapis.com/envoy.api.v2.ClusterLoadAssignment": EndpointType,
	"type.googleapis.com/envoy.api.v2.Listener":              ListenerType,
	"type.googleapis.com/envoy.api.v2.RouteConfiguration":    RouteType,
	"type.googleapis.com/envoy.api.v2.auth.Secret":           SecretType,
	"type.googleapis.com/envoy.service.discovery.v2.Runtime": RuntimeType,
}

// CheckTypeURL reports whether got is the type URL want, naming the v2 rule when got is a v2
// spelling of it.
func CheckTypeURL(got, want string) error {
	if got == want {
		return nil
	}
	if v3, ok := v2TypeURLs[got]; ok && v3 == want {
		return fmt.Errorf("type_url = %q; only the v3 API is supported (want %q)", got, want)
	}
	return fmt.Errorf("type_url = %q; want %q", got, want)
}

// ShortType is the message name of a type URL ("Cluster" for ClusterType), for logs and stat
// prefixes.
func ShortType(typeURL string) string {
	if i := strings.LastIndexByte(typeURL, '.'); i >= 0 {
		return typeURL[i+1:]
	}
	return typeURL
}

// Validated is a generated message with protoc-gen-validate's ValidateAll.
type Validated interface {
	proto.Message
	ValidateAll() error
}

// Unmarshal checks a's type URL and decodes it into msg, opening its typed_structs; kind
// names the resource in errors ("route_config").
func Unmarshal(a *anypb.Any, typeURL, kind string, msg proto.Message) error {
	if a == nil {
		return fmt.Errorf("%s: resource is empty", kind)
	}
	if err := CheckTypeURL(a.GetTypeUrl(), typeURL); err != nil {
		return fmt.Errorf("%s: %w", kind, err)
	}
	if err := proto.Unmarshal(a.GetValue(), msg); err != nil {
		return fmt.Errorf("%s: cannot decode the resource: %v", kind, err)
	}
	if err := bootstrap.OpenTypedStructs("", msg); err != nil {
		return fmt.Errorf("%s: %w", kind, err)
	}
	return nil
}

// DecodeNamed unmarshals and validates msg, naming it with the name nameOf returns: a
// resource delivered by xDS needs a name.
func DecodeNamed(a *anypb.Any, typeURL, kind string, msg Validated, nameOf func() string) (string, error) {
	if err := Unmarshal(a, typeURL, kind, msg); err != nil {
		return "", err
	}
	name := nameOf()
	if name == "" {
		return "", fmt.Errorf("%s %q: name is empty; a %s delivered by xDS needs a name", kind, name, kind)
	}
	if err := msg.ValidateAll(); err != nil {
		return name, fmt.Errorf("%s %q: %w", kind, name, Flatten(err))
	}
	return name, nil
}

// multiError is protoc-gen-validate's ValidateAll error.
type multiError interface{ AllErrors() []error }

// Flatten joins the errors of a ValidateAll result with "; ", so that a NACK's error_detail
// stays one line.
func Flatten(err error) error {
	var m multiError
	if !errors.As(err, &m) {
		return err
	}
	all := m.AllErrors()
	if len(all) == 1 {
		return all[0]
	}
	msg := ""
	for i, e := range all {
		if i > 0 {
			msg += "; "
		}
		msg += e.Error()
	}
	return errors.New(msg)
}
