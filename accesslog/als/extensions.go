package als

import (
	"fmt"

	grpcalsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/access_loggers/grpc/v3"
	otelalsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/access_loggers/open_telemetry/v3"
	"google.golang.org/protobuf/proto"

	"github.com/legateproxy/legate/accesslog"
	"github.com/legateproxy/legate/internal/registry"
)

// Register adds the gRPC access loggers this package sends: http_grpc and open_telemetry for
// the HTTP connection manager, tcp_grpc and open_telemetry for the TCP proxy. Each asks the consumer's
// LoggerContext.Services, the server's Manager.
func Register(b *registry.Builder) {
	registry.Add(b, accesslog.HTTPLoggers, Name, &grpcalsv3.HttpGrpcAccessLogConfig{}, accesslog.ServiceLogger)
	registry.Add(b, accesslog.HTTPLoggers, OTelName, &otelalsv3.OpenTelemetryAccessLogConfig{}, accesslog.ServiceLogger)
	registry.Add(b, accesslog.TCPLoggers, TCPName, &grpcalsv3.TcpGrpcAccessLogConfig{}, accesslog.ServiceLogger)
	// An OpenTelemetry record is formatted from the entry alone, so TCP connections log the
	// same way (their %...% fields are the TCP entry's).
	registry.Add(b, accesslog.TCPLoggers, OTelName, &otelalsv3.OpenTelemetryAccessLogConfig{}, accesslog.ServiceLogger)
}

// Logger returns the shared logger of a registered configuration (accesslog.Services).
func (m *Manager) Logger(path string, config proto.Message) (accesslog.EntryLogger, error) {
	switch pb := config.(type) {
	case *grpcalsv3.HttpGrpcAccessLogConfig:
		return asEntryLogger(m.HTTPLogger(path, pb))
	case *grpcalsv3.TcpGrpcAccessLogConfig:
		return asEntryLogger(m.TCPLogger(path, pb))
	case *otelalsv3.OpenTelemetryAccessLogConfig:
		return asEntryLogger(m.OTelLogger(path, pb))
	}
	return nil, fmt.Errorf("%s: %T is not an access log service's configuration", path, config)
}

// asEntryLogger returns a constructor's results without a typed nil.
func asEntryLogger[L accesslog.EntryLogger](l L, err error) (accesslog.EntryLogger, error) {
	if err != nil {
		return nil, err
	}
	return l, nil
}
