package accesslog

import (
	filev3 "github.com/envoyproxy/go-control-plane/envoy/extensions/access_loggers/file/v3"
	streamv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/access_loggers/stream/v3"

	"github.com/legateproxy/legate/internal/registry"
)

// Register declares the access loggers this package writes (file, stdout, stderr); the
// connection managers build them from their access_log entries.
func Register(b *registry.Builder) {
	b.Declare(registry.AccessLogger, "envoy.access_loggers.file", &filev3.FileAccessLog{})
	b.Declare(registry.AccessLogger, "envoy.access_loggers.stdout", &streamv3.StdoutAccessLog{})
	b.Declare(registry.AccessLogger, "envoy.access_loggers.stderr", &streamv3.StderrAccessLog{})
}
