package bootstrap

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/fieldmaskpb"
	"google.golang.org/protobuf/types/known/timestamppb"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// walker checks a generic JSON tree (maps, slices, json.Number, strings, bools, nil) against a
// message descriptor before protojson sees it, so that every problem can be reported with its
// field path; protojson alone stops at the first problem and gives only a byte offset. Along the
// way it applies the v2 → v3 spelling upgrades (upgrade.go) and, when unknown fields are
// allowed, deletes them from the tree. The rules mirror protojson's: where they could differ,
// each leaf is handed to protojson itself (leafOK).
type walker struct {
	p            *problems
	allowUnknown bool
	// warnings lists the unknown fields dropped (allowUnknown only), one per field.
	warnings []string
	// upgraded lists the v2 spellings rewritten, one per rewrite.
	upgraded []string
}

func (w *walker) warn(path, what string) {
	w.warnings = append(w.warnings, w.p.file+": "+path+": "+what)
}

func (w *walker) noteUpgrade(path, what string) {
	w.upgraded = append(w.upgraded, w.p.file+": "+path+": "+what)
}

// message checks v as the JSON form of a message of type md and returns its canonical form:
// what protojson accepts for the same message. inAny is true when v is the body of an Any,
// whose "@type" key has already been consumed.
func (w *walker) message(path string, md protoreflect.MessageDescriptor, v any, inAny bool) any {
	switch md.FullName() {
	case "google.protobuf.Any":
		return w.anyMessage(path, v)
	case "google.protobuf.Struct":
		if _, ok := v.(map[string]any); !ok {
			w.p.add(path, fmt.Sprintf("got %s; want an object", describe(v)))
		}
		return w.noRepeats(path, v)
	case "google.protobuf.ListValue":
		if _, ok := v.([]any); !ok {
			w.p.add(path, fmt.Sprintf("got %s; want a list", describe(v)))
		}
		return w.noRepeats(path, v)
	case "google.protobuf.Value":
		return w.noRepeats(path, v) // any JSON value
	}
	if _, _, ok := wellKnownLeaf(md); ok {
		return w.wellKnown(path, md, v)
	}
	obj, ok := v.(map[string]any)
	if !ok {
		w.p.add(path, fmt.Sprintf("got %s; want an object (%s)", describe(v), md.FullName()))
		return v
	}
	return w.object(path, md, obj, inAny)
}

// object checks the fields of obj, the JSON object of a message of type md, and replaces each
// value with its canonical form.
func (w *walker) object(path string, md protoreflect.MessageDescriptor, obj map[string]any, inAny bool) map[string]any {
	for k, v := range obj {
		r, repeated := v.(jsonRepeat)
		switch fd := findField(md, k); {
		case !repeated || inAny && k == "@type":
		case fd == nil:
			obj[k] = r[len(r)-1] // an unknown field, reported below
		default:
			obj[k] = w.mergeRepeat(joinPath(path, k), fd, r)
		}
	}
	w.upgrade(path, md, obj)
	seen := make(map[protoreflect.FieldNumber]string)
	oneofs := make(map[protoreflect.Name]string)
	for _, k := range sortedKeys(obj) {
		if inAny && k == "@type" {
			continue
		}
		fpath := joinPath(path, k)
		fd := findField(md, k)
		if fd == nil {
			if w.allowUnknown {
				delete(obj, k)
				w.warn(fpath, "unknown field ignored")
				continue
			}
			w.p.add(fpath, fmt.Sprintf("unknown field (not in %s)", md.FullName()))
			continue
		}
		if prev, dup := seen[fd.Number()]; dup {
			w.p.add(fpath, fmt.Sprintf("field set twice, as %q and %q", prev, k))
			continue
		}
		seen[fd.Number()] = k
		val := obj[k]
		if val == nil && !acceptsNull(fd) {
			continue // protojson treats null as "not set"
		}
		if od := fd.ContainingOneof(); od != nil && !od.IsSynthetic() {
			if prev, set := oneofs[od.Name()]; set {
				w.p.add(fpath, fmt.Sprintf("%q is already set; %s and %s belong to oneof %s, set at most one", prev, prev, k, od.Name()))
				continue
			}
			oneofs[od.Name()] = k
		}
		obj[k] = w.field(fpath, fd, val)
	}
	return obj
}

// anyMessage checks the JSON form of a google.protobuf.Any: "@type" must name a registered
// message (see extensions.go); the other keys are that message's fields, or "value" for the
// well-known types with a special JSON form. A TypedStruct is replaced by the Any of the
// message it describes (typedStruct).
func (w *walker) anyMessage(path string, v any) any {
	obj, ok := v.(map[string]any)
	if !ok {
		w.p.add(path, fmt.Sprintf("got %s; want an object with an \"@type\"", describe(v)))
		return v
	}
	raw, present := obj["@type"]
	url, isString := raw.(string)
	tpath := joinPath(path, "@type")
	if _, repeated := raw.(jsonRepeat); repeated {
		w.p.add(tpath, "repeated in one Any")
		return v
	}
	switch {
	case !present:
		w.p.add(tpath, "missing; a typed_config needs an \"@type\"")
		return v
	case !isString:
		w.p.add(tpath, fmt.Sprintf("got %s; want a type URL string", describe(raw)))
		return v
	}
	md, ok := w.extensionType(tpath, url)
	if !ok {
		return v
	}
	if isTypedStruct(md) {
		return w.typedStruct(path, md, obj)
	}
	if hasSpecialJSON(md) {
		for _, k := range sortedKeys(obj) {
			if k != "@type" && k != "value" {
				w.p.add(joinPath(path, k), fmt.Sprintf("unknown field; an Any of %s holds only \"value\"", md.FullName()))
			}
		}
		if val, ok := obj["value"]; ok {
			if r, repeated := val.(jsonRepeat); repeated {
				val = r[len(r)-1]
			}
			obj["value"] = w.message(joinPath(path, "value"), md, val, false)
		}
		return obj
	}
	return w.object(path, md, obj, true)
}

// extensionType finds the message type an Any's type URL names.
func (w *walker) extensionType(path, url string) (protoreflect.MessageDescriptor, bool) {
	mt, err := protoregistry.GlobalTypes.FindMessageByURL(url)
	if err != nil {
		w.p.add(path, fmt.Sprintf("unsupported type %q; Legate does not implement this extension", url))
		return nil, false
	}
	return mt.Descriptor(), true
}

// field checks the value of one field, a list, a map or a single value, and returns its
// canonical form.
func (w *walker) field(path string, fd protoreflect.FieldDescriptor, v any) any {
	switch {
	case fd.IsList():
		return w.list(path, fd, v)
	case fd.IsMap():
		obj, ok := v.(map[string]any)
		if !ok {
			w.p.add(path, fmt.Sprintf("got %s; want an object (a map)", describe(v)))
			return v
		}
		for _, k := range sortedKeys(obj) {
			epath := fmt.Sprintf("%s[%q]", path, k)
			if !mapKeyOK(fd.MapKey().Kind(), k) {
				w.p.add(epath, fmt.Sprintf("map key %q is not %s", k, scalarWant(fd.MapKey().Kind())))
				continue
			}
			e := obj[k]
			if r, repeated := e.(jsonRepeat); repeated {
				w.p.add(epath, "map key appears twice")
				e = r[len(r)-1]
			}
			if e == nil && !acceptsNull(fd.MapValue()) {
				w.p.add(epath, "null is not allowed as a map value")
				continue
			}
			obj[k] = w.single(epath, fd.MapValue(), e)
		}
		return obj
	default:
		return w.single(path, fd, v)
	}
}

// list checks a repeated field. As protobuf's legacy JSON parser, which Envoy uses, it takes a
// single value for a list of one, splices lists nested in the list into it, and reads null
// elements as the element type's default value.
func (w *walker) list(path string, fd protoreflect.FieldDescriptor, v any) any {
	elems, ok := v.([]any)
	if !ok {
		return []any{w.single(path, fd, v)}
	}
	if fd.Message() == nil || (fd.Message().FullName() != "google.protobuf.Value" && fd.Message().FullName() != "google.protobuf.ListValue") {
		elems = flatten(elems)
	}
	out := make([]any, len(elems))
	for i, e := range elems {
		epath := fmt.Sprintf("%s[%d]", path, i)
		if e == nil && !acceptsNull(fd) {
			e = zeroJSON(fd)
		}
		out[i] = w.single(epath, fd, e)
	}
	return out
}

// flatten splices the elements of lists nested in l into it.
func flatten(l []any) []any {
	nested := false
	for _, e := range l {
		if _, ok := e.([]any); ok {
			nested = true
			break
		}
	}
	if !nested {
		return l
	}
	out := make([]any, 0, len(l))
	for _, e := range l {
		if sub, ok := e.([]any); ok {
			out = append(out, flatten(sub)...)
			continue
		}
		out = append(out, e)
	}
	return out
}

// zeroJSON is the JSON form of fd's default value, what a null list element stands for.
func zeroJSON(fd protoreflect.FieldDescriptor) any {
	switch fd.Kind() {
	case protoreflect.MessageKind, protoreflect.GroupKind:
		return map[string]any{}
	case protoreflect.EnumKind:
		return json.Number("0")
	case protoreflect.BoolKind:
		return false
	case protoreflect.StringKind, protoreflect.BytesKind:
		return ""
	}
	return json.Number("0")
}

// mapKeyOK reports whether a JSON object key is a valid map key of kind k.
func mapKeyOK(k protoreflect.Kind, key string) bool {
	switch k {
	case protoreflect.StringKind:
		return true
	case protoreflect.BoolKind:
		return key == "true" || key == "false"
	}
	return leafOK(scalarLeaf(k), key)
}

// single checks one value of fd's type and returns its canonical form.
func (w *walker) single(path string, fd protoreflect.FieldDescriptor, v any) any {
	switch fd.Kind() {
	case protoreflect.MessageKind, protoreflect.GroupKind:
		return w.message(path, fd.Message(), v, false)
	case protoreflect.EnumKind:
		return w.enum(path, fd.Enum(), v)
	default:
		return w.scalar(path, fd.Kind(), v)
	}
}

func enumNames(ed protoreflect.EnumDescriptor) string {
	vals := ed.Values()
	names := make([]string, vals.Len())
	for i := range names {
		names[i] = string(vals.Get(i).Name())
	}
	return strings.Join(names, ", ")
}

// findField finds the field a JSON key names: its JSON (lowerCamelCase) name or its proto name,
// the two spellings protojson accepts.
func findField(md protoreflect.MessageDescriptor, key string) protoreflect.FieldDescriptor {
	fields := md.Fields()
	if fd := fields.ByJSONName(key); fd != nil {
		return fd
	}
	if fd := fields.ByName(protoreflect.Name(key)); fd != nil && !fd.IsExtension() {
		return fd
	}
	return nil
}

// acceptsNull reports whether null is a value of fd rather than "not set".
func acceptsNull(fd protoreflect.FieldDescriptor) bool {
	switch {
	case fd.Kind() == protoreflect.EnumKind:
		return fd.Enum().FullName() == "google.protobuf.NullValue"
	case fd.Message() != nil && !fd.IsMap():
		return fd.Message().FullName() == "google.protobuf.Value"
	}
	return false
}

// hasSpecialJSON reports whether md is a well-known type whose JSON form is not an object of
// its fields, so that inside an Any it is written as {"@type": ..., "value": ...}.
func hasSpecialJSON(md protoreflect.MessageDescriptor) bool {
	switch md.FullName() {
	case "google.protobuf.Struct", "google.protobuf.ListValue", "google.protobuf.Value", "google.protobuf.Any":
		return true
	}
	_, _, ok := wellKnownLeaf(md)
	return ok
}

// wellKnownLeaf returns an empty message of md's type and a description of its JSON form when
// md is a well-known type written as a single JSON value (durations, timestamps, field masks,
// wrappers).
func wellKnownLeaf(md protoreflect.MessageDescriptor) (proto.Message, string, bool) {
	switch md.FullName() {
	case "google.protobuf.Duration":
		return &durationpb.Duration{}, `a duration string such as "5s" or "0.25s"`, true
	case "google.protobuf.Timestamp":
		return &timestamppb.Timestamp{}, "an RFC 3339 timestamp string", true
	case "google.protobuf.FieldMask":
		return &fieldmaskpb.FieldMask{}, "a field mask string", true
	case "google.protobuf.BoolValue", "google.protobuf.StringValue", "google.protobuf.BytesValue",
		"google.protobuf.Int32Value", "google.protobuf.Int64Value", "google.protobuf.UInt32Value",
		"google.protobuf.UInt64Value", "google.protobuf.FloatValue", "google.protobuf.DoubleValue":
		kind := md.Fields().ByName("value").Kind()
		return scalarLeaf(kind), scalarWant(kind), true
	}
	return nil, "", false
}

// leafRule words the error for a bad well-known leaf value.
func leafRule(md protoreflect.MessageDescriptor, v any, want string) string {
	s, isString := v.(string)
	switch {
	case isString && md.FullName() == "google.protobuf.Duration":
		return fmt.Sprintf("invalid duration %q; want %s", s, want)
	case isString && md.FullName() == "google.protobuf.Timestamp":
		return fmt.Sprintf("invalid timestamp %q; want %s", s, want)
	}
	return fmt.Sprintf("got %s; want %s", describe(v), want)
}

// scalarLeaf returns the wrapper message whose JSON form is that of a scalar of kind k.
func scalarLeaf(k protoreflect.Kind) proto.Message {
	switch k {
	case protoreflect.BoolKind:
		return &wrapperspb.BoolValue{}
	case protoreflect.StringKind:
		return &wrapperspb.StringValue{}
	case protoreflect.BytesKind:
		return &wrapperspb.BytesValue{}
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind:
		return &wrapperspb.Int32Value{}
	case protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind:
		return &wrapperspb.Int64Value{}
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind:
		return &wrapperspb.UInt32Value{}
	case protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		return &wrapperspb.UInt64Value{}
	case protoreflect.FloatKind:
		return &wrapperspb.FloatValue{}
	default:
		return &wrapperspb.DoubleValue{}
	}
}

func scalarWant(k protoreflect.Kind) string {
	switch k {
	case protoreflect.BoolKind:
		return "true or false"
	case protoreflect.StringKind:
		return "a string"
	case protoreflect.BytesKind:
		return "a base64 string"
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind:
		return "an integer in -2147483648..2147483647"
	case protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind:
		return "an integer in -9223372036854775808..9223372036854775807"
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind:
		return "an integer in 0..4294967295"
	case protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		return "an integer in 0..18446744073709551615"
	default:
		return "a number"
	}
}

// leafOK reports whether protojson accepts v as the JSON form of m (a well-known leaf type).
func leafOK(m proto.Message, v any) bool {
	b, err := json.Marshal(v)
	if err != nil {
		return false
	}
	return protojson.Unmarshal(b, m) == nil
}

// describe names a JSON value's kind, and its value when short, for error messages.
func describe(v any) string {
	switch x := v.(type) {
	case nil:
		return "null"
	case bool:
		return fmt.Sprintf("a boolean (%t)", x)
	case json.Number:
		return fmt.Sprintf("a number (%s)", clip(string(x)))
	case string:
		return fmt.Sprintf("a string (%q)", clip(x))
	case []any:
		return "a list"
	case map[string]any:
		return "an object"
	}
	return fmt.Sprintf("%T", v)
}

func clip(s string) string {
	const max = 60
	if len(s) <= max {
		return s
	}
	return s[:max] + "…"
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
