package bootstrap

import (
	"fmt"

	"google.golang.org/protobuf/reflect/protoreflect"
)

// jsonRepeat holds, in document order, the values of a key written more than once in one JSON
// object. protobuf's legacy JSON parser, which Envoy uses for JSON files, reads a repeated key
// of a message field again: a scalar is overwritten, a message merged, a list appended to, and
// null changes nothing; in a map or a Struct, and for a oneof member, a repeated key is an
// error. The walk resolves each jsonRepeat with the field's descriptor (mergeRepeat); YAML
// never makes one, since yaml-cpp keeps the last value of a key itself.
type jsonRepeat []any

// withRepeat adds v to the values seen for one key (prev is nil for the first).
func withRepeat(prev, v any) any {
	switch p := prev.(type) {
	case nil:
		return v
	case jsonRepeat:
		return append(p, v)
	}
	return jsonRepeat{prev, v}
}

// mergeRepeat resolves the repeated values of field fd into one value, as protobuf's legacy
// parser does.
func (w *walker) mergeRepeat(path string, fd protoreflect.FieldDescriptor, r jsonRepeat) any {
	var vals []any
	for _, v := range r {
		if v != nil {
			vals = append(vals, v) // null leaves the field as it was
		}
	}
	switch {
	case len(vals) == 0:
		return nil
	case len(vals) == 1:
		return vals[0]
	}
	if od := fd.ContainingOneof(); od != nil && !od.IsSynthetic() {
		w.p.add(path, fmt.Sprintf("set %d times; a member of oneof %s may be set once", len(vals), od.Name()))
		return vals[len(vals)-1]
	}
	switch {
	case fd.IsList() || fd.Message() != nil && fd.Message().FullName() == "google.protobuf.ListValue":
		var out []any
		for _, v := range vals {
			if l, ok := v.([]any); ok {
				out = append(out, l...)
			} else {
				out = append(out, v)
			}
		}
		return out
	case fd.IsMap() || fd.Message() != nil && fd.Message().FullName() == "google.protobuf.Struct":
		return mergeObjects(vals, func(_, later any) any { return later })
	case fd.Message() != nil && !hasSpecialJSON(fd.Message()):
		// A message: its fields merge, and a field set in both is itself repeated.
		return mergeObjects(vals, withRepeat)
	}
	return vals[len(vals)-1]
}

// mergeObjects merges JSON objects in order, combining the values of a key found in several
// with both; a non-object among vals makes the last value win (the walk then reports its type).
func mergeObjects(vals []any, both func(earlier, later any) any) any {
	out := map[string]any{}
	for _, v := range vals {
		obj, ok := v.(map[string]any)
		if !ok {
			return vals[len(vals)-1]
		}
		for k, e := range obj {
			if prev, seen := out[k]; seen {
				out[k] = both(prev, e)
			} else {
				out[k] = e
			}
		}
	}
	return out
}

// noRepeats reports, as errors, the keys repeated in free JSON (a map, a Struct, a Value),
// which protobuf's parser refuses, and returns v with each resolved to its last value.
func (w *walker) noRepeats(path string, v any) any {
	switch x := v.(type) {
	case jsonRepeat:
		w.p.add(path, "key appears twice in one object")
		return x[len(x)-1]
	case map[string]any:
		for _, k := range sortedKeys(x) {
			x[k] = w.noRepeats(fmt.Sprintf("%s[%q]", path, k), x[k])
		}
	case []any:
		for i, e := range x {
			x[i] = w.noRepeats(fmt.Sprintf("%s[%d]", path, i), e)
		}
	}
	return v
}
