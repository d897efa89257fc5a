package logging

import (
	"flag"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

var update = flag.Bool("update", false, "rewrite golden files")

const usageBody = "\n" +
	"usage: /logging?<name>=<level> (change single level)\n" +
	"usage: /logging?paths=name1:level1,name2:level2,... (change multiple levels)\n" +
	"usage: /logging?level=<level> (change all levels)\n" +
	"levels: trace debug info warning error critical off \n"

// listing renders the expected component listing: every logger at def
// except those in changed.
func listing(def string, changed map[string]string) string {
	var b strings.Builder
	b.WriteString("active loggers:\n")
	for _, n := range componentNames {
		l := def
		if c, ok := changed[n]; ok {
			l = c
		}
		b.WriteString("  " + n + ": " + l + "\n")
	}
	b.WriteString("\n")
	return b.String()
}

func TestHandleQueryListingGolden(t *testing.T) {
	r, _ := newTestRegistry(t, Config{Out: discard{}})
	body, status := r.HandleQuery(nil)
	if status != http.StatusOK {
		t.Fatalf("status = %d; want 200", status)
	}
	golden := filepath.Join("testdata", "logging_list.golden")
	if *update {
		if err := os.WriteFile(golden, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(string(want), body); diff != "" {
		t.Errorf("listing (-want +got):\n%s", diff)
	}
}

func TestHandleQuery(t *testing.T) {
	type q = map[string][]string
	tests := []struct {
		name       string
		params     q
		wantStatus int
		wantErr    string // "" for success
		changed    map[string]string
		def        string
	}{
		{name: "no params", params: q{}, wantStatus: 200},
		{name: "empty level and paths dropped", params: q{"level": {""}, "paths": {""}}, wantStatus: 200},
		{name: "level", params: q{"level": {"debug"}}, wantStatus: 200, def: "debug"},
		{name: "level first value", params: q{"level": {"error", "trace"}}, wantStatus: 200, def: "error"},
		{name: "single", params: q{"upstream": {"trace"}}, wantStatus: 200, changed: map[string]string{"upstream": "trace"}},
		{name: "single with empty level param", params: q{"upstream": {"off"}, "level": {""}}, wantStatus: 200, changed: map[string]string{"upstream": "off"}},
		{name: "paths", params: q{"paths": {"upstream:debug,config:trace,,  ,admin:critical"}}, wantStatus: 200,
			changed: map[string]string{"upstream": "debug", "config": "trace", "admin": "critical"}},
		{name: "paths last duplicate wins", params: q{"paths": {"hc:debug,hc:error"}}, wantStatus: 200, changed: map[string]string{"hc": "error"}},
		{name: "two params", params: q{"level": {"info"}, "paths": {"hc:debug"}}, wantStatus: 400, wantErr: "invalid number of parameters"},
		{name: "two loggers", params: q{"hc": {"debug"}, "http": {"debug"}}, wantStatus: 400, wantErr: "invalid number of parameters"},
		{name: "bad level", params: q{"level": {"warn"}}, wantStatus: 400, wantErr: "unknown logger level"},
		{name: "bad single level", params: q{"upstream": {"loud"}}, wantStatus: 400, wantErr: "unknown logger level"},
		{name: "empty single level", params: q{"upstream": {""}}, wantStatus: 400, wantErr: "unknown logger level"},
		{name: "unknown single name", params: q{"nope": {"info"}}, wantStatus: 400, wantErr: "unknown logger name"},
		{name: "unknown name in paths changes nothing", params: q{"paths": {"upstream:debug,nope:info"}}, wantStatus: 400, wantErr: "unknown logger name"},
		{name: "bad level in paths changes nothing", params: q{"paths": {"upstream:debug,hc:loud"}}, wantStatus: 400, wantErr: "unknown logger level"},
		{name: "empty name", params: q{"paths": {":info"}}, wantStatus: 400, wantErr: "empty logger name or empty logger level"},
		{name: "empty level", params: q{"paths": {"upstream:"}}, wantStatus: 400, wantErr: "empty logger name or empty logger level"},
		{name: "no colon", params: q{"paths": {"upstream"}}, wantStatus: 400, wantErr: "empty logger name or empty logger level"},
		{name: "blank level", params: q{"paths": {"upstream: "}}, wantStatus: 400, wantErr: "empty logger name or empty logger level"},
		{name: "level with colon", params: q{"paths": {"upstream:info:x"}}, wantStatus: 400, wantErr: "unknown logger level"},
		{name: "name not trimmed", params: q{"paths": {" upstream:info"}}, wantStatus: 400, wantErr: "unknown logger name"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, _ := newTestRegistry(t, Config{Out: discard{}})
			body, status := r.HandleQuery(tt.params)
			def := tt.def
			if def == "" {
				def = "info"
			}
			want := listing(def, tt.changed)
			if tt.wantErr != "" {
				want = "error: " + tt.wantErr + "\n" + usageBody + listing("info", nil)
			}
			if status != tt.wantStatus {
				t.Errorf("status = %d; want %d", status, tt.wantStatus)
			}
			if diff := cmp.Diff(want, body); diff != "" {
				t.Errorf("body (-want +got):\n%s", diff)
			}
			// A second listing shows the state the first request left.
			after, _ := r.HandleQuery(nil)
			if tt.wantErr != "" {
				want = listing("info", nil)
			}
			if diff := cmp.Diff(want, after); diff != "" {
				t.Errorf("state after request (-want +got):\n%s", diff)
			}
		})
	}
}

func TestHandleQueryLogsChanges(t *testing.T) {
	r, out := newTestRegistry(t, Config{Format: "%n %l %v"})
	r.HandleQuery(map[string][]string{"paths": {"hc:debug"}})
	r.HandleQuery(map[string][]string{"level": {"warning"}})
	want := "admin info change log level: name='hc' level='debug'\nadmin info change all log levels: level='warning'\n"
	if got := out.String(); got != want {
		t.Errorf("log = %q; want %q", got, want)
	}
}

func FuzzHandleQuery(f *testing.F) {
	f.Add("paths", "upstream:debug,config:trace", false)
	f.Add("level", "trace", true)
	f.Add("upstream", "off", false)
	f.Add("paths", "*:debug,logging/*:trace,fuzz?:error", true)
	f.Fuzz(func(t *testing.T, key, value string, fine bool) {
		r, err := New(Config{FineGrain: fine, Out: discard{}})
		if err != nil {
			t.Fatal(err)
		}
		r.Logger("main").Infof("create a file logger")
		before, _ := r.HandleQuery(nil)
		body, status := r.HandleQuery(map[string][]string{key: {value}})
		after, _ := r.HandleQuery(nil)
		switch status {
		case http.StatusOK:
			if !strings.HasPrefix(body, "active loggers:\n") {
				t.Fatalf("200 body %q does not start with the listing", body)
			}
		case http.StatusBadRequest:
			if !strings.HasPrefix(body, "error: ") || !strings.HasSuffix(body, before) {
				t.Fatalf("400 body %q; want error text followed by the unchanged listing %q", body, before)
			}
			if after != before {
				t.Fatalf("a rejected request changed levels:\nbefore %q\nafter  %q", before, after)
			}
		default:
			t.Fatalf("status = %d", status)
		}
	})
}
