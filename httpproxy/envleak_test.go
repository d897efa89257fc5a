package httpproxy

import (
	"bytes"
	"context"
	"fmt"
	"runtime/pprof"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// envLabel is the pprof label that marks every goroutine an env's listener manager starts:
// goroutines inherit their creator's labels, so the accept loops, the connections' goroutines
// and the handlers' goroutines all carry it.
const envLabel = "legate_test_env"

var envSeq atomic.Uint64

// labelEnv runs fn (which starts the env's goroutines) under a label naming t, and returns the
// label's value.
func labelEnv(t testing.TB, fn func()) string {
	v := fmt.Sprintf("%s#%d", t.Name(), envSeq.Add(1))
	pprof.Do(context.Background(), pprof.Labels(envLabel, v), func(context.Context) { fn() })
	return v
}

// awaitEnvGoroutines fails t when goroutines labelled v still run some time after the env's
// listener manager closed: every connection is closed by then, so what is left is a connection
// or handler goroutine that nothing will end (a leak the package's goleak check would only
// report at the end, without naming the test).
func awaitEnvGoroutines(t testing.TB, v string) {
	t.Helper()
	var left string
	for deadline := time.Now().Add(wait); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if left = labelledStacks(v); left == "" {
			return
		}
	}
	t.Errorf("goroutines of the env still run after its listener manager closed:\n%s", left)
}

// labelledStacks returns the goroutine profile's records labelled v.
func labelledStacks(v string) string {
	var buf bytes.Buffer
	pprof.Lookup("goroutine").WriteTo(&buf, 1)
	want := fmt.Sprintf("%q:%q", envLabel, v)
	var out []string
	for _, rec := range strings.Split(buf.String(), "\n\n") {
		if strings.Contains(rec, want) {
			out = append(out, rec)
		}
	}
	return strings.Join(out, "\n\n")
}

// TestEnvGoroutinesLabelled: the leak check sees an env's connection goroutines, so that its
// silence after a cleanup means something.
func TestEnvGoroutinesLabelled(t *testing.T) {
	up := echo(t, "up")
	e := newEnv(t, envOptions{clusters: []string{staticCluster("web", "", up.Listener.Addr().String())}, hcm: simpleHCM("web", "")})
	c := e.client()
	if resp, _ := e.get(c, "/"); resp.StatusCode != 200 {
		t.Fatalf("GET / = %d; want 200", resp.StatusCode)
	}
	stacks := labelledStacks(e.label)
	for _, fn := range []string{"listener.(*Manager).acceptLoop", "httpproxy.(*Handler).serveConn"} {
		if !strings.Contains(stacks, fn) {
			t.Errorf("labelled goroutines lack %s:\n%s", fn, stacks)
		}
	}
	c.CloseIdleConnections()
}
