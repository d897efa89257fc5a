package originalsrc_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/legateproxy/legate/internal/nettest"
)

// innerEnv marks the test binary re-run inside its own network namespace.
const innerEnv = "LEGATE_ORIGINAL_SRC_NETNS"

// The namespaces' addresses: Legate and the upstream share 10.9.0.1 in the test's namespace;
// the client is 10.9.0.2 in a second namespace across a veth pair. The mark and table route
// the upstream's replies to the client's address back to Legate.
const (
	legateAddr = "10.9.0.1"
	clientAddr = "10.9.0.2"
	otherAddr  = "10.9.0.3" // a second client, in the same namespace
	mark       = "123"
	table      = "100"
)

// TestUpstreamSeesClientAddress runs Legate with original_src between clients at 10.9.0.2
// and 10.9.0.3 in one network namespace and an upstream in another, and checks that the
// upstream's peer is the client's address (and port, with bind_port): for the TCP proxy, for
// the HTTP connection manager's pooled connections, and for the TCP proxy's tunnels over a
// cluster's pooled HTTP/2 connections, whose pools are keyed by the client's address so that
// two clients never share an upstream connection. The replies reach Legate through the policy
// routing Envoy's documentation gives: the mark saved on the connection, restored on the
// replies, and a local route for marked packets. Without the mark or IP_TRANSPARENT the
// upstream connection fails. Both namespaces are created by the test: the host's network is
// never touched.
func TestUpstreamSeesClientAddress(t *testing.T) {
	if os.Getenv(innerEnv) == "" {
		runInNamespace(t, "bind_port=false", "bind_port=true", "http", "http2_tunnel")
		return
	}
	setupNamespaces(t, startClientNamespace(t))
	for _, bindPort := range []bool{false, true} {
		t.Run(fmt.Sprintf("bind_port=%v", bindPort), func(t *testing.T) {
			upstream := peerServer(t)
			l := newLegate(t, upstream, "")
			if err := l.add(t, fmt.Sprintf(`
name: osrc
address: {socket_address: {address: %s, port_value: 0}}
listener_filters:
- name: envoy.filters.listener.original_src
  typed_config: {"@type": type.googleapis.com/envoy.extensions.filters.listener.original_src.v3.OriginalSrc, mark: %s, bind_port: %v}
filter_chains:
- filters:
  - name: envoy.filters.network.tcp_proxy
    typed_config: {"@type": type.googleapis.com/envoy.extensions.filters.network.tcp_proxy.v3.TcpProxy, stat_prefix: osrc, cluster: up}
`, legateAddr, mark, bindPort)); err != nil {
				t.Fatal(err)
			}
			local, seen := dialFromClient(t, l.run(t, "osrc"))
			if got, _ := splitAddr(t, seen); got != clientAddr {
				t.Fatalf("upstream's peer = %s; want the client's address %s", seen, clientAddr)
			}
			if bindPort && seen != local {
				t.Errorf("upstream's peer = %s; want the client's address and port %s (bind_port)", seen, local)
			}
		})
	}
	t.Run("http", testHTTP)
	t.Run("http2_tunnel", testTunnel)
}

// runInNamespace re-runs t in a new network namespace, as root, or skips; each of subtests
// must pass there.
func runInNamespace(t *testing.T, subtests ...string) {
	if os.Geteuid() != 0 {
		t.Skip("original_src needs root (CAP_NET_ADMIN) for IP_TRANSPARENT and network namespaces")
	}
	for _, tool := range []string{"ip", "iptables", "unshare", "nsenter"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("original_src's test needs %s to set up its network namespaces: %v", tool, err)
		}
	}
	if out, err := exec.Command("unshare", "--net", "true").CombinedOutput(); err != nil {
		t.Skipf("cannot create a network namespace (unshare --net: %v: %s)", err, out)
	}
	cmd := exec.Command("unshare", "--net", "--", os.Args[0], "-test.run=^"+t.Name()+"$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), innerEnv+"=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("in its network namespace: %v\n%s", err, out)
	}
	for _, name := range subtests {
		if !strings.Contains(string(out), "--- PASS: "+t.Name()+"/"+name) {
			t.Fatalf("in its network namespace, %s did not pass:\n%s", name, out)
		}
	}
}

// run runs a command of the namespace setup.
func run(t *testing.T, args ...string) {
	t.Helper()
	if out, err := exec.Command(args[0], args[1:]...).CombinedOutput(); err != nil {
		t.Fatalf("%s: %v: %s", strings.Join(args, " "), err, out)
	}
}

// startClientNamespace starts a process holding a second network namespace for the client
// and returns its pid; the process ends when the test does.
func startClientNamespace(t *testing.T) int {
	t.Helper()
	cmd := exec.Command("unshare", "--net", "--", "sh", "-c", "echo ready; exec cat")
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
	t.Cleanup(func() {
		stdin.Close() // cat ends, and with it the namespace
		cmd.Wait()
	})
	// The shell prints once unshare has made the namespace.
	if line, err := bufio.NewReader(stdout).ReadString('\n'); err != nil || line != "ready\n" {
		t.Fatalf("client namespace holder said %q, %v", line, err)
	}
	return cmd.Process.Pid
}

// setupNamespaces links this namespace (Legate's and the upstream's) to the client's with a
// veth pair, and adds the policy routing of original_src's replies.
func setupNamespaces(t *testing.T, clientPid int) {
	t.Helper()
	inClient := []string{"nsenter", fmt.Sprintf("--net=/proc/%d/ns/net", clientPid), "--"}
	for _, args := range [][]string{
		{"ip", "link", "set", "lo", "up"},
		{"ip", "link", "add", "osrc0", "type", "veth", "peer", "name", "osrc1"},
		{"ip", "link", "set", "osrc1", "netns", fmt.Sprint(clientPid)},
		{"ip", "addr", "add", legateAddr + "/24", "dev", "osrc0"},
		{"ip", "link", "set", "osrc0", "up"},
		append(inClient, "ip", "link", "set", "lo", "up"),
		append(inClient, "ip", "addr", "add", clientAddr+"/24", "dev", "osrc1"),
		append(inClient, "ip", "addr", "add", otherAddr+"/24", "dev", "osrc1"),
		append(inClient, "ip", "link", "set", "osrc1", "up"),
		// Legate's upstream packets carry the mark: keep it on the connection, put it back on
		// the upstream's replies, and deliver marked packets locally, to Legate's socket.
		{"iptables", "-t", "mangle", "-A", "OUTPUT", "-m", "connmark", "--mark", mark, "-j", "CONNMARK", "--restore-mark"},
		{"iptables", "-t", "mangle", "-A", "OUTPUT", "-m", "mark", "--mark", mark, "-j", "CONNMARK", "--save-mark"},
		{"ip", "rule", "add", "fwmark", mark, "lookup", table},
		{"ip", "route", "add", "local", "0.0.0.0/0", "dev", "lo", "table", table},
	} {
		run(t, args...)
	}
	t.Setenv("LEGATE_CLIENT_NETNS", fmt.Sprintf("/proc/%d/ns/net", clientPid))
}

// peerServer is the upstream: it writes each connection's peer address and closes it.
func peerServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", legateAddr+":0")
	if err != nil {
		t.Fatal(err)
	}
	nettest.Serve(t, ln, func(c net.Conn) {
		io.WriteString(c, c.RemoteAddr().String()+"\n")
		c.Close()
	})
	return ln.Addr().String()
}

// dialFromClient connects to addr from the client's namespace and returns the connection's
// local address and the line the upstream wrote back.
func dialFromClient(t *testing.T, addr string) (local, seen string) {
	t.Helper()
	c := dialAs(t, clientAddr, addr)
	defer c.Close()
	return c.LocalAddr().String(), readLine(t, bufio.NewReader(c))
}

// readLine reads the line the upstream wrote back through Legate.
func readLine(t *testing.T, r *bufio.Reader) string {
	t.Helper()
	line, err := r.ReadString('\n')
	if err != nil {
		t.Fatalf("reading the upstream's line through Legate: %v", err)
	}
	return strings.TrimSuffix(line, "\n")
}

// dialAs connects to addr from src in the client's namespace; the connection has a deadline
// of ten seconds and closes when the test ends.
func dialAs(t *testing.T, src, addr string) net.Conn {
	t.Helper()
	type result struct {
		c   net.Conn
		err error
	}
	done := make(chan result, 1)
	go func() {
		// The socket is made on a thread moved to the client's namespace; the thread is
		// never unlocked, so it ends with this goroutine and no other code runs there.
		runtime.LockOSThread()
		c, err := dialIn(os.Getenv("LEGATE_CLIENT_NETNS"), src, addr)
		done <- result{c, err}
	}()
	r := <-done
	if r.err != nil {
		t.Fatal(r.err)
	}
	t.Cleanup(func() { r.c.Close() })
	r.c.SetDeadline(time.Now().Add(10 * time.Second))
	return r.c
}

// dialIn enters the network namespace at path on the calling (locked) thread and dials addr
// from src.
func dialIn(path, src, addr string) (net.Conn, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if err := unix.Setns(int(f.Fd()), unix.CLONE_NEWNET); err != nil {
		return nil, fmt.Errorf("setns %s: %w", path, err)
	}
	d := net.Dialer{Timeout: 10 * time.Second, LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}}
	return d.Dial("tcp", addr)
}
