package clock

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// directCalls are the time functions that read or schedule on the system clock. Production code
// takes a Clock instead, so that one fake clock drives every timing rule in tests.
var directCalls = map[string]bool{
	"Now": true, "Since": true, "Until": true, "Sleep": true,
	"After": true, "AfterFunc": true, "Tick": true, "NewTicker": true, "NewTimer": true,
}

// allowedDirect lists, per file, how many direct uses stay and why; each site says so in a
// comment. A new direct use fails TestNoDirectTimeCalls until it takes the clock or is listed
// here with its reason.
//
// The request path (requestPath) keeps its timers on the system clock: a stream's and a
// connection's timers are *time.Timer values re-armed with Reset, which allocates nothing
// (BenchmarkProxy stays at 0 allocs/op) and which clock.Timer does not offer, and the deadlines
// and activity stamps they are compared with must read the same clock: the stamps are
// clock.Mono's, which reads only the monotonic clock.
var allowedDirect = map[string]struct {
	n   int
	why string
}{
	"cmd/legate-restarter/main.go":            {2, "the restarter is a separate supervisor binary with no components to inject a clock into"},
	"cmd/legate/main.go":                      {1, "the executable-page trim's ticker (trimExecutable): it paces reads of /proc, no component's time"},
	"hotrestart/child.go":                     {1, "a socket deadline: the runtime poller compares it with the system clock"},
	"hotrestart/parent.go":                    {1, "a socket deadline: the runtime poller compares it with the system clock"},
	"httpproxy/body.go":                       {1, requestPath},
	"httpproxy/conn.go":                       {3, "a socket deadline: the runtime poller compares it with the system clock"},
	"httpproxy/ctx.go":                        {2, requestPath},
	"httpproxy/filter/filter.go":              {1, "request path: a filter context without a clock"},
	"httpproxy/filters/fault/filter.go":       {1, "request path: the injected delay"},
	"httpproxy/filters/ondemand/ondemand.go":  {1, requestPath},
	"httpproxy/h2reset.go":                    {3, requestPath},
	"httpproxy/h2headerwatch.go":              {3, requestPath},
	"httpproxy/h2srv.go":                      {4, "socket deadlines, and a bound on a blocked socket write: the runtime poller uses the system clock"},
	"httpproxy/h2stream.go":                   {4, "request path: a stream's body read and write deadlines"},
	"httpproxy/router.go":                     {1, requestPath},
	"httpproxy/timeout.go":                    {4, requestPath},
	"httpproxy/upgrade.go":                    {4, requestPath},
	"internal/clock/clock.go":                 {5, "Real is the system clock; the epoch and Mono read its monotonic clock"},
	"internal/h2client/conn.go":               {1, "request path: the keepalive PING timer, re-armed with Reset"},
	"listener/filters/connlimit/connlimit.go": {1, "a socket deadline: the runtime poller compares it with the system clock"},
	"listener/filters.go":                     {1, "a socket deadline: the runtime poller compares it with the system clock"},
	"listener/listener.go":                    {3, "a socket deadline (1); waits on the kernel (2): the accept socket's stop grace, the accept-error backoff"},
	"listener/pipe.go":                        {3, "an in-memory connection's net.Conn deadlines, absolute times on the system clock"},
	"listener/overload.go":                    {1, "waits on the network or the kernel, not a timing rule: a fake clock would stall it"},
	"pool/h1.go":                              {2, requestPath},
	"pool/h2.go":                              {2, requestPath},
	"pool/idle.go":                            {2, "socket deadlines: the runtime poller compares them with the system clock"},
	"pool/streamclock.go":                     {1, requestPath},
	"stats/sinks/statsd/sink.go":              {1, "a socket deadline: the runtime poller compares it with the system clock"},
	"tcpproxy/accesslog.go":                   {2, requestPath},
	"tcpproxy/proxy.go":                       {3, requestPath},
	"tcpproxy/tls.go":                         {1, "a socket deadline: the runtime poller compares it with the system clock"},
	"tcpproxy/tunnel.go":                      {2, "a socket deadline, which the runtime poller compares with the system clock, and a pooled tunnel's wait for its answer (request path)"},
	"xds/grpc.go":                             {1, "waits on the network or the kernel, not a timing rule: a fake clock would stall it"},
}

const requestPath = "request path: *time.Timer re-armed with Reset, and the stamps compared with it"

// TestNoDirectTimeCalls fails on a use of the system clock's functions (time.Now, time.AfterFunc,
// ...) in a production .go file beyond allowedDirect. Test files, test-support packages (a
// directory named *test) and test/ are not production code.
func TestNoDirectTimeCalls(t *testing.T) {
	root := filepath.Join("..", "..")
	got := map[string][]string{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			name := d.Name()
			if rel != "." && (strings.HasPrefix(name, ".") || name == "testdata" || strings.HasSuffix(name, "test") || rel == "test") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(rel, ".go") || strings.HasSuffix(rel, "_test.go") {
			return nil
		}
		uses, err := directUses(path)
		if err != nil {
			return err
		}
		if len(uses) > 0 {
			got[rel] = uses
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for file, uses := range got {
		if a := allowedDirect[file]; len(uses) > a.n {
			t.Errorf("%s: %d direct uses of the system clock (%s); %d allowed (%s): take the server's clock.Clock, or list the use in allowedDirect with its reason", file, len(uses), strings.Join(uses, ", "), a.n, a.why)
		}
	}
	for file, a := range allowedDirect {
		if n := len(got[file]); n < a.n {
			t.Errorf("%s: %d direct uses of the system clock; allowedDirect allows %d: lower it", file, n, a.n)
		}
	}
}

// directUses returns the uses of directCalls in the Go file at path, as "time.Now:line".
func directUses(path string) ([]string, error) {
	f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.SkipObjectResolution)
	if err != nil {
		return nil, err
	}
	name := ""
	for _, imp := range f.Imports {
		if p, _ := strconv.Unquote(imp.Path.Value); p == "time" {
			name = "time"
			if imp.Name != nil {
				name = imp.Name.Name
			}
		}
	}
	if name == "" || name == "_" {
		return nil, nil
	}
	fset := token.NewFileSet()
	f, err = parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
	if err != nil {
		return nil, err
	}
	var uses []string
	ast.Inspect(f, func(n ast.Node) bool {
		sel, ok := n.(*ast.SelectorExpr)
		if !ok {
			return true
		}
		if x, ok := sel.X.(*ast.Ident); ok && x.Name == name && directCalls[sel.Sel.Name] {
			uses = append(uses, "time."+sel.Sel.Name+":"+strconv.Itoa(fset.Position(sel.Pos()).Line))
		}
		return true
	})
	slices.Sort(uses)
	return uses, nil
}
