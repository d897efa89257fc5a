package logging

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/legateproxy/legate/internal/clock"
)

// DefaultFormat is Envoy's default --log-format.
const DefaultFormat = "[%Y-%m-%d %T.%e][%t][%l][%n] [%g:%#] %v"

// DefaultFineGrainFormat replaces DefaultFormat when fine-grain logging is on
// (the logger name is the file, already printed by %g).
const DefaultFineGrainFormat = "[%Y-%m-%d %T.%e][%t][%l] [%g:%#] %v"

// Config is the logging part of Envoy's command line and bootstrap.
type Config struct {
	// Level is -l/--log-level; "" means "info".
	Level string
	// ComponentLevels is --component-log-level: "upstream:debug,config:trace".
	ComponentLevels string
	// Format is --log-format; "" means DefaultFormat.
	Format string
	// Escaped is --log-format-escaped: C-escape each line except its newline.
	Escaped bool
	// Path is --log-path; "" writes to Out.
	Path string
	// FineGrain is --enable-fine-grain-logging.
	FineGrain bool
	// JSONFormat is the bootstrap's application_log_config.log_format
	// .json_format (a google.protobuf.Struct as plain Go values, as
	// structpb.Struct.AsMap returns). It cannot be combined with Format.
	JSONFormat map[string]any
	// Out receives the log when Path is empty; nil means os.Stderr.
	Out io.Writer
	// Now is the clock for timestamps; nil means the system clock.
	Now func() time.Time
	// Location is the time zone of timestamps; nil means time.Local, as
	// spdlog prints local time.
	Location *time.Location
}

// Registry holds every component logger, the fine-grain loggers, the compiled
// format and the output sink (Envoy's Logger::Registry and Context). Safe for
// concurrent use.
type Registry struct {
	loggers    []*Logger // componentNames order
	byName     map[string]*Logger
	pattern    *pattern
	escaped    bool
	fineGrain  bool
	path       string
	now        func() time.Time
	loc        *time.Location
	pid        int
	moduleRoot string
	bufs       sync.Pool // *[]byte

	sinkMu sync.Mutex // guards out and file
	out    io.Writer
	file   *os.File // non-nil when writing to Path

	sitesMu sync.Mutex // serialises writers of sites
	sites   atomic.Pointer[map[uintptr]*site]

	fineMu       sync.Mutex // guards files, updates, defaultLevel
	files        map[string]*fileLogger
	updates      []globUpdate
	defaultLevel Level
}

// ComponentLevel is one entry of --component-log-level.
type ComponentLevel struct {
	Name  string
	Level Level
}

// ParseComponentLevels parses --component-log-level ("name:level,…") with
// Envoy's checks: each entry has exactly one ':', a known level and a known
// component name.
func ParseComponentLevels(s string) ([]ComponentLevel, error) {
	if s == "" {
		return nil, nil
	}
	var out []ComponentLevel
	for _, entry := range strings.Split(s, ",") {
		parts := strings.Split(entry, ":")
		if len(parts) != 2 {
			return nil, fmt.Errorf("--component-log-level = %q: component log level not correctly specified '%s'", s, entry)
		}
		level, err := ParseLevel(parts[1])
		if err != nil {
			return nil, fmt.Errorf("--component-log-level = %q: invalid log level specified '%s'", s, parts[1])
		}
		if !isComponent(parts[0]) {
			return nil, fmt.Errorf("--component-log-level = %q: invalid component specified '%s'", s, parts[0])
		}
		out = append(out, ComponentLevel{Name: parts[0], Level: level})
	}
	return out, nil
}

func isComponent(name string) bool {
	for _, n := range componentNames {
		if n == name {
			return true
		}
	}
	return false
}

// New validates cfg and builds the registry, opening Path when set.
func New(cfg Config) (*Registry, error) {
	level := Info
	if cfg.Level != "" {
		l, err := ParseLevel(cfg.Level)
		if err != nil {
			return nil, fmt.Errorf("--log-level: %w", err)
		}
		level = l
	}
	components, err := ParseComponentLevels(cfg.ComponentLevels)
	if err != nil {
		return nil, err
	}
	format := cfg.Format
	if cfg.JSONFormat != nil {
		if format != "" && format != DefaultFormat {
			return nil, errors.New("application_log_config.log_format: only one of application_log_config.log_format or the --log-format option can be specified")
		}
		format, err = jsonPattern(cfg.JSONFormat)
		if err != nil {
			return nil, err
		}
	}
	if format == "" {
		format = DefaultFormat
	}
	if cfg.FineGrain && format == DefaultFormat {
		format = DefaultFineGrainFormat
	}
	r := &Registry{
		byName:       make(map[string]*Logger, len(componentNames)),
		escaped:      cfg.Escaped,
		fineGrain:    cfg.FineGrain,
		path:         cfg.Path,
		now:          cfg.Now,
		loc:          cfg.Location,
		pid:          os.Getpid(),
		moduleRoot:   moduleRoot(),
		out:          cfg.Out,
		files:        make(map[string]*fileLogger),
		defaultLevel: level,
	}
	if r.now == nil {
		r.now = clock.Real().Now
	}
	if r.loc == nil {
		r.loc = time.Local
	}
	if r.out == nil {
		r.out = os.Stderr
	}
	r.pattern = compilePattern(format, r.now())
	if cfg.Path != "" {
		f, err := openLog(cfg.Path)
		if err != nil {
			return nil, fmt.Errorf("--log-path = %q: %w", cfg.Path, err)
		}
		r.file, r.out = f, f
	}
	for _, name := range componentNames {
		l := &Logger{reg: r, name: name}
		l.level.Store(int32(level))
		r.loggers = append(r.loggers, l)
		r.byName[name] = l
	}
	for _, c := range components {
		r.byName[c.Name].level.Store(int32(c.Level))
	}
	return r, nil
}

func openLog(path string) (*os.File, error) {
	return os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
}

// Logger returns the component logger with the given name ("admin", "main",
// "upstream", "config", "runtime", …). A name Envoy does not have gets the
// "misc" logger, since /logging lists exactly Envoy's loggers.
func (r *Registry) Logger(component string) *Logger {
	if l, ok := r.byName[component]; ok {
		return l
	}
	return r.byName["misc"]
}

// FineGrain reports whether loggers are per source file.
func (r *Registry) FineGrain() bool { return r.fineGrain }

// Reopen reopens the --log-path file, for log rotation (POST /reopen_logs,
// SIGUSR1): after a rename the log goes to a new file at the path. When the
// path cannot be opened the old file is kept and the error returned. Without
// a log path it does nothing.
func (r *Registry) Reopen() error {
	if r.path == "" {
		return nil
	}
	f, err := openLog(r.path)
	if err != nil {
		return fmt.Errorf("reopen --log-path %q: %w", r.path, err)
	}
	r.sinkMu.Lock()
	old := r.file
	r.file, r.out = f, f
	r.sinkMu.Unlock()
	return old.Close()
}

// Close closes the log file, if any. Later messages are dropped.
func (r *Registry) Close() error {
	r.sinkMu.Lock()
	defer r.sinkMu.Unlock()
	if r.file == nil {
		return nil
	}
	err := r.file.Close()
	r.file = nil
	r.out = io.Discard
	return err
}

// emit formats one message and writes it as a single line.
func (r *Registry) emit(level Level, name string, s *site, msg string) {
	rec := record{
		time:  r.now().In(r.loc),
		level: level,
		name:  name,
		msg:   msg,
		pid:   r.pid,
	}
	if r.pattern.needsTID {
		rec.tid = threadID()
	}
	if s != nil {
		rec.file, rec.line, rec.fn = s.file, s.line, s.fn
	}
	bp, _ := r.bufs.Get().(*[]byte)
	if bp == nil {
		bp = new([]byte)
	}
	buf := r.pattern.format((*bp)[:0], &rec)
	keep := buf
	if r.escaped {
		buf = appendEscaped(make([]byte, 0, len(buf)+16), buf, cEscapes)
	}
	buf = append(buf, '\n')
	r.sinkMu.Lock()
	_, _ = r.out.Write(buf)
	r.sinkMu.Unlock()
	if !r.escaped {
		keep = buf
	}
	if cap(keep) <= 64<<10 {
		*bp = keep[:0]
		r.bufs.Put(bp)
	}
}
