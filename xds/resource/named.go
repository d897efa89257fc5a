package resource

import (
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	runtimev3 "github.com/envoyproxy/go-control-plane/envoy/service/runtime/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
)

// NamedResourceName returns the name of an RDS, SDS or RTDS resource without validating it,
// or "" when it does not decode.
func NamedResourceName(a *anypb.Any) string {
	var msg interface {
		proto.Message
		GetName() string
	}
	switch a.GetTypeUrl() {
	case RouteType:
		msg = &routev3.RouteConfiguration{}
	case SecretType:
		msg = &tlsv3.Secret{}
	case RuntimeType:
		msg = &runtimev3.Runtime{}
	case ExtensionConfigType:
		return ExtensionConfigName(a)
	default:
		return ""
	}
	if proto.Unmarshal(a.GetValue(), msg) != nil {
		return ""
	}
	return msg.GetName()
}
