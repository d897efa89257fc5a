package listener

import (
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/legateproxy/legate/config"
)

// noChainListener accepts only TLS, and sets access_log (the logger's configuration is the
// AccessLogs hook's business, not the listener manager's).
const noChainListener = `
name: logged
address: {socket_address: {address: 127.0.0.1, port_value: 0}}
listener_filters: [{name: envoy.filters.listener.tls_inspector}]
access_log: [{name: envoy.access_loggers.stdout, typed_config: {"@type": type.googleapis.com/envoy.extensions.access_loggers.stream.v3.StdoutAccessLog}}]
filter_chains:
- {name: only-tls, filter_chain_match: {transport_protocol: tls}, filters: [{name: test.greet}]}
`

// TestNoChainAccessLog checks that a connection no filter chain matches is reported to the
// listener's access log, with its addresses and accept time, before it is closed.
func TestNoChainAccessLog(t *testing.T) {
	g := newGreeter()
	logged := make(chan NoChainConn, 1)
	var built *config.Listener
	cfg := ManagerConfig{Services: g.services(), AccessLogs: func(l *config.Listener) (NoChainLog, error) {
		built = l
		return func(c NoChainConn) { logged <- c }, nil
	}}
	m := testManager(t, cfg, listenerFromYAML(t, noChainListener))
	if built == nil || built.Name != "logged" {
		t.Fatalf("AccessLogs built for %v; want the listener \"logged\"", built)
	}
	before := time.Now()
	c, err := net.DialTimeout("tcp", addrOf(t, m, "logged"), wait)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.Write([]byte("plain\n"))
	select {
	case got := <-logged:
		if got.Remote.String() != c.LocalAddr().String() || got.Local.String() != c.RemoteAddr().String() {
			t.Errorf("logged remote %v, local %v; want %v, %v", got.Remote, got.Local, c.LocalAddr(), c.RemoteAddr())
		}
		if got.Start.Before(before.Add(-time.Second)) || got.ID == 0 || got.SNI != "" {
			t.Errorf("logged %+v; want the accept time, an id and no SNI", got)
		}
	case <-time.After(wait):
		t.Fatal("no access log entry for a connection without a filter chain")
	}
	c.SetReadDeadline(time.Now().Add(wait))
	if n, err := c.Read(make([]byte, 1)); n != 0 || err == nil {
		t.Errorf("read after the entry = %d, %v; want the connection closed", n, err)
	}
}

// TestListenerAccessLogRefused checks that a listener's access_log is refused, with the
// listener's name, when the hook refuses it or when there is no hook.
func TestListenerAccessLogRefused(t *testing.T) {
	l := listenerFromYAML(t, noChainListener)
	for _, c := range []struct {
		hook func(*config.Listener) (NoChainLog, error)
		want string
	}{
		{nil, `listener "logged": access_log: listener access logs are not available`},
		{func(*config.Listener) (NoChainLog, error) { return nil, errors.New("access_log[0]: bad") }, `listener "logged": access_log[0]: bad`},
	} {
		m, err := NewManager(ManagerConfig{Stats: newStore(t), Services: newGreeter().services(), Extensions: testExtensions(t), AccessLogs: c.hook})
		if err != nil {
			t.Fatal(err)
		}
		err = m.AddStatic([]*config.Listener{l})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("AddStatic error %v; want %q", err, c.want)
		}
		m.Close()
	}
}
