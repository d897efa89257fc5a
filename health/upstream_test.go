package health

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"

	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
)

// upstreamEnv makes the test binary an upstream process instead of running tests:
// "http:ADDR" serves 200 on ADDR (port 0 picks one); "farm:N:LO:HI" serves 200 on N ports of
// 127.0.0.1 taken in order from LO..HI-1, skipping ports in use (explicit ports bind far faster
// than thousands of port-0 binds).
// The process prints each listening address on a line, then "ready", and exits when its stdin
// closes, so a test that dies leaves nothing behind.
const upstreamEnv = "LEGATE_HEALTH_UPSTREAM"

// upstreamMain runs the upstream when upstreamEnv is set and reports whether it did.
func upstreamMain() bool {
	mode := os.Getenv(upstreamEnv)
	if mode == "" {
		return false
	}
	kind, arg, _ := strings.Cut(mode, ":")
	var addrs []string
	var listeners []net.Listener
	switch kind {
	case "http":
		addrs = []string{arg}
	case "farm":
		var n, lo, hi int
		if _, err := fmt.Sscanf(arg, "%d:%d:%d", &n, &lo, &hi); err != nil {
			fmt.Fprintln(os.Stderr, "farm spec:", err)
			os.Exit(2)
		}
		if got, err := raiseFileLimit(uint64(2*n + 1024)); err != nil || got < uint64(n+256) {
			fmt.Fprintln(os.Stderr, "rlimit:", got, err)
			os.Exit(2)
		}
		listeners = farmListeners(n, lo, hi)
	default:
		fmt.Fprintln(os.Stderr, "unknown upstream mode", mode)
		os.Exit(2)
	}
	for _, a := range addrs {
		l, err := net.Listen("tcp", a)
		if err != nil {
			fmt.Fprintln(os.Stderr, "listen:", err)
			os.Exit(2)
		}
		listeners = append(listeners, l)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {})}
	out := bufio.NewWriter(os.Stdout)
	for _, l := range listeners {
		fmt.Fprintln(out, l.Addr().String())
		go srv.Serve(l)
	}
	fmt.Fprintln(out, "ready")
	out.Flush()
	io.Copy(io.Discard, os.Stdin)
	os.Exit(0)
	return true
}

// farmListeners listens on n ports of 127.0.0.1 from lo..hi-1, skipping those in use.
func farmListeners(n, lo, hi int) []net.Listener {
	var ls []net.Listener
	for p := lo; p < hi && len(ls) < n; p++ {
		if l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p)); err == nil {
			ls = append(ls, l)
		}
	}
	if len(ls) < n {
		fmt.Fprintf(os.Stderr, "farm: only %d free ports in %d..%d; want %d\n", len(ls), lo, hi-1, n)
		os.Exit(2)
	}
	return ls
}

// upstream is a child process started by startUpstream.
type upstream struct {
	cmd   *exec.Cmd
	stdin io.Closer
	addrs []string
}

func startUpstream(t testing.TB, mode string) *upstream {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), upstreamEnv+"="+mode)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	u := &upstream{cmd: cmd, stdin: stdin}
	t.Cleanup(u.stop)
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		if sc.Text() == "ready" {
			return u
		}
		u.addrs = append(u.addrs, sc.Text())
	}
	t.Fatalf("upstream %q exited before it was ready: %v", mode, sc.Err())
	return nil
}

// kill ends the process at once (SIGKILL) and reaps it.
func (u *upstream) kill() {
	u.cmd.Process.Kill()
	u.cmd.Wait()
}

func (u *upstream) stop() {
	u.stdin.Close()
	u.cmd.Wait()
}

// raiseFileLimit raises the RLIMIT_NOFILE soft limit to n, or to the hard limit when that is
// lower (raising the hard limit needs CAP_SYS_RESOURCE), and returns the limit now in force.
func raiseFileLimit(n uint64) (uint64, error) {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return 0, err
	}
	if lim.Cur >= n {
		return lim.Cur, nil
	}
	lim.Cur = min(n, lim.Max)
	return lim.Cur, syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim)
}

func stringMatcherPrefix(p string) *matcherv3.StringMatcher {
	return &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Prefix{Prefix: p}}
}
