package server

import (
	adminv3 "github.com/envoyproxy/go-control-plane/envoy/admin/v3"
	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// bootstrapDump is the /config_dump bootstrap section: the effective
// bootstrap, with the node as Legate reports it. The name filter does not
// apply to the bootstrap.
func (s *Server) bootstrapDump(func(string) bool) protoreflect.ProtoMessage {
	b := proto.Clone(s.boot.Proto).(*bootstrapv3.Bootstrap)
	b.Node = s.Node()
	return &adminv3.BootstrapConfigDump{Bootstrap: b, LastUpdated: timestamppb.New(s.bootLoadedAt)}
}
