package logging

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// syncBuffer is a bytes.Buffer safe for concurrent writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

var fixedTime = time.Date(2026, time.September, 5, 4, 38, 9, 12_345_678, time.UTC)

func newTestRegistry(t *testing.T, cfg Config) (*Registry, *syncBuffer) {
	t.Helper()
	out := &syncBuffer{}
	if cfg.Out == nil && cfg.Path == "" {
		cfg.Out = out
	}
	cfg.Now = func() time.Time { return fixedTime }
	cfg.Location = time.UTC
	r, err := New(cfg)
	if err != nil {
		t.Fatalf("New(%+v): %v", cfg, err)
	}
	t.Cleanup(func() { _ = r.Close() })
	return r, out
}

// nextLine returns the line number after the caller's.
func nextLine() int {
	_, _, line, _ := runtime.Caller(1)
	return line + 1
}

func TestDefaultFormat(t *testing.T) {
	r, out := newTestRegistry(t, Config{})
	line := nextLine()
	r.Logger("upstream").Infof("hello %d", 1)
	want := regexp.MustCompile(`^\[2026-09-05 04:38:09\.012\]\[\d+\]\[info\]\[upstream\] \[logging/registry_test\.go:` +
		fmt.Sprint(line) + `\] hello 1\n$`)
	if got := out.String(); !want.MatchString(got) {
		t.Errorf("log line = %q; want match of %s", got, want)
	}
}

func TestFormatsThroughRegistry(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
		msg  string
		want string
	}{
		{"custom", Config{Format: "%L %n %!: %v"}, "x", "I admin TestFormatsThroughRegistry.func1: x\n"},
		{"escaped", Config{Format: "%l %v", Escaped: true}, "a\nb\t\"q\"", `info a\nb\t\"q\"` + "\n"},
		{"newline flag", Config{Format: "%_"}, "a\nb", `a\nb` + "\n"},
		{"json", Config{JSONFormat: map[string]any{"level": "%l", "message": "%j", "n": float64(1), "z": map[string]any{"a": "<%n>"}}},
			"say \"hi\"\n", `{"level":"info","message":"say \"hi\"\n","n":1,"z":{"a":"<admin>"}}` + "\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, out := newTestRegistry(t, tt.cfg)
			r.Logger("admin").Infof("%s", tt.msg)
			if got := out.String(); got != tt.want {
				t.Errorf("got %q; want %q", got, tt.want)
			}
		})
	}
}

func TestJSONFormatErrors(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
		want string
	}{
		{"payload flag", Config{JSONFormat: map[string]any{"m": "%v"}}, "usage of %v is unavailable for JSON log formats"},
		{"newline flag", Config{JSONFormat: map[string]any{"m": "%_"}}, "usage of %_ is unavailable for JSON log formats"},
		{"with log format", Config{Format: "%v", JSONFormat: map[string]any{"m": "%j"}}, "only one of application_log_config.log_format or the --log-format option"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := New(tt.cfg)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("New() error = %v; want one containing %q", err, tt.want)
			}
		})
	}
}

func TestLevels(t *testing.T) {
	r, out := newTestRegistry(t, Config{Level: "warn", ComponentLevels: "upstream:debug,config:off", Format: "%n %l %v"})
	up, cfg, main := r.Logger("upstream"), r.Logger("config"), r.Logger("main")
	up.Tracef("no")
	up.Debugf("up debug")
	cfg.Criticalf("no")
	main.Infof("no")
	main.Warnf("main warning")
	main.Errorf("main error")
	main.Criticalf("main critical")
	main.Logf(Off, "no")
	want := "upstream debug up debug\nmain warning main warning\nmain error main error\nmain critical main critical\n"
	if got := out.String(); got != want {
		t.Errorf("log = %q; want %q", got, want)
	}
	for _, tt := range []struct {
		l     *Logger
		level Level
		want  bool
	}{
		{up, Trace, false}, {up, Debug, true}, {cfg, Critical, false}, {main, Info, false}, {main, Warning, true}, {main, Off, false},
	} {
		if got := tt.l.Enabled(tt.level); got != tt.want {
			t.Errorf("%s.Enabled(%s) = %v; want %v", tt.l.Name(), tt.level, got, tt.want)
		}
	}
	if got := r.Logger("no-such-component").Name(); got != "misc" {
		t.Errorf("Logger(unknown).Name() = %q; want misc", got)
	}
}

func TestNilLogger(t *testing.T) {
	var l *Logger
	l.Infof("nothing %d", 1)
	if l.Enabled(Critical) || l.Level() != Off || l.Name() != "" {
		t.Errorf("nil logger: Enabled=%v Level=%v Name=%q; want false, off, empty", l.Enabled(Critical), l.Level(), l.Name())
	}
}

func TestParseLevel(t *testing.T) {
	for _, tt := range []struct {
		in      string
		want    Level
		wantErr bool
	}{
		{"trace", Trace, false}, {"debug", Debug, false}, {"info", Info, false}, {"warning", Warning, false},
		{"warn", Warning, false}, {"error", Error, false}, {"critical", Critical, false}, {"off", Off, false},
		{"INFO", 0, true}, {"", 0, true}, {"err", 0, true},
	} {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseLevel(tt.in)
			if (err != nil) != tt.wantErr || got != tt.want {
				t.Errorf("ParseLevel(%q) = %v, %v; want %v, error %v", tt.in, got, err, tt.want, tt.wantErr)
			}
		})
	}
}

func TestConfigErrors(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
		want string
	}{
		{"level", Config{Level: "loud"}, `--log-level: log level "loud" is not valid`},
		{"component entry", Config{ComponentLevels: "upstream"}, "component log level not correctly specified 'upstream'"},
		{"component extra colon", Config{ComponentLevels: "upstream:info:x"}, "component log level not correctly specified 'upstream:info:x'"},
		{"component level", Config{ComponentLevels: "upstream:loud"}, "invalid log level specified 'loud'"},
		{"component name", Config{ComponentLevels: "upstream:info,nope:info"}, "invalid component specified 'nope'"},
		{"path", Config{Path: "/nonexistent-dir/x.log"}, `--log-path = "/nonexistent-dir/x.log"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := New(tt.cfg)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("New() error = %v; want one containing %q", err, tt.want)
			}
		})
	}
}

func TestReopenAfterRename(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "legate.log")
	r, _ := newTestRegistry(t, Config{Path: path, Format: "%v"})
	lg := r.Logger("main")
	lg.Infof("before rotation")
	rotated := path + ".1"
	if err := os.Rename(path, rotated); err != nil {
		t.Fatal(err)
	}
	lg.Infof("after rename, before reopen")
	if err := r.Reopen(); err != nil {
		t.Fatalf("Reopen() = %v", err)
	}
	lg.Infof("after reopen")
	for _, tt := range []struct{ file, want string }{
		{rotated, "before rotation\nafter rename, before reopen\n"},
		{path, "after reopen\n"},
	} {
		b, err := os.ReadFile(tt.file)
		if err != nil {
			t.Fatal(err)
		}
		if got := string(b); got != tt.want {
			t.Errorf("%s = %q; want %q", filepath.Base(tt.file), got, tt.want)
		}
	}
}

func TestReopenFailureKeepsOldFile(t *testing.T) {
	dir := t.TempDir()
	sub := filepath.Join(dir, "sub")
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(sub, "legate.log")
	r, _ := newTestRegistry(t, Config{Path: path, Format: "%v"})
	if err := os.Rename(sub, filepath.Join(dir, "moved")); err != nil {
		t.Fatal(err)
	}
	if err := r.Reopen(); err == nil {
		t.Fatal("Reopen() with a missing directory = nil; want an error")
	}
	r.Logger("main").Infof("still written")
	b, err := os.ReadFile(filepath.Join(dir, "moved", "legate.log"))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(b), "still written\n"; got != want {
		t.Errorf("old file = %q; want %q", got, want)
	}
}

func TestReopenWithoutPath(t *testing.T) {
	r, _ := newTestRegistry(t, Config{})
	if err := r.Reopen(); err != nil {
		t.Errorf("Reopen() without a log path = %v; want nil", err)
	}
}

func TestConcurrentLogging(t *testing.T) {
	r, out := newTestRegistry(t, Config{Format: "%n %v"})
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			lg := r.Logger(componentNames[g])
			for i := range 50 {
				lg.Infof("message %d", i)
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for range 20 {
			r.HandleQuery(map[string][]string{"level": {"info"}})
		}
	}()
	wg.Wait()
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	var got int
	for _, l := range lines {
		if strings.Contains(l, " message ") {
			got++
		}
	}
	if got != 400 {
		t.Errorf("got %d message lines; want 400", got)
	}
}

func TestComponentNames(t *testing.T) {
	names := ComponentNames()
	if len(names) != 68 || names[0] != "admin" || names[len(names)-1] != "dynamic_modules" {
		t.Errorf("ComponentNames() = %d names from %q to %q; want 68 from admin to dynamic_modules", len(names), names[0], names[len(names)-1])
	}
	seen := map[string]bool{}
	for _, n := range names {
		if seen[n] {
			t.Errorf("component %q listed twice", n)
		}
		seen[n] = true
	}
	if diff := cmp.Diff(names[38:42], []string{"main", "matcher", "mcp", "misc"}); diff != "" {
		t.Errorf("names[38:42] (-got +want):\n%s", diff)
	}
}

func TestDisabledLogDoesNotAllocate(t *testing.T) {
	r, _ := newTestRegistry(t, Config{Level: "info"})
	lg := r.Logger("upstream")
	n := 7
	allocs := testing.AllocsPerRun(100, func() {
		if lg.Enabled(Debug) {
			lg.Debugf("never %d", n)
		}
		lg.Tracef("never")
	})
	if allocs != 0 {
		t.Errorf("disabled log call: %v allocations; want 0", allocs)
	}
}

func BenchmarkDisabled(b *testing.B) {
	r, err := New(Config{Level: "info", Out: &bytes.Buffer{}})
	if err != nil {
		b.Fatal(err)
	}
	lg := r.Logger("upstream")
	b.ReportAllocs()
	for b.Loop() {
		lg.Debugf("x %d", 1)
	}
}

func BenchmarkDisabledFineGrain(b *testing.B) {
	r, err := New(Config{Level: "info", FineGrain: true, Out: &bytes.Buffer{}})
	if err != nil {
		b.Fatal(err)
	}
	lg := r.Logger("upstream")
	b.ReportAllocs()
	for b.Loop() {
		lg.Debugf("x")
	}
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }

func BenchmarkEnabledDefaultFormat(b *testing.B) {
	r, err := New(Config{Level: "info", Out: discard{}})
	if err != nil {
		b.Fatal(err)
	}
	lg := r.Logger("upstream")
	b.ReportAllocs()
	for b.Loop() {
		lg.Infof("cluster %s added", "web")
	}
}

func BenchmarkEnabledNoThreadID(b *testing.B) {
	r, err := New(Config{Level: "info", Format: "[%Y-%m-%d %T.%e][%l][%n] [%g:%#] %v", Out: discard{}})
	if err != nil {
		b.Fatal(err)
	}
	lg := r.Logger("upstream")
	b.ReportAllocs()
	for b.Loop() {
		lg.Infof("cluster %s added", "web")
	}
}
