package config

import (
	"strings"
	"testing"
)

// TestBootstrapInternalListener: the envoy.bootstrap.internal_listener extension is read with
// its buffer size (default 64 KiB; Istio writes it as a TypedStruct), and any other bootstrap
// extension is refused by name.
func TestBootstrapInternalListener(t *testing.T) {
	for _, tc := range []struct {
		yaml string
		want int
	}{
		{`bootstrap_extensions: [{name: envoy.bootstrap.internal_listener, typed_config: {"@type": type.googleapis.com/envoy.extensions.bootstrap.internal_listener.v3.InternalListener}}]`, 64 << 10},
		{`bootstrap_extensions: [{name: x, typed_config: {"@type": type.googleapis.com/envoy.extensions.bootstrap.internal_listener.v3.InternalListener, buffer_size_kb: 8}}]`, 8 << 10},
		{`bootstrap_extensions: [{name: envoy.bootstrap.internal_listener, typed_config: {"@type": type.googleapis.com/udpa.type.v1.TypedStruct, type_url: type.googleapis.com/envoy.extensions.bootstrap.internal_listener.v3.InternalListener}}]`, 64 << 10},
	} {
		b, err := load(t, tc.yaml, Limits{})
		if err != nil {
			t.Fatalf("%s: %v", tc.yaml, err)
		}
		if b.InternalListener == nil || b.InternalListener.BufferSize != tc.want {
			t.Errorf("%s: InternalListener = %+v; want buffer %d", tc.yaml, b.InternalListener, tc.want)
		}
	}
	b, err := load(t, `admin: {}`, Limits{})
	if err != nil || b.InternalListener != nil {
		t.Errorf("without the extension: %+v, %v; want no internal listener support", b, err)
	}
	_, err = load(t, `bootstrap_extensions: [{name: envoy.bootstrap.wasm, typed_config: {"@type": type.googleapis.com/envoy.extensions.regex_engines.v3.GoogleRE2}}]`, Limits{})
	if err == nil || !strings.Contains(err.Error(), `bootstrap_extensions[0]: "envoy.bootstrap.wasm"`) || !strings.Contains(err.Error(), "not implemented by Legate") {
		t.Errorf("another extension: %v; want it refused by name", err)
	}
}

// TestInternalListenerConfig: an internal listener needs a name, takes no socket address and
// gets its own name as its internal address; an internal address on a socket listener is
// refused.
func TestInternalListenerConfig(t *testing.T) {
	chain := "filter_chains: [{filters: [{name: envoy.filters.network.tcp_proxy, typed_config: {\"@type\": type.googleapis.com/envoy.extensions.filters.network.tcp_proxy.v3.TcpProxy, stat_prefix: s, cluster: c}}]}]\n"
	l, err := ListenerFromProto(listenerProto(t, "name: inner\ninternal_listener: {}\n"+chain), Limits{})
	if err != nil || !l.Internal || l.Address.String() != "envoy://inner/" {
		t.Fatalf("internal listener: %+v, %v", l, err)
	}
	for _, tc := range []struct{ yaml, want string }{
		{"internal_listener: {}\n" + chain, "an internal listener is found by its name"},
		{"name: a\ninternal_listener: {}\naddress: {socket_address: {address: 127.0.0.1, port_value: 1}}\n" + chain, "it can only be an envoy_internal_address"},
		{"name: a\ninternal_listener: {}\naddress: {envoy_internal_address: {server_listener_name: b}}\n" + chain, "names the listener itself"},
		{"name: a\naddress: {envoy_internal_address: {server_listener_name: a}}\n" + chain, "set on a listener without internal_listener"},
		{"name: a\ninternal_listener: {}\nlistener_filters: [{name: envoy.filters.listener.original_dst}]\n" + chain, "a pipe or an internal listener has none"},
	} {
		if _, err := ListenerFromProto(listenerProto(t, tc.yaml), Limits{}); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v; want an error containing %q", tc.yaml, err, tc.want)
		}
	}
}
