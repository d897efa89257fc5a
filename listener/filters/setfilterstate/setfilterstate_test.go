package setfilterstate

import (
	"bufio"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/legateproxy/legate/accesslog"
	"github.com/legateproxy/legate/listener"
	"github.com/legateproxy/legate/listener/filters/chaintest"
)

const filterType = "type.googleapis.com/envoy.extensions.filters.network.set_filter_state.v3.Config"

// value is one FilterStateValue in flow YAML.
func value(key, extra, format string) string {
	return fmt.Sprintf(`{object_key: %s, %s format_string: {text_format_source: {inline_string: %q}}}`, key, extra, format)
}

// TestSetFilterState runs the filter before a terminal filter that prints the connection's
// filter state as an access log format reads it, over a real socket: values are formatted
// against the connection (a later one reads an earlier one), read-only objects are not
// replaced, skip_if_empty skips an empty value, the sharing modes are kept, and
// envoy.tcp_proxy.cluster also sets the TCP proxy's cluster.
func TestSetFilterState(t *testing.T) {
	f, err := accesslog.ParseText("%FILTER_STATE(acme.local:PLAIN)% %FILTER_STATE(acme.derived:PLAIN)% %FILTER_STATE(acme.fixed:PLAIN)% %FILTER_STATE(acme.empty:PLAIN)% %FILTER_STATE(envoy.tcp_proxy.cluster:PLAIN)%", accesslog.Options{})
	if err != nil {
		t.Fatal(err)
	}
	type seen struct{ line, cluster, shared string }
	got := make(chan seen, 1)
	terminal := func(c *listener.Conn) {
		defer c.Close()
		var shared []string
		for _, e := range c.FilterState().Shared() {
			shared = append(shared, fmt.Sprintf("%s/%d", e.Name, e.Sharing))
		}
		e := accesslog.Entry{FilterState: c.FilterState()}
		got <- seen{string(f.Format(nil, &e)), c.UpstreamCluster(), strings.Join(shared, ",")}
		c.Write([]byte("done\n"))
	}
	filters := `{name: ` + Name + `, typed_config: {"@type": ` + filterType + `, on_new_connection: [` +
		value("acme.local", "factory_key: envoy.string, shared_with_upstream: TRANSITIVE,", "%DOWNSTREAM_LOCAL_ADDRESS_WITHOUT_PORT%") + `, ` +
		value("acme.derived", "factory_key: envoy.string, shared_with_upstream: ONCE,", "from-%FILTER_STATE(acme.local:PLAIN)%") + `, ` +
		value("acme.fixed", "factory_key: envoy.string, read_only: true,", "first") + `, ` +
		value("acme.fixed", "factory_key: envoy.string,", "second") + `, ` +
		value("acme.empty", "factory_key: envoy.string, skip_if_empty: true,", "%REQUESTED_SERVER_NAME%") + `, ` +
		value("envoy.tcp_proxy.cluster", "", "backend") + `]}},`
	addr, _, err := chaintest.ServeHandler(t, Register, nil, filters, terminal)
	if err != nil {
		t.Fatal(err)
	}
	c, err := net.DialTimeout("tcp", addr, chaintest.Wait)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(chaintest.Wait))
	if line, err := bufio.NewReader(c).ReadString('\n'); err != nil || line != "done\n" {
		t.Fatalf("terminal filter answered %q, %v", line, err)
	}
	s := <-got
	if want := "127.0.0.1 from-127.0.0.1 first - backend"; s.line != want {
		t.Errorf("filter state = %q; want %q", s.line, want)
	}
	if s.cluster != "backend" {
		t.Errorf("UpstreamCluster() = %q; want backend", s.cluster)
	}
	if want := "acme.local/1,acme.derived/2"; s.shared != want {
		t.Errorf("shared objects = %q; want %q", s.shared, want)
	}
}

// TestSetFilterStateRefusals: what Legate does not implement is refused at load with its
// field path, and so is a value without a key or a format.
func TestSetFilterStateRefusals(t *testing.T) {
	for name, tc := range map[string]struct{ config, want string }{
		"tls handshake":              {`on_downstream_tls_handshake: [` + value("k", "factory_key: envoy.string,", "v") + `]`, "on_downstream_tls_handshake: not implemented by Legate"},
		"data":                       {`on_downstream_data: [` + value("k", "factory_key: envoy.string,", "v") + `]`, "on_downstream_data: not implemented by Legate"},
		"factory":                    {`on_new_connection: [` + value("k", "factory_key: envoy.network.upstream_server_name,", "v") + `]`, `on_new_connection[0].factory_key: "envoy.network.upstream_server_name": not implemented by Legate`},
		"custom key without factory": {`on_new_connection: [` + value("my.key", "", "v") + `]`, `factory_key: "my.key": not implemented by Legate`},
		"json":                       {`on_new_connection: [{object_key: k, factory_key: envoy.string, format_string: {json_format: {a: b}}}]`, "format_string.json_format: not implemented by Legate"},
		"no format":                  {`on_new_connection: [{object_key: k, factory_key: envoy.string}]`, "format_string: required"},
		"bad format":                 {`on_new_connection: [` + value("k", "factory_key: envoy.string,", "%NOPE%") + `]`, "on_new_connection[0].format_string"},
	} {
		t.Run(name, func(t *testing.T) {
			_, _, err := chaintest.Serve(t, Register, nil, `{name: `+Name+`, typed_config: {"@type": `+filterType+`, `+tc.config+`}},`)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("adding the listener: %v; want an error containing %q", err, tc.want)
			}
		})
	}
}
