package accesslog

import (
	"bufio"
	"os"
	"strings"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	filev3 "github.com/envoyproxy/go-control-plane/envoy/extensions/access_loggers/file/v3"
	streamv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/access_loggers/stream/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/structpb"
)

// lineLog builds a file, stdout or stderr logger from an access_log entry's name and
// typed_config through the registry, as the consumers do; ok is false when no factory takes it.
func lineLog(t *testing.T, path, name string, tc *anypb.Any, opts Options) (LineLog, bool, error) {
	t.Helper()
	r, err := Builtin()
	if err != nil {
		t.Fatal(err)
	}
	l, ok, err := Build(r, ListenerLoggers, path, name, tc, LoggerContext{Hostname: opts.Hostname})
	return l.Line, ok, err
}

func mustAny(t *testing.T, m proto.Message) *anypb.Any {
	t.Helper()
	a, err := anypb.New(m)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// TestStreamLoggersFormatAsFile compiles stdout and stderr loggers with each log_format
// (text_format, json_format, none) and checks that they print exactly what a file logger with
// the same log_format prints, to the stream's path.
func TestStreamLoggersFormatAsFile(t *testing.T) {
	jsonFormat := mustStruct(t, map[string]any{"code": "%RESPONSE_CODE%", "method": "%REQ(:METHOD)%"})
	formats := map[string]*corev3.SubstitutionFormatString{
		"text": {Format: &corev3.SubstitutionFormatString_TextFormat{TextFormat: "%REQ(:METHOD)% %RESPONSE_CODE%\n"}},
		"json": {Format: &corev3.SubstitutionFormatString_JsonFormat{JsonFormat: jsonFormat}},
		"none": nil,
	}
	want := map[string]string{
		"text": "GET 200\n",
		"json": `{"code":200,"method":"GET"}` + "\n",
	}
	for name, lf := range formats {
		file, ok, err := lineLog(t, "typed_config", "", mustAny(t, fileWith(lf)), Options{})
		if !ok || err != nil {
			t.Fatalf("%s: file logger: ok %v, %v", name, ok, err)
		}
		fileLine := string(file.Format.Format(nil, testEntry()))
		if w, set := want[name]; set && fileLine != w {
			t.Errorf("%s: file logger line = %q; want %q", name, fileLine, w)
		}
		for _, c := range []struct {
			msg  proto.Message
			path string
		}{
			{stdoutWith(lf), StdoutPath},
			{stderrWith(lf), StderrPath},
		} {
			l, ok, err := lineLog(t, "typed_config", "", mustAny(t, c.msg), Options{})
			if !ok || err != nil {
				t.Fatalf("%s %s: ok %v, %v", name, c.path, ok, err)
			}
			if l.Path != c.path {
				t.Errorf("%s: path = %q; want %q", name, l.Path, c.path)
			}
			if got := string(l.Format.Format(nil, testEntry())); got != fileLine {
				t.Errorf("%s %s: line = %q; want the file logger's %q", name, c.path, got, fileLine)
			}
		}
	}
}

// The loggers with log_format f (none when nil).
func fileWith(f *corev3.SubstitutionFormatString) *filev3.FileAccessLog {
	m := &filev3.FileAccessLog{Path: "/tmp/x"}
	if f != nil {
		m.AccessLogFormat = &filev3.FileAccessLog_LogFormat{LogFormat: f}
	}
	return m
}

func stdoutWith(f *corev3.SubstitutionFormatString) *streamv3.StdoutAccessLog {
	m := &streamv3.StdoutAccessLog{}
	if f != nil {
		m.AccessLogFormat = &streamv3.StdoutAccessLog_LogFormat{LogFormat: f}
	}
	return m
}

func stderrWith(f *corev3.SubstitutionFormatString) *streamv3.StderrAccessLog {
	m := &streamv3.StderrAccessLog{}
	if f != nil {
		m.AccessLogFormat = &streamv3.StderrAccessLog_LogFormat{LogFormat: f}
	}
	return m
}

// TestLineLoggerErrors checks that bad stream and file loggers are refused with their
// field path and that other loggers are left to the caller.
func TestLineLoggerErrors(t *testing.T) {
	bad := stdoutWith(&corev3.SubstitutionFormatString{
		Format: &corev3.SubstitutionFormatString_TextFormat{TextFormat: "%NOT_AN_OPERATOR%"}})
	if _, ok, err := lineLog(t, "access_log[0].typed_config", "", mustAny(t, bad), Options{}); !ok || err == nil || !strings.Contains(err.Error(), "access_log[0].typed_config.log_format.text_format") {
		t.Errorf("bad stdout format: ok %v, err %v; want an error naming access_log[0].typed_config.log_format.text_format", ok, err)
	}
	if _, ok, err := lineLog(t, "typed_config", "", mustAny(t, &filev3.FileAccessLog{}), Options{}); !ok || err == nil || !strings.Contains(err.Error(), "typed_config.path") {
		t.Errorf("file without path: ok %v, err %v; want an error naming typed_config.path", ok, err)
	}
	if _, ok, err := lineLog(t, "typed_config", "", mustAny(t, &structpb.Struct{}), Options{}); ok || err != nil {
		t.Errorf("other logger: ok %v, err %v; want not handled", ok, err)
	}
}

// TestStdoutPathWritesDescriptor checks that the Manager writes /dev/stdout to the process's
// standard output (here a pipe the test reads) and that closing the log leaves it open.
func TestStdoutPathWritesDescriptor(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	saved := os.Stdout
	os.Stdout = w
	defer func() { os.Stdout = saved }()

	m := NewManager(FileOptions{})
	f, err := m.Open(StdoutPath)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write([]byte("GET 200\n")); err != nil {
		t.Fatal(err)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write([]byte("still open\n")); err != nil {
		t.Fatalf("stdout after the log closed: %v", err)
	}
	w.Close()
	sc := bufio.NewScanner(r)
	var lines []string
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	if strings.Join(lines, "|") != "GET 200|still open" {
		t.Errorf("stdout = %q; want the log line then the process's own", lines)
	}
}
