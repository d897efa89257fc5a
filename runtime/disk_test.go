package runtime

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"

	"github.com/legateproxy/legate/internal/clock"
	"github.com/legateproxy/legate/internal/clock/clocktest"
)

func TestDiskValues(t *testing.T) {
	root := diskRoot(t, map[string]string{
		"plain":               "42\n",
		"spaces":              "  hello world  \t\n\n",
		"comment_only":        "# placeholder\n",
		"comment_then_value":  "# why\n10\n",
		"value_then_comment":  "10\n# why\n",
		"multi":               "a\n\nb\nc  \n",
		"repeated_last":       "x \ny\nx \n",
		"nested/dir/leaf":     "deep",
		"upstream/zone.cfg":   "dotted name",
		".hidden":             "kept",
		"empty":               "",
		"health_check/min_ms": "1000",
	})
	r := mustNew(t, Config{Layers: []LayerConfig{{Name: "disk", Disk: &DiskLayer{SymlinkRoot: root}}}})
	want := map[string]string{
		"plain": "42", "spaces": "  hello world", "comment_only": "", "comment_then_value": "10",
		"value_then_comment": "10\n", "multi": "a\nb\nc", "repeated_last": "xy\nx",
		"nested.dir.leaf": "deep", "upstream.zone.cfg": "dotted name", ".hidden": "kept", "empty": "",
		"health_check.min_ms": "1000",
	}
	got := map[string]string{}
	for _, e := range r.Snapshot().View().Entries {
		got[e.Key] = e.LayerValues[0]
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("disk values (-want +got):\n%s", diff)
	}
	if v := r.Snapshot().Uint64("value_then_comment", 0); v != 10 {
		t.Errorf("Uint64(value_then_comment) = %d; want 10", v)
	}
}

func TestDiskPathAndStats(t *testing.T) {
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{
		"root/envoy/k":         "base",
		"root/envoy/web/k":     "cluster",
		"root/envoy_override/": "",
	})
	if err := os.Remove(filepath.Join(dir, "root/envoy_override")); err != nil {
		t.Fatal(err)
	}
	root := filepath.Join(dir, "root")
	tests := []struct {
		name          string
		layers        []LayerConfig
		wantLayers    []string
		wantK         string
		wantOverride  uint64
		wantNoOverrid uint64
		wantErr       uint64
	}{
		{"subdirectory", []LayerConfig{{Name: "d", Disk: &DiskLayer{SymlinkRoot: root, Subdirectory: "envoy"}}},
			[]string{"d"}, "base", 0, 1, 0},
		{"service cluster", []LayerConfig{{Name: "d", Disk: &DiskLayer{SymlinkRoot: root, Subdirectory: "envoy", AppendServiceCluster: true}}},
			[]string{"d"}, "cluster", 0, 1, 0},
		{"missing directory is skipped", []LayerConfig{
			{Name: "d", Disk: &DiskLayer{SymlinkRoot: root, Subdirectory: "envoy"}},
			{Name: "o", Disk: &DiskLayer{SymlinkRoot: root, Subdirectory: "envoy_override"}},
			{Name: "admin", Admin: true}},
			[]string{"d", "admin"}, "base", 0, 1, 0},
		{"two disk layers count an override dir", []LayerConfig{
			{Name: "d", Disk: &DiskLayer{SymlinkRoot: root, Subdirectory: "envoy"}},
			{Name: "o", Disk: &DiskLayer{SymlinkRoot: root, Subdirectory: "envoy/web"}}},
			[]string{"d", "o"}, "cluster", 1, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := &Stats{}
			r := mustNew(t, Config{Stats: st, ServiceCluster: "web", Layers: tt.layers})
			v := r.Snapshot().View()
			if diff := cmp.Diff(tt.wantLayers, v.Layers); diff != "" {
				t.Errorf("layers (-want +got):\n%s", diff)
			}
			if got, _ := r.Snapshot().Get("k"); got != tt.wantK {
				t.Errorf("k = %q; want %q", got, tt.wantK)
			}
			got := []uint64{st.OverrideDirExists.Value(), st.OverrideDirNotExists.Value(), st.LoadError.Value(), st.LoadSuccess.Value(), st.NumLayers.Value()}
			want := []uint64{tt.wantOverride, tt.wantNoOverrid, tt.wantErr, 1, uint64(len(tt.wantLayers))}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("[override_dir_exists override_dir_not_exists load_error load_success num_layers] (-want +got):\n%s", diff)
			}
		})
	}
}

func TestDiskLoadErrorSkipsLayer(t *testing.T) {
	deep := strings.Repeat("d/", maxWalkDepth) + "leaf"
	root := diskRoot(t, map[string]string{deep: "x", "ok": "1"})
	st := &Stats{}
	r := mustNew(t, Config{Stats: st, Layers: []LayerConfig{
		{Name: "disk", Disk: &DiskLayer{SymlinkRoot: root}},
		{Name: "admin", Admin: true},
	}})
	if got := r.Snapshot().View().Layers; !cmp.Equal(got, []string{"admin"}) {
		t.Errorf("layers = %v; want [admin] (the unreadable disk layer is skipped)", got)
	}
	if st.LoadError.Value() != 1 || st.LoadSuccess.Value() != 0 {
		t.Errorf("load_error = %d, load_success = %d; want 1, 0", st.LoadError.Value(), st.LoadSuccess.Value())
	}
	bad := diskRoot(t, map[string]string{"k": "a: b: c"})
	r = mustNew(t, Config{Stats: st, Layers: []LayerConfig{{Name: "disk", Disk: &DiskLayer{SymlinkRoot: bad}}}})
	if n := len(r.Snapshot().View().Layers); n != 0 {
		t.Errorf("a file that is not YAML loaded its layer (%d layers); want it skipped", n)
	}
}

func TestStatsGauges(t *testing.T) {
	st := &Stats{}
	r := mustNew(t, Config{Stats: st, Layers: []LayerConfig{
		{Name: "s", Static: map[string]any{"a": "1", "b": "2"}},
		{Name: "admin", Admin: true},
	}})
	if err := r.Modify(map[string]string{"b": "3", "c": "4"}); err != nil {
		t.Fatal(err)
	}
	got := []uint64{st.NumKeys.Value(), st.NumLayers.Value(), st.AdminOverridesActive.Value(), st.LoadSuccess.Value()}
	if want := []uint64{3, 2, 1, 2}; !cmp.Equal(got, want) {
		t.Errorf("[num_keys num_layers admin_overrides_active load_success] = %v; want %v", got, want)
	}
}

// fakeTicker is a Ticker whose ticks the test sends. Sends block until Run
// takes them, so a second send proves the first was fully handled.
type fakeTicker struct {
	c       chan time.Time
	stopped chan struct{}
}

func (f *fakeTicker) C() <-chan time.Time { return f.c }
func (f *fakeTicker) Stop()               { close(f.stopped) }

// tickerClock is a fake clock whose one ticker is ticker.
type tickerClock struct {
	*clocktest.Fake
	ticker *fakeTicker
}

func (c tickerClock) NewTicker(time.Duration) clock.Ticker { return c.ticker }

func (f *fakeTicker) tick(t *testing.T) {
	t.Helper()
	select {
	case f.c <- time.Time{}:
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not take a tick")
	}
}

func waitChanged(t *testing.T, ch <-chan struct{}) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(10 * time.Second):
		t.Fatal("no new snapshot was published")
	}
}

// swapLink points the symlink at target atomically: a new link is renamed
// over the old one, as runtime deployment tools do.
func swapLink(t *testing.T, link, target string) {
	t.Helper()
	tmp := link + ".tmp"
	if err := os.Symlink(target, tmp); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, link); err != nil {
		t.Fatal(err)
	}
}

func TestDiskSymlinkSwapWhileReading(t *testing.T) {
	defer goleak.VerifyNone(t)
	dir := t.TempDir()
	const keys = 20
	v1, v2 := map[string]string{}, map[string]string{}
	for i := range keys {
		k := "k" + string(rune('a'+i))
		v1[k], v2["sub/"+k] = "1", "2"
		v2[k] = "2"
	}
	writeTree(t, filepath.Join(dir, "v1"), v1)
	writeTree(t, filepath.Join(dir, "v2"), v2)
	link := filepath.Join(dir, "current")
	if err := os.Symlink(filepath.Join(dir, "v1"), link); err != nil {
		t.Fatal(err)
	}
	ticker := &fakeTicker{c: make(chan time.Time), stopped: make(chan struct{})}
	st := &Stats{}
	r := mustNew(t, Config{Stats: st, Clock: tickerClock{clocktest.NewFake(time.Unix(0, 0)), ticker},
		Layers: []LayerConfig{{Name: "disk", Disk: &DiskLayer{SymlinkRoot: link}}}})

	ctx, cancel := context.WithCancel(context.Background())
	runDone := make(chan error, 1)
	go func() { runDone <- r.Run(ctx) }()

	// Readers check that every snapshot is wholly v1 or wholly v2.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var torn sync.Once
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				s := r.Snapshot()
				first, _ := s.Get("ka")
				for i := range keys {
					if v, _ := s.Get("k" + string(rune('a'+i))); v != first {
						torn.Do(func() { t.Errorf("torn snapshot: ka=%q but k%c=%q", first, 'a'+i, v) })
					}
				}
			}
		}()
	}

	ticker.tick(t) // nothing changed
	ticker.tick(t) // the first tick has been handled
	if got := st.LoadSuccess.Value(); got != 1 {
		t.Errorf("load_success after ticks without a swap = %d; want 1", got)
	}
	changed := r.Changed()
	swapLink(t, link, filepath.Join(dir, "v2"))
	ticker.tick(t)
	waitChanged(t, changed)
	s := r.Snapshot()
	if got, _ := s.Get("kt"); got != "2" {
		t.Errorf("kt after swap = %q; want 2", got)
	}
	if got, _ := s.Get("sub.ka"); got != "2" {
		t.Errorf("sub.ka after swap = %q; want 2", got)
	}
	if got := st.NumKeys.Value(); got != 2*keys {
		t.Errorf("num_keys = %d; want %d", got, 2*keys)
	}

	// Swapping back, and removing the link, are changes too.
	changed = r.Changed()
	swapLink(t, link, filepath.Join(dir, "v1"))
	ticker.tick(t)
	waitChanged(t, changed)
	if got, _ := r.Snapshot().Get("ka"); got != "1" {
		t.Errorf("ka after swapping back = %q; want 1", got)
	}
	changed = r.Changed()
	if err := os.Remove(link); err != nil {
		t.Fatal(err)
	}
	ticker.tick(t)
	waitChanged(t, changed)
	if n := len(r.Snapshot().View().Layers); n != 0 {
		t.Errorf("layers after removing the link = %d; want 0", n)
	}

	close(stop)
	wg.Wait()
	cancel()
	if err := <-runDone; err != nil {
		t.Errorf("Run() = %v; want nil", err)
	}
	select {
	case <-ticker.stopped:
	default:
		t.Error("Run returned without stopping its ticker")
	}
}

func TestRunWithoutDiskLayers(t *testing.T) {
	defer goleak.VerifyNone(t)
	r := mustNew(t, Config{Layers: []LayerConfig{{Name: "admin", Admin: true}}})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Run() = %v; want nil", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after cancel")
	}
}
