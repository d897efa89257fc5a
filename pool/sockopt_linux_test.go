package pool

import (
	"context"
	"net"
	"syscall"
	"testing"

	"github.com/legateproxy/legate/internal/sockopt"
)

// TestUpstreamSocketOptions: upstream_bind_config.socket_options are set on each upstream
// connection; the listening-state one is not, an upstream connection never listening.
func TestUpstreamSocketOptions(t *testing.T) {
	srv := newRawServer(t, "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n", 1)
	cm, store := newClusterManager(t, staticCluster(`upstream_bind_config: {socket_options: [
  {level: 0, name: 1, int_value: 64, description: IP_TOS},
  {level: 6, name: 4, int_value: 123, state: STATE_BOUND},
  {level: 6, name: 5, int_value: 321, state: STATE_LISTENING}]}`, srv.addr()))
	m := newManager(t, cm, store, nil)
	c, err := m.dial(context.Background(), onlyHost(t, m).Address())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	get := func(level, name int) int {
		v, err := sockopt.Int(c.(*net.TCPConn), level, name)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	if got := get(syscall.IPPROTO_IP, syscall.IP_TOS); got != 64 {
		t.Errorf("IP_TOS = %d; want 64", got)
	}
	if got := get(syscall.IPPROTO_TCP, syscall.TCP_KEEPIDLE); got != 123 {
		t.Errorf("TCP_KEEPIDLE = %d; want 123", got)
	}
	if got := get(syscall.IPPROTO_TCP, syscall.TCP_KEEPINTVL); got == 321 {
		t.Errorf("TCP_KEEPINTVL = 321; a listening-state option was set on an upstream connection")
	}
}
