package accesslog

import (
	"fmt"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	filev3 "github.com/envoyproxy/go-control-plane/envoy/extensions/access_loggers/file/v3"
	streamv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/access_loggers/stream/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
)

// The loggers that write formatted lines to a file, by name and typed_config type.
const (
	FileName      = "envoy.access_loggers.file"
	FileTypeURL   = "type.googleapis.com/envoy.extensions.access_loggers.file.v3.FileAccessLog"
	StdoutTypeURL = "type.googleapis.com/envoy.extensions.access_loggers.stream.v3.StdoutAccessLog"
	StderrTypeURL = "type.googleapis.com/envoy.extensions.access_loggers.stream.v3.StderrAccessLog"
)

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

// FromTypedConfig compiles envoy.access_loggers.file, stdout or stderr from an access_log
// entry's name and typed_config (a file logger may be named without a typed_config, as in v2
// configurations; it then lacks its path). ok is false for any other logger, which the
// caller builds or refuses. path names the typed_config in errors.
func FromTypedConfig(path, name string, tc *anypb.Any, opts Options) (l LineLog, ok bool, err error) {
	switch u := tc.GetTypeUrl(); {
	case u == FileTypeURL || (u == "" && name == FileName):
		var pb filev3.FileAccessLog
		if err := unmarshal(path, tc, &pb); err != nil {
			return l, true, err
		}
		if pb.GetPath() == "" {
			return l, true, fmt.Errorf("%s.path = \"\"; must not be empty", path)
		}
		f, err := FromFileAccessLog(&pb, opts)
		if err != nil {
			return l, true, fmt.Errorf("%s: %w", path, err)
		}
		return LineLog{Path: pb.GetPath(), Format: f}, true, nil
	case u == StdoutTypeURL:
		return streamLog(path, tc, &streamv3.StdoutAccessLog{}, StdoutPath, opts)
	case u == StderrTypeURL:
		return streamLog(path, tc, &streamv3.StderrAccessLog{}, StderrPath, opts)
	}
	return l, false, nil
}

// formatted is StdoutAccessLog or StderrAccessLog.
type formatted interface {
	proto.Message
	GetLogFormat() *corev3.SubstitutionFormatString
}

// streamLog compiles a stdout or stderr logger: its log_format as the file logger's.
func streamLog(path string, tc *anypb.Any, pb formatted, dest string, opts Options) (LineLog, bool, error) {
	if err := unmarshal(path, tc, pb); err != nil {
		return LineLog{}, true, err
	}
	f, err := FromSubstitutionFormatString(pb.GetLogFormat(), path+".log_format", opts)
	if err != nil {
		return LineLog{}, true, err
	}
	return LineLog{Path: dest, Format: f}, true, nil
}

func unmarshal(path string, tc *anypb.Any, pb proto.Message) error {
	if tc == nil {
		return nil
	}
	if err := tc.UnmarshalTo(pb); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}
