package accesslog

import (
	"fmt"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	filev3 "github.com/envoyproxy/go-control-plane/envoy/extensions/access_loggers/file/v3"
	streamv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/access_loggers/stream/v3"
	"google.golang.org/protobuf/proto"
)

// FileName is the file logger's Envoy name.
const FileName = "envoy.access_loggers.file"

// The paths the stream loggers write to. The Manager writes them to the process's own
// descriptors 1 and 2 (see openLog), so a file logger whose path is one of them behaves the same.
const (
	StdoutPath = "/dev/stdout"
	StderrPath = "/dev/stderr"
)

// LineLog is a compiled file, stdout or stderr access logger: where its lines go and how they
// are formatted.
type LineLog struct {
	Path   string
	Format *Formatter
}

// fileLogger compiles envoy.access_loggers.file (named without a typed_config, as in v2
// configurations, it lacks its path).
func fileLogger(path string, config proto.Message, c LoggerContext) (Logger, error) {
	pb := config.(*filev3.FileAccessLog)
	if pb.GetPath() == "" {
		return Logger{}, fmt.Errorf("%s.path = \"\"; must not be empty", path)
	}
	f, err := FromFileAccessLog(pb, Options{Hostname: c.Hostname})
	if err != nil {
		return Logger{}, fmt.Errorf("%s: %w", path, err)
	}
	return Logger{Line: LineLog{Path: pb.GetPath(), Format: f}}, nil
}

func stdoutLogger(path string, config proto.Message, c LoggerContext) (Logger, error) {
	return streamLog(path, config.(*streamv3.StdoutAccessLog), StdoutPath, c)
}

func stderrLogger(path string, config proto.Message, c LoggerContext) (Logger, error) {
	return streamLog(path, config.(*streamv3.StderrAccessLog), StderrPath, c)
}

// formatted is StdoutAccessLog or StderrAccessLog.
type formatted interface {
	proto.Message
	GetLogFormat() *corev3.SubstitutionFormatString
}

// streamLog compiles a stdout or stderr logger: its log_format as the file logger's.
func streamLog(path string, pb formatted, dest string, c LoggerContext) (Logger, error) {
	f, err := FromSubstitutionFormatString(pb.GetLogFormat(), path+".log_format", Options{Hostname: c.Hostname})
	if err != nil {
		return Logger{}, err
	}
	return Logger{Line: LineLog{Path: dest, Format: f}}, nil
}
