package httpproxy

import (
	"fmt"

	grpcalsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/access_loggers/grpc/v3"
	otelalsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/access_loggers/open_telemetry/v3"

	"github.com/legateproxy/legate/accesslog/als"
	"github.com/legateproxy/legate/config"
)

// grpcAccessLog builds an envoy.access_loggers.http_grpc access log: entries go to the shared
// logger of Deps.GRPCAccessLogs for this configuration.
func grpcAccessLog(al config.AccessLog, d *Deps) (accessLogger, error) {
	if d.GRPCAccessLogs == nil {
		return accessLogger{}, fmt.Errorf("%q (%s): gRPC access logs are not available", al.Name, als.TypeURL)
	}
	var pb grpcalsv3.HttpGrpcAccessLogConfig
	if err := al.TypedConfig.UnmarshalTo(&pb); err != nil {
		return accessLogger{}, fmt.Errorf("%q: typed_config: %w", al.Name, err)
	}
	l, err := d.GRPCAccessLogs.HTTPLogger("typed_config", &pb)
	if err != nil {
		return accessLogger{}, fmt.Errorf("%q: %w", al.Name, err)
	}
	return accessLogger{entries: l}, nil
}

// otelAccessLog builds an envoy.access_loggers.open_telemetry access log: entries go to the
// shared OTLP logger of Deps.GRPCAccessLogs for this configuration.
func otelAccessLog(al config.AccessLog, d *Deps) (accessLogger, error) {
	if d.GRPCAccessLogs == nil {
		return accessLogger{}, fmt.Errorf("%q (%s): gRPC access logs are not available", al.Name, als.OTelTypeURL)
	}
	var pb otelalsv3.OpenTelemetryAccessLogConfig
	if err := al.TypedConfig.UnmarshalTo(&pb); err != nil {
		return accessLogger{}, fmt.Errorf("%q: typed_config: %w", al.Name, err)
	}
	l, err := d.GRPCAccessLogs.OTelLogger("typed_config", &pb)
	if err != nil {
		return accessLogger{}, fmt.Errorf("%q: %w", al.Name, err)
	}
	return accessLogger{entries: l}, nil
}
