package sockopt

import (
	"net"
	"strings"
	"syscall"
	"testing"
)

// getInt reads an int option of c's socket.
func getInt(t *testing.T, c syscall.Conn, level, name int) int {
	t.Helper()
	v, err := Int(c, level, name)
	if err != nil {
		t.Fatalf("getsockopt(%d, %d): %v", level, name, err)
	}
	return v
}

// TestControlSetsOptionsOfItsStates dials a real listener with a Control made of options of
// every state: the prebind and bound ones are set on the connection, the listening one is not,
// nor a datagram one or one for IPv6 sockets.
func TestControlSetsOptionsOfItsStates(t *testing.T) {
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	opts := []Option{
		{Path: "o[0]", Level: syscall.IPPROTO_IP, Name: syscall.IP_TOS, Int: 0x20, State: Prebind},
		{Path: "o[1]", Level: syscall.SOL_SOCKET, Name: syscall.SO_KEEPALIVE, Int: 1, State: Bound},
		{Path: "o[2]", Level: syscall.IPPROTO_TCP, Name: syscall.TCP_KEEPIDLE, Int: 77, State: Listening},
		{Path: "o[3]", Level: syscall.IPPROTO_TCP, Name: syscall.TCP_KEEPINTVL, Int: 11, Datagram: true},
		{Path: "o[4]", Level: syscall.IPPROTO_TCP, Name: syscall.TCP_KEEPCNT, Int: 4, IPVersion: 6},
		{Path: "o[5]", Level: syscall.IPPROTO_TCP, Name: syscall.TCP_KEEPCNT, Int: 5, IPVersion: 4},
	}
	d := net.Dialer{KeepAlive: -1, Control: Control(opts)}
	c, err := d.Dial("tcp4", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	tc := c.(*net.TCPConn)
	for _, tt := range []struct {
		what        string
		level, name int
		want        int
	}{
		{"IP_TOS (prebind)", syscall.IPPROTO_IP, syscall.IP_TOS, 0x20},
		{"SO_KEEPALIVE (bound)", syscall.SOL_SOCKET, syscall.SO_KEEPALIVE, 1},
		{"TCP_KEEPCNT (IPv4 only)", syscall.IPPROTO_TCP, syscall.TCP_KEEPCNT, 5},
	} {
		if got := getInt(t, tc, tt.level, tt.name); got != tt.want {
			t.Errorf("%s = %d; want %d", tt.what, got, tt.want)
		}
	}
	for _, tt := range []struct {
		what  string
		name  int
		unset int
	}{{"TCP_KEEPIDLE (listening)", syscall.TCP_KEEPIDLE, 77}, {"TCP_KEEPINTVL (datagram)", syscall.TCP_KEEPINTVL, 11}} {
		if got := getInt(t, tc, syscall.IPPROTO_TCP, tt.name); got == tt.unset {
			t.Errorf("%s = %d; an option of another state or type was set", tt.what, got)
		}
	}
}

// TestApplyNamesTheRefusedOption: an option the kernel refuses fails with its path and
// description.
func TestApplyNamesTheRefusedOption(t *testing.T) {
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	raw, err := ln.(*net.TCPListener).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	opts := []Option{
		{Path: "socket_options[0]", Level: syscall.SOL_SOCKET, Name: syscall.SO_RCVBUF, Int: 1 << 16, State: Listening},
		{Path: "socket_options[1]", Description: "made up", Level: syscall.SOL_SOCKET, Name: 9999, Int: 1, State: Listening},
	}
	err = Apply(raw, opts, Listening, 4)
	if err == nil || !strings.Contains(err.Error(), "socket_options[1] (level 1, name 9999, made up): setsockopt:") {
		t.Fatalf("Apply = %v; want the refusal of socket_options[1]", err)
	}
	if got := getInt(t, ln.(*net.TCPListener), syscall.SOL_SOCKET, syscall.SO_RCVBUF); got < 1<<16 {
		t.Errorf("SO_RCVBUF = %d; want at least %d (the option before the refused one)", got, 1<<16)
	}
}

// TestKeepaliveOptions: tcp_keepalive's zero fields leave the system's defaults.
func TestKeepaliveOptions(t *testing.T) {
	got := Keepalive("tcp_keepalive", 3, 0, 9)
	var names []string
	for _, o := range got {
		names = append(names, o.String())
	}
	want := "tcp_keepalive (level 1, name 9, SO_KEEPALIVE)|tcp_keepalive.keepalive_probes (level 6, name 6)|tcp_keepalive.keepalive_interval (level 6, name 5)"
	if s := strings.Join(names, "|"); s != want {
		t.Errorf("Keepalive = %s; want %s", s, want)
	}
}
