package listener

import (
	"errors"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/legateproxy/legate/internal/sockopt"
)

// sockInt reads an int socket option of c (a *net.TCPConn or *net.TCPListener).
func sockInt(t *testing.T, c any, level, name int) int {
	t.Helper()
	sc, ok := c.(syscall.Conn)
	if !ok {
		t.Fatalf("%T has no socket", c)
	}
	v, err := sockopt.Int(sc, level, name)
	if err != nil {
		t.Fatalf("getsockopt(%d, %d): %v", level, name, err)
	}
	return v
}

// acceptedConn connects to listener name and returns the socket the greeter was handed.
func acceptedConn(t *testing.T, m *Manager, g *greeter, name string) any {
	t.Helper()
	_, c, _ := greet(t, addrOf(t, m, name), nil)
	t.Cleanup(func() { c.Close() })
	select {
	case lc := <-g.started:
		return lc.Conn
	case <-time.After(wait):
		t.Fatal("the listener handed over no connection")
		return nil
	}
}

// TestListenerSocketOptions: socket_options are set on the listening socket at their state,
// tcp_keepalive on the listening socket and so on the connections it accepts, and a listener
// without them accepts connections without keep-alive, as Envoy's.
func TestListenerSocketOptions(t *testing.T) {
	g := newGreeter()
	m := testManager(t, ManagerConfig{Services: g.services()},
		listenerFromYAML(t, plainListener("tuned", `, socket_options: [
			{level: 1, name: 8, int_value: 131072, description: SO_RCVBUF},
			{level: 0, name: 1, int_value: 32, state: STATE_LISTENING, description: IP_TOS},
			{level: 6, name: 4, int_value: 999, state: STATE_LISTENING, type: {datagram: {}}}],
			tcp_keepalive: {keepalive_probes: 3, keepalive_time: 45, keepalive_interval: 7}`)),
		listenerFromYAML(t, plainListener("plain", "")))
	ln := m.ListenSocket("127.0.0.1:0") // the configured address names it
	if got := sockInt(t, ln, syscall.SOL_SOCKET, syscall.SO_RCVBUF); got < 131072 {
		t.Errorf("listening SO_RCVBUF = %d; want at least 131072", got)
	}
	if got := sockInt(t, ln, syscall.IPPROTO_IP, syscall.IP_TOS); got != 32 {
		t.Errorf("listening IP_TOS = %d; want 32", got)
	}
	c := acceptedConn(t, m, g, "tuned")
	for _, tt := range []struct {
		what        string
		level, name int
		want        int
	}{
		{"SO_KEEPALIVE", syscall.SOL_SOCKET, syscall.SO_KEEPALIVE, 1},
		{"TCP_KEEPCNT", syscall.IPPROTO_TCP, syscall.TCP_KEEPCNT, 3},
		{"TCP_KEEPIDLE", syscall.IPPROTO_TCP, syscall.TCP_KEEPIDLE, 45},
		{"TCP_KEEPINTVL", syscall.IPPROTO_TCP, syscall.TCP_KEEPINTVL, 7},
	} {
		if got := sockInt(t, c, tt.level, tt.name); got != tt.want {
			t.Errorf("accepted %s = %d; want %d", tt.what, got, tt.want)
		}
	}
	if got := sockInt(t, ln, syscall.IPPROTO_TCP, syscall.TCP_KEEPIDLE); got != 45 {
		t.Errorf("listening TCP_KEEPIDLE = %d; want 45 (the datagram option is not for TCP)", got)
	}
	if got := sockInt(t, acceptedConn(t, m, g, "plain"), syscall.SOL_SOCKET, syscall.SO_KEEPALIVE); got != 0 {
		t.Errorf("SO_KEEPALIVE without tcp_keepalive = %d; want 0", got)
	}
}

// TestListenerSocketOptionRefused: an option the kernel refuses fails the listener's bind
// with the option's path, and binds nothing.
func TestListenerSocketOptionRefused(t *testing.T) {
	for _, tc := range []struct{ state, want string }{
		{"STATE_PREBIND", "socket_options[1] (level 1, name 9999, bogus): setsockopt:"},
		{"STATE_LISTENING", "socket_options[1] (level 1, name 9999, bogus): setsockopt:"},
	} {
		t.Run(tc.state, func(t *testing.T) {
			m, err := NewManager(ManagerConfig{Stats: newStore(t), Services: newGreeter().services(), Extensions: testExtensions(t)})
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			l := listenerFromYAML(t, plainListener("bad", `, socket_options: [{level: 1, name: 8, int_value: 65536}, {level: 1, name: 9999, int_value: 1, description: bogus, state: `+tc.state+`}]`))
			if err := m.AddStatic(nil); err != nil {
				t.Fatal(err)
			}
			if err := m.Start(); err != nil {
				t.Fatal(err)
			}
			_, err = m.AddOrUpdate(l, "1")
			var be *BindError
			if !errors.As(err, &be) || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "listener 'bad'") {
				t.Fatalf("AddOrUpdate = %v; want a BindError of listener 'bad' naming %q", err, tc.want)
			}
			if len(m.Addrs()) != 0 {
				t.Errorf("Addrs() = %v; want nothing bound", m.Addrs())
			}
		})
	}
}
