package als

import (
	grpcalsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/access_loggers/grpc/v3"
	otelalsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/access_loggers/open_telemetry/v3"

	"github.com/legateproxy/legate/internal/registry"
)

// Register declares the gRPC access loggers this package sends (http_grpc, tcp_grpc,
// open_telemetry).
func Register(b *registry.Builder) {
	b.Declare(registry.AccessLogger, "envoy.access_loggers.http_grpc", &grpcalsv3.HttpGrpcAccessLogConfig{})
	b.Declare(registry.AccessLogger, "envoy.access_loggers.tcp_grpc", &grpcalsv3.TcpGrpcAccessLogConfig{})
	b.Declare(registry.AccessLogger, "envoy.access_loggers.open_telemetry", &otelalsv3.OpenTelemetryAccessLogConfig{})
}
