package accesslog

import (
	"fmt"
	"strings"

	filev3 "github.com/envoyproxy/go-control-plane/envoy/extensions/access_loggers/file/v3"
	streamv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/access_loggers/stream/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/legateproxy/legate/internal/registry"
)

// The kinds of access logger extensions, one per consumer, since each takes a different set:
// the HTTP connection manager's access_log, the TCP proxy's, a listener's (the
// connections no filter chain matched) and the UDP proxy's. A logger package registers its factory under each
// kind whose consumer it serves:
//
//	registry.Add(b, accesslog.HTTPLoggers, Name, &pb.Config{}, factory)
var (
	HTTPLoggers     = registry.Kind[LoggerFactory]{Category: registry.AccessLogger, Facet: "http"}
	TCPLoggers      = registry.Kind[LoggerFactory]{Category: registry.AccessLogger, Facet: "tcp"}
	ListenerLoggers = registry.Kind[LoggerFactory]{Category: registry.AccessLogger, Facet: "listener"}
	UDPLoggers      = registry.Kind[LoggerFactory]{Category: registry.AccessLogger, Facet: "udp"}
)

// LoggerFactory builds an access logger from its config, a message of the registered type
// (empty when the access_log entry had no typed_config); path names the config in errors.
type LoggerFactory func(path string, config proto.Message, c LoggerContext) (Logger, error)

// LoggerContext is what a consumer gives a logger factory.
type LoggerContext struct {
	// Hostname is what %HOSTNAME% prints; empty means os.Hostname().
	Hostname string
	// Services makes the loggers that stream entries to an access log service (the server's
	// als.Manager); nil refuses them.
	Services Services
}

// Services makes the loggers that stream entries to a service, shared by every access_log
// entry with the same configuration.
type Services interface {
	Logger(path string, config proto.Message) (EntryLogger, error)
}

// Logger is a built access logger: a line format and the file its consumer opens for it, or
// a client that takes the entries themselves.
type Logger struct {
	Line LineLog
	// Entries, when set, receives the entries instead of Line (http_grpc, open_telemetry).
	Entries EntryLogger
}

// EntryLogger is an access log service client: it converts and buffers entries itself.
type EntryLogger interface{ Log(*Entry) }

// ServiceLogger is the factory of a logger that streams to a service: it asks c.Services.
func ServiceLogger(path string, config proto.Message, c LoggerContext) (Logger, error) {
	if c.Services == nil {
		return Logger{}, fmt.Errorf("%s (%q): gRPC access logs are not available", path, registry.Entry{Config: config}.TypeURL())
	}
	l, err := c.Services.Logger(path, config)
	if err != nil {
		return Logger{}, err
	}
	return Logger{Entries: l}, nil
}

// Register adds the access loggers this package writes (file, stdout, stderr), for every
// consumer.
func Register(b *registry.Builder) {
	for _, k := range []registry.Kind[LoggerFactory]{HTTPLoggers, TCPLoggers, ListenerLoggers, UDPLoggers} {
		registry.Add(b, k, FileName, &filev3.FileAccessLog{}, fileLogger)
		registry.Add(b, k, "envoy.access_loggers.stdout", &streamv3.StdoutAccessLog{}, stdoutLogger)
		registry.Add(b, k, "envoy.access_loggers.stderr", &streamv3.StderrAccessLog{}, stderrLogger)
	}
}

// Build builds an access_log entry's logger with the factory k has for its typed_config's
// type (or, without one, its name); path names the typed_config in errors. found is false
// when k has none, which the consumer refuses naming Implemented(r, k).
func Build(r *registry.Registry, k registry.Kind[LoggerFactory], path, name string, tc *anypb.Any, c LoggerContext) (l Logger, found bool, err error) {
	factory, e, ok := registry.Lookup(r, k, name, tc.GetTypeUrl())
	if !ok || (tc != nil && e.TypeURL() != tc.GetTypeUrl()) {
		return Logger{}, false, nil
	}
	config, err := e.Decode(path, tc)
	if err != nil {
		return Logger{}, true, err
	}
	l, err = factory(path, config, c)
	return l, true, err
}

// Implemented lists the names of the loggers k builds, for a refusal.
func Implemented(r *registry.Registry, k registry.Kind[LoggerFactory]) string {
	var names []string
	for e := range registry.All(r, k) {
		names = append(names, e.Name)
	}
	if len(names) < 2 {
		return strings.Join(names, "")
	}
	return strings.Join(names[:len(names)-1], ", ") + " and " + names[len(names)-1]
}

// Builtin is the registry of this package's loggers and those of register (als.Register),
// for a consumer built without the server's registry.
func Builtin(register ...func(*registry.Builder)) (*registry.Registry, error) {
	b := registry.NewBuilder()
	Register(b)
	for _, reg := range register {
		reg(b)
	}
	return b.Build()
}
