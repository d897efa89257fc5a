package bootstrap

import (
	"encoding/json"
	"fmt"
	"strings"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// The v2 → v3 spelling upgrades. Envoy's v3 API dropped a few v2 fields that old bootstrap files
// still use; each is rewritten here, on the generic JSON tree, into the v3 form Envoy documents
// as its replacement, before the strict walk checks the result. Every rewrite is recorded in
// Loaded.Upgraded; a rewrite that would lose information is an error instead.

// upgrade applies the rewrites that belong to messages of type md.
func (w *walker) upgrade(path string, md protoreflect.MessageDescriptor, obj map[string]any) {
	switch md.FullName() {
	case "envoy.config.cluster.v3.Cluster":
		w.upgradeHosts(path, obj)
		w.upgradeTLSContext(path, obj, upstreamTLSURL())
		w.upgradeOriginalDstLB(path, obj)
		w.renameField(path, obj, "drain_connections_on_host_removal", "ignore_health_on_host_removal")
		w.upgradeProtocolOptions(path, obj)
	case "envoy.config.listener.v3.FilterChain":
		w.upgradeTLSContext(path, obj, downstreamTLSURL())
	case "envoy.extensions.transport_sockets.tls.v3.CertificateValidationContext":
		w.upgradeVerifySAN(path, obj)
	}
	if fd := md.Fields().ByName("typed_config"); fd != nil && fd.Message() != nil &&
		fd.Message().FullName() == "google.protobuf.Any" && md.Fields().ByName("config") == nil {
		w.upgradeUntypedConfig(path, obj)
	}
}

// lookup returns the key under which obj holds the field with proto name name, accepting the
// proto spelling and the JSON (lowerCamelCase) spelling as protojson does.
func lookup(obj map[string]any, name string) (string, bool) {
	if _, ok := obj[name]; ok {
		return name, true
	}
	j := jsonName(name)
	_, ok := obj[j]
	return j, ok
}

// jsonName is protobuf's JSON name of a proto field name: underscores dropped, the letter after
// each one upper-cased.
func jsonName(name string) string {
	var b strings.Builder
	upper := false
	for _, r := range name {
		switch {
		case r == '_':
			upper = true
		case upper && 'a' <= r && r <= 'z':
			b.WriteRune(r - 'a' + 'A')
			upper = false
		default:
			b.WriteRune(r)
			upper = false
		}
	}
	return b.String()
}

// take removes the field name (either spelling) from obj and returns its value and path.
func take(path string, obj map[string]any, name string) (v any, fpath string, ok bool) {
	k, ok := lookup(obj, name)
	if !ok {
		return nil, "", false
	}
	v = obj[k]
	delete(obj, k)
	return v, joinPath(path, k), true
}

// isSet reports whether obj holds a non-null value for the field name.
func isSet(obj map[string]any, name string) (string, bool) {
	k, ok := lookup(obj, name)
	return k, ok && obj[k] != nil
}

// upgradeHosts rewrites the v2 cluster field `hosts` (a list of Address) as a load_assignment
// with one locality holding one lb_endpoint per host, named after the cluster. As in v2, a
// load_assignment that is also present wins and the hosts are dropped.
func (w *walker) upgradeHosts(path string, c map[string]any) {
	hosts, hpath, ok := take(path, c, "hosts")
	if !ok || hosts == nil {
		return
	}
	if _, has := isSet(c, "load_assignment"); has {
		w.noteUpgrade(hpath, "v2 field dropped: load_assignment is also set and overrides it")
		return
	}
	list, isList := hosts.([]any)
	if !isList {
		list = []any{hosts} // a single address for a list of one, as for any repeated field
	}
	before := len(w.p.errs)
	address := (&corev3.Address{}).ProtoReflect().Descriptor()
	lbEndpoints := make([]any, len(list))
	for i, h := range list {
		epath := hpath
		if isList {
			epath = fmt.Sprintf("%s[%d]", hpath, i)
		}
		w.message(epath, address, h, false)
		lbEndpoints[i] = map[string]any{"endpoint": map[string]any{"address": h}}
	}
	if len(w.p.errs) > before {
		return // the hosts were reported where the user wrote them
	}
	name := ""
	if k, ok := lookup(c, "name"); ok {
		name, _ = c[k].(string)
	}
	assignment := map[string]any{"cluster_name": name}
	if len(list) > 0 {
		assignment["endpoints"] = []any{map[string]any{"lb_endpoints": lbEndpoints}}
	}
	c["load_assignment"] = assignment
	w.noteUpgrade(hpath, "v2 field rewritten as load_assignment")
}

// upgradeTLSContext rewrites the v2 field `tls_context` of a cluster or filter chain as a
// transport_socket named envoy.transport_sockets.tls whose typed_config (of type url) holds the
// same fields.
func (w *walker) upgradeTLSContext(path string, obj map[string]any, url string) {
	tls, tpath, ok := take(path, obj, "tls_context")
	if !ok || tls == nil {
		return
	}
	if k, has := isSet(obj, "transport_socket"); has {
		w.p.add(tpath, fmt.Sprintf("v2 field tls_context and %s are both set; keep only %s", k, k))
		return
	}
	fields, ok := tls.(map[string]any)
	if !ok {
		w.p.add(tpath, fmt.Sprintf("got %s; want an object (a TLS context)", describe(tls)))
		return
	}
	typed := map[string]any{"@type": url}
	for k, v := range fields {
		typed[k] = v
	}
	obj["transport_socket"] = map[string]any{"name": "envoy.transport_sockets.tls", "typed_config": typed}
	w.noteUpgrade(tpath, "v2 field rewritten as transport_socket envoy.transport_sockets.tls")
}

// upgradeOriginalDstLB rewrites the v2 policy `lb_policy: ORIGINAL_DST_LB` as v3's
// CLUSTER_PROVIDED, with type ORIGINAL_DST, the only discovery type v2 allowed it with.
func (w *walker) upgradeOriginalDstLB(path string, c map[string]any) {
	k, ok := lookup(c, "lb_policy")
	if !ok || !isEnumValue(c[k], "ORIGINAL_DST_LB", 4) {
		return
	}
	lpath := joinPath(path, k)
	if ck, has := isSet(c, "cluster_type"); has {
		w.p.add(lpath, fmt.Sprintf("v2 value ORIGINAL_DST_LB needs type ORIGINAL_DST, but %s is set", ck))
		return
	}
	originalDst := clusterv3.Cluster_ORIGINAL_DST
	if tk, has := isSet(c, "type"); has {
		if !isEnumValue(c[tk], originalDst.String(), int64(originalDst)) {
			w.p.add(lpath, fmt.Sprintf("v2 value ORIGINAL_DST_LB needs type ORIGINAL_DST; got %s = %s", tk, describe(c[tk])))
			return
		}
	} else {
		c["type"] = originalDst.String()
	}
	c[k] = clusterv3.Cluster_CLUSTER_PROVIDED.String()
	w.noteUpgrade(lpath, "v2 value ORIGINAL_DST_LB rewritten as CLUSTER_PROVIDED with type ORIGINAL_DST")
}

// isEnumValue reports whether a JSON value spells the enum value with this name or number.
func isEnumValue(v any, name string, number int64) bool {
	switch x := v.(type) {
	case string:
		return strings.EqualFold(x, name) // Envoy reads enum names in any case
	case json.Number:
		n, err := x.Int64()
		return err == nil && n == number
	}
	return false
}

// renameField moves a v2 field to the v3 field that replaced it with the same meaning.
func (w *walker) renameField(path string, obj map[string]any, old, renamed string) {
	v, opath, ok := take(path, obj, old)
	if !ok {
		return
	}
	if k, has := lookup(obj, renamed); has {
		w.p.add(opath, fmt.Sprintf("v2 field %s and its v3 name %s are both set; keep only %s", old, k, k))
		return
	}
	obj[renamed] = v
	w.noteUpgrade(opath, "v2 field renamed "+renamed)
}

// upgradeProtocolOptions rewrites the v2 map `extension_protocol_options` (key → Struct) as
// entries of typed_extension_protocol_options (key → Any). Only keys whose typed message is known
// (v2ProtocolOptionsKey) can be rewritten; any other key is an error, since its type cannot be
// guessed.
func (w *walker) upgradeProtocolOptions(path string, c map[string]any) {
	raw, epath, ok := take(path, c, "extension_protocol_options")
	if !ok || raw == nil {
		return
	}
	opts, ok := raw.(map[string]any)
	if !ok {
		w.p.add(epath, fmt.Sprintf("got %s; want an object (a map)", describe(raw)))
		return
	}
	tk, has := lookup(c, "typed_extension_protocol_options")
	typed := map[string]any{}
	if has && c[tk] != nil {
		if typed, ok = c[tk].(map[string]any); !ok {
			return // the walk reports the typed map's own type error
		}
	}
	for _, key := range sortedKeys(opts) {
		kpath := fmt.Sprintf("%s[%q]", epath, key)
		newKey, url, known := v2ProtocolOptionsKey(key)
		if !known {
			w.p.add(kpath, "no typed message is known for this v2 key; write typed_extension_protocol_options with an \"@type\" instead")
			continue
		}
		body, ok := opts[key].(map[string]any)
		if !ok && opts[key] != nil {
			w.p.add(kpath, fmt.Sprintf("got %s; want an object", describe(opts[key])))
			continue
		}
		if _, dup := typed[newKey]; dup {
			w.p.add(kpath, fmt.Sprintf("typed_extension_protocol_options[%q] is also set; keep only one", newKey))
			continue
		}
		entry := map[string]any{"@type": url}
		for k, v := range body {
			entry[k] = v
		}
		typed[newKey] = entry
		w.noteUpgrade(kpath, fmt.Sprintf("v2 entry rewritten as typed_extension_protocol_options[%q]", newKey))
	}
	if len(typed) > 0 {
		c[tk] = typed
	}
}

// upgradeVerifySAN rewrites the v2 list `verify_subject_alt_name` (exact names) as v3's
// match_subject_alt_names with exact matchers.
func (w *walker) upgradeVerifySAN(path string, obj map[string]any) {
	raw, vpath, ok := take(path, obj, "verify_subject_alt_name")
	if !ok || raw == nil {
		return
	}
	names, ok := raw.([]any)
	if !ok {
		w.p.add(vpath, fmt.Sprintf("got %s; want a list of strings", describe(raw)))
		return
	}
	mk, has := lookup(obj, "match_subject_alt_names")
	matchers, _ := obj[mk].([]any)
	if has && obj[mk] != nil && matchers == nil {
		return // the walk reports the list's own type error
	}
	for i, n := range names {
		if _, ok := n.(string); !ok {
			w.p.add(fmt.Sprintf("%s[%d]", vpath, i), fmt.Sprintf("got %s; want a string", describe(n)))
			return
		}
		matchers = append(matchers, map[string]any{"exact": n})
	}
	obj[mk] = matchers
	w.noteUpgrade(vpath, "v2 field rewritten as match_subject_alt_names (exact)")
}

// upgradeUntypedConfig handles the v2 untyped form `config: {...}` (a Struct) of an extension
// (filter, access log, stats sink) next to its name. v3 only knows typed_config. The rewrite is
// done only when it cannot change meaning: a known extension name with an empty config becomes
// typed_config {"@type": <its v3 type>}. Anything else is an error that says what to write.
func (w *walker) upgradeUntypedConfig(path string, obj map[string]any) {
	cfg, cpath, ok := take(path, obj, "config")
	if !ok {
		return
	}
	name := ""
	if k, has := lookup(obj, "name"); has {
		name, _ = obj[k].(string)
	}
	if k, has := isSet(obj, "typed_config"); has {
		w.p.add(cpath, fmt.Sprintf("v2 field config and %s are both set; keep only %s", k, k))
		return
	}
	url, known := v2FilterType(name)
	body, isObject := cfg.(map[string]any)
	empty := cfg == nil || (isObject && len(body) == 0)
	switch {
	case !known:
		w.p.add(cpath, fmt.Sprintf("the v2 untyped config form is not supported for extension %q; write typed_config with an \"@type\"", name))
	case !empty:
		w.p.add(cpath, fmt.Sprintf("the v2 untyped config form is supported only when empty; write typed_config: {\"@type\": %q, ...} instead", url))
	default:
		obj["typed_config"] = map[string]any{"@type": url}
		w.noteUpgrade(cpath, fmt.Sprintf("empty v2 config rewritten as typed_config of %s", url))
	}
}
