package logging

import (
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

const (
	keyTest   = "logging/finegrain_test.go"
	keyHelper = "logging/finegrain_helper_test.go"
	keyQuery  = "logging/query.go"
)

func fineListing(lines ...string) string {
	return "active loggers:\n" + strings.Join(lines, "\n") + "\n"
}

func TestFineGrainGlobs(t *testing.T) {
	type q = map[string][]string
	tests := []struct {
		name   string
		params []q // applied in order
		want   map[string]string
	}{
		{"stem basename", []q{{"paths": {"finegrain_test:debug"}}},
			map[string]string{keyTest: "debug", keyHelper: "info", keyQuery: "info"}},
		{"basename with extension", []q{{"paths": {"finegrain_helper_test.go:trace"}}},
			map[string]string{keyTest: "info", keyHelper: "trace", keyQuery: "info"}},
		{"single form", []q{{"finegrain_test": {"error"}}},
			map[string]string{keyTest: "error", keyHelper: "info", keyQuery: "info"}},
		{"path glob", []q{{"paths": {"logging/*:warning"}}},
			map[string]string{keyTest: "warning", keyHelper: "warning", keyQuery: "warning"}},
		{"path question mark on stem", []q{{"paths": {"logging/finegrain_t?st:critical"}}},
			map[string]string{keyTest: "critical", keyHelper: "info", keyQuery: "info"}},
		{"star in basename", []q{{"paths": {"finegrain*:debug"}}},
			map[string]string{keyTest: "debug", keyHelper: "debug", keyQuery: "info"}},
		{"first match wins", []q{{"paths": {"finegrain_test:error,finegrain*:debug"}}},
			map[string]string{keyTest: "error", keyHelper: "debug", keyQuery: "info"}},
		{"shadowed entry dropped", []q{{"paths": {"finegrain*:debug,finegrain_test:error"}}},
			map[string]string{keyTest: "debug", keyHelper: "debug", keyQuery: "info"}},
		{"no match is not an error", []q{{"paths": {"nothing_here:trace"}}},
			map[string]string{keyTest: "info", keyHelper: "info", keyQuery: "info"}},
		{"update resets unmatched to default", []q{{"paths": {"finegrain_test:debug"}}, {"paths": {"query:trace"}}},
			map[string]string{keyTest: "info", keyHelper: "info", keyQuery: "trace"}},
		{"level sets default and clears globs", []q{{"paths": {"finegrain_test:debug"}}, {"level": {"warning"}}},
			map[string]string{keyTest: "warning", keyHelper: "warning", keyQuery: "warning"}},
		{"glob after level resets to new default", []q{{"level": {"error"}}, {"paths": {"query:info"}}},
			map[string]string{keyTest: "error", keyHelper: "error", keyQuery: "info"}},
		{"star matches everything", []q{{"paths": {"*:off"}}},
			map[string]string{keyTest: "off", keyHelper: "off", keyQuery: "off"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, _ := newTestRegistry(t, Config{FineGrain: true, Out: discard{}})
			lg := r.Logger("upstream")
			lg.Debugf("create this file's logger")
			helperLog(lg, "create the helper's logger")
			for _, p := range tt.params {
				if _, status := r.HandleQuery(p); status != http.StatusOK {
					t.Fatalf("HandleQuery(%v) status = %d; want 200", p, status)
				}
			}
			body, _ := r.HandleQuery(nil)
			want := fineListing(
				"  "+keyHelper+": "+tt.want[keyHelper],
				"  "+keyTest+": "+tt.want[keyTest],
				"  "+keyQuery+": "+tt.want[keyQuery],
			)
			if diff := cmp.Diff(want, body); diff != "" {
				t.Errorf("listing (-want +got):\n%s", diff)
			}
		})
	}
}

func TestFineGrainListingEmpty(t *testing.T) {
	r, _ := newTestRegistry(t, Config{FineGrain: true})
	if body, _ := r.HandleQuery(nil); body != "active loggers:\n\n" {
		t.Errorf("listing = %q; want %q", body, "active loggers:\n\n")
	}
}

func TestFineGrainErrors(t *testing.T) {
	r, _ := newTestRegistry(t, Config{FineGrain: true, Out: discard{}})
	r.Logger("main").Infof("x")
	for _, tt := range []struct {
		name   string
		params map[string][]string
		want   string
	}{
		{"bad level", map[string][]string{"paths": {"a:debug,b:loud"}}, "unknown logger level"},
		{"empty name", map[string][]string{"paths": {":debug"}}, "empty logger name or empty logger level"},
		{"two params", map[string][]string{"a": {"debug"}, "b": {"info"}}, "invalid number of parameters"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			body, status := r.HandleQuery(tt.params)
			want := "error: " + tt.want + "\n" + usageBody + fineListing("  "+keyTest+": info")
			if status != http.StatusBadRequest {
				t.Errorf("status = %d; want 400", status)
			}
			if diff := cmp.Diff(want, body); diff != "" {
				t.Errorf("body (-want +got):\n%s", diff)
			}
		})
	}
}

func TestFineGrainOutputAndEnabled(t *testing.T) {
	r, out := newTestRegistry(t, Config{FineGrain: true, Format: "%n %l %v"})
	lg := r.Logger("upstream")
	helperLog(lg, "hidden at info")
	r.HandleQuery(map[string][]string{"paths": {"finegrain_helper_test:debug"}})
	helperLog(lg, "shown")
	lg.Debugf("hidden: this file stays at info")
	if !helperEnabled(lg, Debug) {
		t.Error("helperEnabled(Debug) = false; want true after the glob update")
	}
	if lg.Enabled(Debug) {
		t.Error("Enabled(Debug) from the test file = true; want false")
	}
	want := keyQuery + " info adding fine-grain log update, glob='finegrain_helper_test' level='debug'\n" +
		keyHelper + " debug shown\n"
	if got := out.String(); got != want {
		t.Errorf("log = %q; want %q", got, want)
	}
}

func TestFineGrainNewLoggerTakesCurrentSettings(t *testing.T) {
	r, _ := newTestRegistry(t, Config{FineGrain: true, Level: "error", Out: discard{}})
	r.HandleQuery(map[string][]string{"paths": {"finegrain_helper_test:trace"}})
	lg := r.Logger("main")
	helperLog(lg, "first call creates the logger")
	lg.Infof("so does this one")
	body, _ := r.HandleQuery(nil)
	want := fineListing("  "+keyHelper+": trace", "  "+keyTest+": error", "  "+keyQuery+": error")
	if diff := cmp.Diff(want, body); diff != "" {
		t.Errorf("listing (-want +got):\n%s", diff)
	}
}

func TestFineGrainDefaultFormat(t *testing.T) {
	r, out := newTestRegistry(t, Config{FineGrain: true})
	line := nextLine()
	r.Logger("main").Warnf("w")
	want := "[2026-09-05 04:38:09.012]"
	got := out.String()
	if !strings.HasPrefix(got, want) || !strings.HasSuffix(got, "][warning] ["+keyTest+":"+strconv.Itoa(line)+"] w\n") {
		t.Errorf("line = %q; want the fine-grain default format", got)
	}
}

func TestGlobMatch(t *testing.T) {
	for _, tt := range []struct {
		pattern, s string
		want       bool
	}{
		{"", "", true}, {"*", "", true}, {"**", "", true}, {"", "a", false}, {"a", "", false},
		{"abc", "abc", true}, {"a?c", "abc", true}, {"a?c", "ac", false}, {"a*", "a/b/c", true},
		{"*c", "abc", true}, {"*b*", "abc", true}, {"a*d", "abc", false}, {"*.go", "x.go", true},
		{"a*b*c", "aXbYbZc", true}, {"a*a*a*a*b", strings.Repeat("a", 40), false}, {"*", "*", true}, {"\\*", "x", false},
	} {
		if got := globMatch(tt.pattern, tt.s); got != tt.want {
			t.Errorf("globMatch(%q, %q) = %v; want %v", tt.pattern, tt.s, got, tt.want)
		}
	}
}
