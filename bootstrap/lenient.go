package bootstrap

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// The forms Envoy's loader accepts beyond the canonical proto3 JSON mapping. Envoy parses with
// protobuf's JSON parser in its legacy mode, with case-insensitive enums
// (MessageUtil::loadFromJson); the walk rewrites each of these forms into the canonical one,
// so that what protojson finally decodes is the same message:
//   - an enum value by its name in any case, or by its number as a string ("1");
//   - a bool as a string ("true", "yes", "1", ..., absl::SimpleAtob);
//   - an integer as a string or as a number with no fractional part (1.0, 1e3);
//   - Duration, Timestamp and the wrappers as objects of their fields ({seconds: 1, nanos: 5},
//     {value: 3});
//   - a single value for a list of one, nested lists spliced, null elements as defaults (list in
//     walk.go);
//   - udpa.type.v1.TypedStruct and xds.type.v3.TypedStruct as the Any of the message they
//     describe (Envoy's translateOpaqueConfig).

// enum returns the canonical form of an enum value: its name when ed has it, else its number.
func (w *walker) enum(path string, ed protoreflect.EnumDescriptor, v any) any {
	if ed.FullName() == "google.protobuf.NullValue" && v == nil {
		return v
	}
	switch x := v.(type) {
	case string:
		if ev := enumByName(ed, x); ev != nil {
			return string(ev.Name())
		}
		if n, err := strconv.ParseInt(x, 10, 32); err == nil {
			return enumNumber(ed, int32(n))
		}
		w.p.add(path, fmt.Sprintf("unknown value %q for enum %s; want one of %s", x, ed.Name(), enumNames(ed)))
	case json.Number:
		if n, ok := legacyInt(x, protoreflect.Int32Kind); ok {
			i, _ := n.Int64()
			return enumNumber(ed, int32(i))
		}
		w.p.add(path, fmt.Sprintf("got %s; want a value of enum %s (%s)", describe(v), ed.Name(), enumNames(ed)))
	default:
		w.p.add(path, fmt.Sprintf("got %s; want a value of enum %s (%s)", describe(v), ed.Name(), enumNames(ed)))
	}
	return v
}

// enumByName finds a value by name, exactly or else ignoring case.
func enumByName(ed protoreflect.EnumDescriptor, name string) protoreflect.EnumValueDescriptor {
	vals := ed.Values()
	if ev := vals.ByName(protoreflect.Name(name)); ev != nil {
		return ev
	}
	for i := range vals.Len() {
		if strings.EqualFold(string(vals.Get(i).Name()), name) {
			return vals.Get(i)
		}
	}
	return nil
}

// enumNumber is the canonical form of an enum number: the name of its value, or the number
// itself when ed has none (proto3 enums are open).
func enumNumber(ed protoreflect.EnumDescriptor, n int32) any {
	if ev := ed.Values().ByNumber(protoreflect.EnumNumber(n)); ev != nil {
		return string(ev.Name())
	}
	return json.Number(strconv.FormatInt(int64(n), 10))
}

// scalar checks a value of a scalar field of kind k and returns its canonical form.
func (w *walker) scalar(path string, k protoreflect.Kind, v any) any {
	switch k {
	case protoreflect.BoolKind:
		if s, ok := v.(string); ok {
			if b, ok := atob(s); ok {
				return b
			}
		}
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind,
		protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind,
		protoreflect.Uint32Kind, protoreflect.Fixed32Kind, protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		if n, ok := legacyInt(v, k); ok {
			return n
		}
		w.p.add(path, fmt.Sprintf("got %s; want %s", describe(v), scalarWant(k)))
		return v
	}
	if !leafOK(scalarLeaf(k), v) {
		w.p.add(path, fmt.Sprintf("got %s; want %s", describe(v), scalarWant(k)))
	}
	return v
}

// atob is absl::SimpleAtob, which protobuf's legacy parser uses for a bool given as a string.
func atob(s string) (value, ok bool) {
	switch strings.ToLower(s) {
	case "true", "t", "yes", "y", "1":
		return true, true
	case "false", "f", "no", "n", "0":
		return false, true
	}
	return false, false
}

// legacyInt reads an integer of kind k as protobuf's parser does: a JSON number or a string
// holding one, written as an integer or as a number with no fractional part (within ±2^53, the
// doubles that are exact). It returns the canonical decimal.
func legacyInt(v any, k protoreflect.Kind) (json.Number, bool) {
	var s string
	switch x := v.(type) {
	case json.Number:
		s = string(x)
	case string:
		if strings.ContainsAny(x, " \t\n\r\f\v") {
			return "", false
		}
		s = x
	default:
		return "", false
	}
	unsigned := k == protoreflect.Uint32Kind || k == protoreflect.Fixed32Kind ||
		k == protoreflect.Uint64Kind || k == protoreflect.Fixed64Kind
	bits := 64
	if k == protoreflect.Int32Kind || k == protoreflect.Sint32Kind || k == protoreflect.Sfixed32Kind ||
		k == protoreflect.Uint32Kind || k == protoreflect.Fixed32Kind {
		bits = 32
	}
	if unsigned {
		if u, err := strconv.ParseUint(s, 10, bits); err == nil {
			return json.Number(strconv.FormatUint(u, 10)), true
		}
	} else if i, err := strconv.ParseInt(s, 10, bits); err == nil {
		return json.Number(strconv.FormatInt(i, 10)), true
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsInf(f, 0) || math.IsNaN(f) || f != math.Trunc(f) || math.Abs(f) > 1<<53 {
		return "", false
	}
	switch {
	case unsigned && f < 0:
		return "", false
	case unsigned && bits == 32 && f > math.MaxUint32:
		return "", false
	case !unsigned && bits == 32 && (f < math.MinInt32 || f > math.MaxInt32):
		return "", false
	}
	return json.Number(strconv.FormatInt(int64(f), 10)), true
}

// wellKnown checks a Duration, Timestamp, FieldMask or wrapper and returns its canonical
// form. Besides that form, Envoy's parser takes the message's fields as an object
// ({seconds: 1}, {value: 3}); the wrappers' values are read as their scalar field.
func (w *walker) wellKnown(path string, md protoreflect.MessageDescriptor, v any) any {
	leaf, want, _ := wellKnownLeaf(md)
	if obj, ok := v.(map[string]any); ok && md.FullName() != "google.protobuf.FieldMask" {
		return w.wellKnownObject(path, md, leaf, obj)
	}
	if fd := md.Fields().ByName("value"); fd != nil && md.Fields().Len() == 1 {
		return w.scalar(path, fd.Kind(), v)
	}
	if !leafOK(leaf, v) {
		w.p.add(path, leafRule(md, v, want))
	}
	return v
}

// wellKnownObject reads the object form of a well-known message (its scalar fields) into m and
// returns m's canonical JSON.
func (w *walker) wellKnownObject(path string, md protoreflect.MessageDescriptor, m proto.Message, obj map[string]any) any {
	before := len(w.p.errs)
	w.object(path, md, obj, false)
	if len(w.p.errs) > before {
		return obj
	}
	r := m.ProtoReflect()
	for k, v := range obj {
		fd := findField(md, k)
		if v == nil {
			continue
		}
		fv, err := scalarValue(fd, v)
		if err != nil {
			w.p.add(joinPath(path, k), err.Error())
			return obj
		}
		r.Set(fd, fv)
	}
	b, err := protojson.Marshal(m)
	if err != nil {
		w.p.add(path, fmt.Sprintf("invalid %s: %v", md.Name(), err))
		return obj
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var out any
	if err := dec.Decode(&out); err != nil {
		w.p.add(path, fmt.Sprintf("invalid %s: %v", md.Name(), err))
		return obj
	}
	return out
}

// scalarValue decodes the canonical JSON form v of a scalar field.
func scalarValue(fd protoreflect.FieldDescriptor, v any) (protoreflect.Value, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return protoreflect.Value{}, err
	}
	m := scalarLeaf(fd.Kind())
	if err := protojson.Unmarshal(b, m); err != nil {
		return protoreflect.Value{}, fmt.Errorf("got %s; want %s", describe(v), scalarWant(fd.Kind()))
	}
	r := m.ProtoReflect()
	return r.Get(r.Descriptor().Fields().ByName("value")), nil
}

// isTypedStruct reports whether md is one of the TypedStruct messages Envoy opens in place of
// the extension configuration they describe.
func isTypedStruct(md protoreflect.MessageDescriptor) bool {
	switch md.FullName() {
	case "udpa.type.v1.TypedStruct", "xds.type.v3.TypedStruct":
		return true
	}
	return false
}

// typedStruct converts the JSON of an Any holding a TypedStruct (obj) into the JSON of an Any
// of the message its type_url names, whose fields are those of its value: what Envoy does
// before it builds any extension.
func (w *walker) typedStruct(path string, md protoreflect.MessageDescriptor, obj map[string]any) any {
	before := len(w.p.errs)
	w.object(path, md, obj, true)
	if len(w.p.errs) > before {
		return obj
	}
	uk, _ := lookup(obj, "type_url")
	url, _ := obj[uk].(string)
	upath := joinPath(path, "type_url")
	if url == "" {
		w.p.add(upath, "missing; a TypedStruct needs the type URL of the message its value holds")
		return obj
	}
	inner, ok := w.extensionType(upath, url)
	if !ok {
		return obj
	}
	vk, _ := lookup(obj, "value")
	body, _ := obj[vk].(map[string]any)
	if body == nil {
		body = map[string]any{}
	}
	vpath := joinPath(path, "value")
	if isTypedStruct(inner) || hasSpecialJSON(inner) {
		w.p.add(upath, fmt.Sprintf("a TypedStruct cannot hold %s", inner.FullName()))
		return obj
	}
	out := w.object(vpath, inner, body, false)
	out["@type"] = url
	return out
}
