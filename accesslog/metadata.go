package accesslog

import (
	"encoding/json"

	"google.golang.org/protobuf/types/known/structpb"
)

// metadataValue finds the value a DYNAMIC_METADATA operator names: the namespace's struct
// when it names no key, else the value at the path of keys (nil when any step is missing).
func metadataValue(e *Entry, path []string) *structpb.Value {
	ns := e.DynamicMetadata[path[0]]
	if ns == nil {
		return nil
	}
	if len(path) == 1 {
		return structpb.NewStructValue(ns)
	}
	v := ns.GetFields()[path[1]]
	for _, k := range path[2:] {
		v = v.GetStructValue().GetFields()[k]
	}
	return v
}

// appendMetadata appends a DYNAMIC_METADATA value as text: a string as it is, anything
// else as compact JSON (Envoy's rendering). ok is false when the value is missing.
func appendMetadata(dst []byte, s *segment, e *Entry) ([]byte, bool) {
	v := metadataValue(e, s.metadata)
	if v == nil {
		return dst, false
	}
	if sv, isString := v.GetKind().(*structpb.Value_StringValue); isString {
		return append(dst, truncate(sv.StringValue, s.maxLen)...), true
	}
	mark := len(dst)
	dst, ok := appendMetadataJSON(dst, v)
	return truncateTail(dst, mark, s.maxLen), ok
}

// appendMetadataJSON appends v as compact JSON with sorted keys (encoding/json's, stable
// unlike protojson's); ok is false for a value JSON cannot hold (a NaN number).
func appendMetadataJSON(dst []byte, v *structpb.Value) ([]byte, bool) {
	b, err := json.Marshal(v.AsInterface())
	if err != nil {
		return dst, false
	}
	return append(dst, b...), true
}

// appendTypedMetadata appends a lone DYNAMIC_METADATA operator of a typed JSON format as its
// JSON value (a number stays a number, a struct an object); ok is false when it is missing.
func appendTypedMetadata(dst []byte, s *segment, e *Entry) ([]byte, bool) {
	return appendJSONOrNull(dst, metadataValue(e, s.metadata))
}

// appendJSONOrNull appends v as compact JSON; ok is false, and null written, when v is nil
// or JSON cannot hold it.
func appendJSONOrNull(dst []byte, v *structpb.Value) ([]byte, bool) {
	if v == nil {
		return append(dst, "null"...), false
	}
	out, ok := appendMetadataJSON(dst, v)
	if !ok {
		return append(dst, "null"...), false
	}
	return out, true
}
