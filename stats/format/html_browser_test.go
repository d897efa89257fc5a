package format

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/legateproxy/legate/stats"
)

// The browser tests drive Debian's chromium through chromedp against an
// httptest server that serves the two HTML views with WriteHTML and
// stats?format=json with WriteJSON, as admin's /stats does.

const chromiumPath = "/usr/bin/chromium"

// browser starts a headless chromium for the test and returns its tab and a
// function listing the console errors and uncaught exceptions seen so far.
// Without chromium the test is skipped, unless LEGATE_E2E_TOOLS=1 (make e2e,
// which installs it) makes a missing browser a failure.
func browser(t *testing.T) (context.Context, func() []string) {
	t.Helper()
	if _, err := os.Stat(chromiumPath); err != nil {
		if os.Getenv("LEGATE_E2E_TOOLS") == "1" {
			t.Fatalf("LEGATE_E2E_TOOLS=1 but the browser is missing: %v", err)
		}
		t.Skipf("%s not installed (%v); make e2e installs it", chromiumPath, err)
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromiumPath),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(t.TempDir()),
	)
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	tabCtx, cancelTab := chromedp.NewContext(allocCtx)
	ctx, cancelTimeout := context.WithTimeout(tabCtx, 90*time.Second)

	// Start the browser, then follow its console until the tab closes.
	if err := chromedp.Do(ctx); err != nil {
		cancelTimeout()
		cancelTab()
		cancelAlloc()
		t.Fatalf("starting %s: %v", chromiumPath, err)
	}
	var mu sync.Mutex
	var problems []string
	messages := chromedp.Console(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for m, err := range messages {
			if err != nil {
				return
			}
			if m.Type == chromedp.ConsoleError || m.IsException() {
				mu.Lock()
				problems = append(problems, m.String())
				mu.Unlock()
			}
		}
	}()
	t.Cleanup(func() {
		cancelTimeout()
		cancelTab()
		cancelAlloc()
		<-done
	})
	return ctx, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(problems)
	}
}

// statsServer serves /stats over s the way admin does for the formats the
// pages use.
func statsServer(t *testing.T, s *stats.Store) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/stats" {
			http.NotFound(w, r)
			return
		}
		q, err := ParseQuery(r.URL.Query(), false)
		if err != nil {
			w.WriteHeader(http.StatusBadRequest)
			fmt.Fprint(w, err)
			return
		}
		switch q.Format {
		case HTML, ActiveHTML:
			w.Header().Set("Content-Type", "text/html; charset=UTF-8")
			err = WriteHTML(w, s, q)
		case JSON:
			w.Header().Set("Content-Type", "application/json")
			err = WriteJSON(w, s, q)
		default:
			err = WriteText(w, s, q)
		}
		if err != nil {
			t.Logf("rendering %s: %v", r.URL, err)
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

// do runs chromedp actions and fails the test on an error.
func do(t *testing.T, ctx context.Context, what string, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	if err := chromedp.Do(ctx, actions...); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// eval evaluates a JavaScript expression in the page.
func eval[T any](t *testing.T, ctx context.Context, expression string) T {
	t.Helper()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expression))
	if err != nil {
		t.Fatalf("evaluating %s: %v", expression, err)
	}
	return v
}

// waitFor waits until a JavaScript expression is truthy in the current page.
func waitFor(t *testing.T, ctx context.Context, what, expression string) {
	t.Helper()
	_, err := chromedp.Run(ctx, chromedp.Poll[chromedp.Void](expression, chromedp.WithPollingTimeout(20*time.Second)))
	if err != nil {
		t.Fatalf("waiting for %s (%s): %v", what, expression, err)
	}
}

// preText is the text of the html page's <pre> elements.
const preText = `Array.from(document.querySelectorAll('pre'), (p) => p.textContent).join('')`

func TestBrowserHTMLPagesLoadCleanly(t *testing.T) {
	s := htmlStore(t)
	srv := statsServer(t, s)
	ctx, problems := browser(t)
	tests := []struct {
		name, query string
		ready       string // a JavaScript condition true once the page has done its work
	}{
		{"html", "format=html", `document.querySelector('pre') !== null`},
		{"html with detailed histograms", "format=html&histogram_buckets=detailed",
			`document.querySelectorAll('#histograms .histogram .histogram-column').length > 0`},
		{"active-html", "format=active-html", `document.querySelector('tr[data-stat]') !== null`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			do(t, ctx, "loading the page", chromedp.Navigate(srv.URL+"/stats?"+tc.query))
			waitFor(t, ctx, "the page to render", tc.ready)
			if got := eval[string](t, ctx, `document.title`); got != "Envoy Admin" {
				t.Errorf("title = %q; want %q", got, "Envoy Admin")
			}
		})
	}
	if p := problems(); len(p) != 0 {
		t.Errorf("console errors:\n%s", strings.Join(p, "\n"))
	}
}

func TestBrowserHTMLFilterBox(t *testing.T) {
	s := htmlStore(t)
	srv := statsServer(t, s)
	ctx, problems := browser(t)
	do(t, ctx, "loading the page", chromedp.Navigate(srv.URL+"/stats?format=html"))
	before := eval[string](t, ctx, preText)
	if !strings.Contains(before, "server.motd") {
		t.Fatalf("unfiltered page lacks server.motd:\n%s", before)
	}
	do(t, ctx, "typing a filter",
		chromedp.SendKeys(chromedp.ID("param-1-stats-filter"), "upstream_rq"+kb.Enter))
	// The server writes the filter into the box of the reloaded page.
	do(t, ctx, "waiting for the filtered page",
		chromedp.WaitVisible(chromedp.CSS(`#param-1-stats-filter[value="upstream_rq"]`)))
	if loc := eval[string](t, ctx, `location.search`); !strings.Contains(loc, "filter=upstream_rq") || !strings.Contains(loc, "format=html") {
		t.Errorf("location.search = %q; want the filter and format=html", loc)
	}
	var stats []string
	for _, line := range strings.Split(eval[string](t, ctx, preText), "\n") {
		if strings.Contains(line, ": ") {
			stats = append(stats, line)
		}
	}
	if want := []string{"cluster.x.upstream_rq_total: 3"}; !slices.Equal(stats, want) {
		t.Errorf("filtered lines = %q; want %q", stats, want)
	}
	if p := problems(); len(p) != 0 {
		t.Errorf("console errors:\n%s", strings.Join(p, "\n"))
	}
}

// activeStore has 60 used counters (c.00 … c.59) besides busy and quiet.
func activeStore(t *testing.T) (*stats.Store, *stats.Counter) {
	t.Helper()
	s, err := stats.New(stats.Config{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 60 {
		s.Counter(fmt.Sprintf("c.%02d", i)).Inc()
	}
	s.Counter("quiet").Add(7)
	s.Counter("unused")
	busy := s.Counter("busy")
	busy.Add(1)
	return s, busy
}

// rowsJS is the number of rows of the live view.
const rowsJS = `document.querySelectorAll('.active-table tbody tr').length`

// typeInto empties an input, then types text into it as a user does.
// (chromedp.SetValue with "" sets the value to "undefined".)
func typeInto(t *testing.T, ctx context.Context, id, text string) {
	t.Helper()
	eval[bool](t, ctx, `(document.getElementById('`+id+`').value = '') === ''`)
	do(t, ctx, "typing "+text+" into #"+id, chromedp.SendKeys(chromedp.ID(id), text))
}

func TestBrowserActiveUpdates(t *testing.T) {
	s, busy := activeStore(t)
	srv := statsServer(t, s)
	ctx, problems := browser(t)
	do(t, ctx, "loading the page", chromedp.Navigate(srv.URL+"/stats?format=active-html"))
	waitFor(t, ctx, "the first poll", `document.querySelector('tr[data-stat="busy"]') !== null`)
	if got := eval[string](t, ctx, `document.getElementById('active-update-interval').value`); got != "5" {
		t.Errorf("default update interval = %q; want 5", got)
	}
	typeInto(t, ctx, "active-update-interval", "0.1")
	for want := uint64(2); want <= 4; want++ {
		busy.Inc()
		waitFor(t, ctx, fmt.Sprintf("busy to show %d", want), fmt.Sprintf(
			`document.querySelector('tr[data-stat="busy"] .active-value')?.textContent === '%d'`, want))
	}
	// busy changed on three polls; nothing else changed, so it leads.
	first := eval[[]string](t, ctx, `Array.from(document.querySelectorAll('.active-table tbody tr')[0].cells, (c) => c.textContent)`)
	if want := []string{"3", "4", "busy"}; !slices.Equal(first, want) {
		t.Errorf("first row = %q; want %q (changes, value, name)", first, want)
	}
	if got := eval[bool](t, ctx, `document.querySelector('tr[data-stat="unused"]') === null`); !got {
		t.Errorf("the unused counter is shown; want used stats only")
	}

	// The filter typed in the page narrows the view without a reload.
	typeInto(t, ctx, "param-1-stats-filter", "qu"+kb.Enter)
	waitFor(t, ctx, "only quiet to show", rowsJS+` === 1 && document.querySelector('tr[data-stat="quiet"]') !== null`)
	if p := problems(); len(p) != 0 {
		t.Errorf("console errors:\n%s", strings.Join(p, "\n"))
	}
}

func TestBrowserActiveCount(t *testing.T) {
	s, _ := activeStore(t)
	srv := statsServer(t, s)
	ctx, problems := browser(t)
	do(t, ctx, "loading the page", chromedp.Navigate(srv.URL+"/stats?format=active-html"))
	waitFor(t, ctx, "the default 50 rows", rowsJS+` === 50`)
	tests := []struct {
		count string
		rows  int
	}{
		{"3", 3},
		{"7", 7},
		{"100", 62}, // every used stat
		{"50", 50},
	}
	for _, tc := range tests {
		t.Run(tc.count, func(t *testing.T) {
			typeInto(t, ctx, "active-max-display-count", tc.count)
			waitFor(t, ctx, fmt.Sprintf("%d rows", tc.rows), fmt.Sprintf(rowsJS+` === %d`, tc.rows))
		})
	}
	if p := problems(); len(p) != 0 {
		t.Errorf("console errors:\n%s", strings.Join(p, "\n"))
	}
}
