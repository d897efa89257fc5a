package originalsrc_test

import (
	"net"
	"net/netip"
	"path/filepath"
	"testing"

	originalsrcv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/listener/original_src/v3"

	"github.com/legateproxy/legate/internal/sockopt"
	"github.com/legateproxy/legate/listener/listenerfilter"
	"github.com/legateproxy/legate/listener/originalsrc"
)

// acceptPair returns both ends of a real connection on network ("tcp" on 127.0.0.1, or "unix").
func acceptPair(t *testing.T, network string) (client, server net.Conn) {
	t.Helper()
	addr := "127.0.0.1:0"
	if network == "unix" {
		addr = filepath.Join(t.TempDir(), "s")
	}
	ln, err := net.Listen(network, addr)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	client, err = net.Dial(network, ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close() })
	server, err = ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { server.Close() })
	return client, server
}

// TestRecordsDownstreamSource: the filter asks the upstream connection to bind to the
// connection's remote address (the PROXY header's when one set it), port 0 unless bind_port,
// with the mark; a connection that is not IP is left alone.
func TestRecordsDownstreamSource(t *testing.T) {
	if err := sockopt.CheckSource(1); err != nil {
		t.Skipf("the filter loads only where upstream sockets may set IP_TRANSPARENT and SO_MARK: %v", err)
	}
	client, server := acceptPair(t, "tcp")
	peer := client.LocalAddr().(*net.TCPAddr).AddrPort()
	proxied := net.TCPAddrFromAddrPort(netip.MustParseAddrPort("10.1.2.3:4567"))
	tests := []struct {
		name   string
		cfg    *originalsrcv3.OriginalSrc
		remote *net.TCPAddr
		want   sockopt.Source
	}{
		{"port 0 by default", &originalsrcv3.OriginalSrc{}, nil, sockopt.Source{Addr: netip.AddrPortFrom(peer.Addr(), 0)}},
		{"bind_port and mark", &originalsrcv3.OriginalSrc{BindPort: true, Mark: 123}, nil, sockopt.Source{Addr: peer, Mark: 123}},
		{"PROXY protocol source", &originalsrcv3.OriginalSrc{BindPort: true}, proxied, sockopt.Source{Addr: proxied.AddrPort()}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f, err := originalsrc.New(&listenerfilter.Context{Path: "listener_filters[0]"}, tc.cfg)
			if err != nil {
				t.Fatal(err)
			}
			c := &listenerfilter.Conn{Socket: server, Remote: tc.remote}
			if n, s := f.OnData(nil, c); n != 0 || s != listenerfilter.Done {
				t.Fatalf("OnData = %d, %v; want 0, Done", n, s)
			}
			if c.Source == nil || *c.Source != tc.want {
				t.Fatalf("Source = %+v; want %+v", c.Source, tc.want)
			}
		})
	}
	t.Run("not IP", func(t *testing.T) {
		_, server := acceptPair(t, "unix")
		f, err := originalsrc.New(&listenerfilter.Context{}, &originalsrcv3.OriginalSrc{Mark: 1})
		if err != nil {
			t.Fatal(err)
		}
		c := &listenerfilter.Conn{Socket: server}
		if _, s := f.OnData(nil, c); s != listenerfilter.Done || c.Source != nil {
			t.Fatalf("OnData: status %v, Source %+v; want Done and none", s, c.Source)
		}
	})
}
