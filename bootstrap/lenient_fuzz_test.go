package bootstrap

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// FuzzLenientForms is a differential test of the loader rules: a bootstrap that loads is
// printed in canonical proto3 JSON, rewritten at random into the lenient forms Envoy's loader
// accepts (lenientize), and loaded again; both loads must give the same Bootstrap.
func FuzzLenientForms(f *testing.F) {
	for _, name := range []string{"base.yaml", "v3.yaml"} {
		data, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data, uint64(1))
	}
	f.Add([]byte(hcm(routeConfig+routerFilter)), uint64(7))
	f.Add([]byte(`dynamic_resources: {ads_config: {api_type: GRPC, transport_api_version: V3, grpc_services: [{envoy_grpc: {cluster_name: xds}, timeout: 1.5s}]}}
stats_config: {use_all_default_tags: true}`), uint64(3))
	f.Fuzz(func(t *testing.T, data []byte, seed uint64) {
		canonical, err := Parse(data, FormatYAML, Options{Name: "canonical"})
		if err != nil {
			return // only loadable bootstraps have a canonical form to vary
		}
		tree := canonicalTree(t, canonical.Bootstrap)
		r := rand.New(rand.NewPCG(seed, seed>>32|1))
		md := canonical.Bootstrap.ProtoReflect().Descriptor()
		lenient, err := json.Marshal(lenientize(r, md, tree))
		if err != nil {
			t.Fatal(err)
		}
		got, err := Parse(lenient, FormatJSON, Options{Name: "lenient"})
		if err != nil {
			t.Fatalf("lenient form %s\nfails to load: %v", lenient, err)
		}
		if !proto.Equal(got.Bootstrap, canonical.Bootstrap) {
			t.Fatalf("lenient form %s\nloads differently (-canonical +lenient):\n%s", lenient,
				cmp.Diff(canonical.Bootstrap, got.Bootstrap, protocmp.Transform()))
		}
	})
}

// canonicalTree is m's canonical JSON (proto field names) as a generic tree.
func canonicalTree(t *testing.T, m proto.Message) map[string]any {
	b, err := protojson.MarshalOptions{UseProtoNames: true}.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var tree map[string]any
	if err := dec.Decode(&tree); err != nil {
		t.Fatal(err)
	}
	return tree
}

// lenientize rewrites the canonical JSON v of a message of type md into lenient forms, each
// chosen at random.
func lenientize(r *rand.Rand, md protoreflect.MessageDescriptor, v any) any {
	switch md.FullName() {
	case "google.protobuf.Struct", "google.protobuf.Value", "google.protobuf.ListValue", "google.protobuf.FieldMask":
		return v
	case "google.protobuf.Any":
		return lenientAny(r, v)
	case "google.protobuf.Duration", "google.protobuf.Timestamp":
		return lenientTime(r, md, v)
	}
	if fd := md.Fields().ByName("value"); fd != nil && strings.HasSuffix(string(md.FullName()), "Value") && md.ParentFile().Package() == "google.protobuf" {
		if r.IntN(2) == 0 {
			return map[string]any{"value": lenientScalar(r, fd, v)}
		}
		return lenientScalar(r, fd, v)
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return v
	}
	out := make(map[string]any, len(obj))
	for k, val := range obj {
		fd := findField(md, k)
		if fd == nil {
			out[k] = val
			continue
		}
		out[k] = lenientField(r, fd, val)
	}
	return out
}

func lenientField(r *rand.Rand, fd protoreflect.FieldDescriptor, v any) any {
	switch {
	case fd.IsMap():
		obj, _ := v.(map[string]any)
		out := make(map[string]any, len(obj))
		for k, e := range obj {
			out[k] = lenientSingle(r, fd.MapValue(), e)
		}
		return out
	case fd.IsList():
		list, _ := v.([]any)
		out := make([]any, len(list))
		for i, e := range list {
			out[i] = lenientSingle(r, fd, e)
		}
		free := fd.Message() != nil && (fd.Message().FullName() == "google.protobuf.Value" || fd.Message().FullName() == "google.protobuf.ListValue")
		switch {
		case free:
			return out
		case len(out) == 1 && r.IntN(2) == 0:
			return out[0] // a single value for a list of one
		case len(out) > 1 && r.IntN(3) == 0:
			return []any{out[:1], []any{out[1:]}} // nested lists, spliced by the loader
		}
		return out
	}
	return lenientSingle(r, fd, v)
}

func lenientSingle(r *rand.Rand, fd protoreflect.FieldDescriptor, v any) any {
	if fd.Message() != nil {
		return lenientize(r, fd.Message(), v)
	}
	return lenientScalar(r, fd, v)
}

// lenientScalar rewrites an enum, bool or integer value.
func lenientScalar(r *rand.Rand, fd protoreflect.FieldDescriptor, v any) any {
	switch fd.Kind() {
	case protoreflect.EnumKind:
		name, ok := v.(string)
		if !ok || fd.Enum().FullName() == "google.protobuf.NullValue" {
			return v
		}
		ev := fd.Enum().Values().ByName(protoreflect.Name(name))
		switch {
		case ev == nil:
			return v
		case r.IntN(2) == 0:
			return strings.ToLower(name)
		default:
			return json.Number(strings.TrimSpace(jsonInt(int64(ev.Number()))))
		}
	case protoreflect.BoolKind:
		if b, ok := v.(bool); ok && r.IntN(2) == 0 {
			words := map[bool][]string{true: {"true", "True", "yes", "y", "1", "t"}, false: {"false", "FALSE", "no", "n", "0", "f"}}[b]
			return words[r.IntN(len(words))]
		}
	case protoreflect.StringKind, protoreflect.BytesKind, protoreflect.FloatKind, protoreflect.DoubleKind:
	default:
		if n, ok := v.(json.Number); ok && r.IntN(2) == 0 {
			return string(n)
		}
	}
	return v
}

func jsonInt(n int64) string {
	b, _ := json.Marshal(n)
	return string(b)
}

// lenientTime writes a Duration or Timestamp as the object of its fields.
func lenientTime(r *rand.Rand, md protoreflect.MessageDescriptor, v any) any {
	s, ok := v.(string)
	if !ok || r.IntN(2) == 0 {
		return v
	}
	var m interface {
		proto.Message
		GetSeconds() int64
		GetNanos() int32
	}
	if md.FullName() == "google.protobuf.Duration" {
		m = &durationpb.Duration{}
	} else {
		m = &timestamppb.Timestamp{}
	}
	if err := protojson.Unmarshal([]byte(jsonString(s)), m); err != nil {
		return v
	}
	obj := map[string]any{}
	if m.GetSeconds() != 0 {
		obj["seconds"] = jsonInt(m.GetSeconds()) // 64-bit integers may be strings
	}
	if m.GetNanos() != 0 {
		obj["nanos"] = json.Number(jsonInt(int64(m.GetNanos())))
	}
	return obj
}

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// lenientAny rewrites the fields of an Any's message, and wraps it in a TypedStruct at random.
func lenientAny(r *rand.Rand, v any) any {
	obj, ok := v.(map[string]any)
	if !ok {
		return v
	}
	url, _ := obj["@type"].(string)
	mt, err := protoregistry.GlobalTypes.FindMessageByURL(url)
	if err != nil {
		return v
	}
	md := mt.Descriptor()
	if hasSpecialJSON(md) {
		out := map[string]any{"@type": url}
		if val, ok := obj["value"]; ok {
			out["value"] = lenientize(r, md, val)
		}
		return out
	}
	body := map[string]any{}
	for k, val := range obj {
		if k != "@type" {
			body[k] = val
		}
	}
	body, _ = lenientize(r, md, body).(map[string]any)
	if r.IntN(2) == 0 {
		wrapper := []string{"udpa.type.v1.TypedStruct", "xds.type.v3.TypedStruct"}[r.IntN(2)]
		return map[string]any{"@type": "type.googleapis.com/" + wrapper, "type_url": url, "value": body}
	}
	body["@type"] = url
	return body
}
