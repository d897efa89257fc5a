package accesslog

import (
	"fmt"
	"strings"

	"google.golang.org/protobuf/types/known/structpb"

	"github.com/legateproxy/legate/internal/filterstate"
)

// filterStateFormat is how %FILTER_STATE% serializes its object.
type filterStateFormat uint8

const (
	filterStateTyped filterStateFormat = iota // TYPED (the default): the typed value as JSON
	filterStatePlain                          // PLAIN: the plain string
	filterStateField                          // FIELD:NAME: one field of the object
)

// filterStateArg is a parsed %FILTER_STATE(KEY[:PLAIN|:TYPED|:FIELD:NAME])%.
type filterStateArg struct {
	key    string
	format filterStateFormat
	field  string
}

// parseFilterState reads FILTER_STATE's argument with Envoy's rules: a key, then an optional
// serialization (TYPED by default), FIELD taking a field name and nothing else taking one.
func parseFilterState(args string) (*filterStateArg, error) {
	key, rest, _ := strings.Cut(args, ":")
	if key == "" {
		return nil, fmt.Errorf("operator FILTER_STATE needs a key: %%FILTER_STATE(KEY[:PLAIN|:TYPED|:FIELD:NAME])%%")
	}
	kind, field, _ := strings.Cut(rest, ":")
	a := &filterStateArg{key: key}
	switch kind {
	case "", "TYPED":
	case "PLAIN":
		a.format = filterStatePlain
	case "FIELD":
		a.format = filterStateField
	default:
		return nil, fmt.Errorf("operator FILTER_STATE: serialization %q; must be PLAIN, TYPED or FIELD", kind)
	}
	if (a.format == filterStateField) != (field != "") {
		return nil, fmt.Errorf("operator FILTER_STATE: FIELD goes with a field name (KEY:FIELD:NAME), and only FIELD does")
	}
	a.field = field
	return a, nil
}

// appendFilterState appends a FILTER_STATE value as text: the plain string, the typed value
// as compact JSON, or the field, each cut to the operator's length. ok is false when the
// object, or the serialization asked for, is missing.
func appendFilterState(dst []byte, s *segment, e *Entry) ([]byte, bool) {
	obj := e.FilterState.Get(s.filterState.key)
	if obj == nil {
		return dst, false
	}
	switch s.filterState.format {
	case filterStatePlain:
		v, ok := obj.Plain()
		return append(dst, truncate(v, s.maxLen)...), ok
	case filterStateField:
		v, ok := field(obj, s.filterState.field)
		return append(dst, truncate(v, s.maxLen)...), ok
	}
	v := obj.Typed()
	if v == nil {
		return dst, false
	}
	mark := len(dst)
	dst, ok := appendMetadataJSON(dst, v)
	return truncateTail(dst, mark, s.maxLen), ok
}

// appendTypedFilterState appends a lone FILTER_STATE operator of a typed JSON format: the
// typed value as it is (uncut, as Envoy's), the plain string or the field as a JSON string;
// ok is false (and null written) when it is missing.
func appendTypedFilterState(dst []byte, s *segment, e *Entry) ([]byte, bool) {
	obj := e.FilterState.Get(s.filterState.key)
	var v *structpb.Value
	if obj != nil {
		switch s.filterState.format {
		case filterStatePlain:
			if str, ok := obj.Plain(); ok {
				v = structpb.NewStringValue(truncate(str, s.maxLen))
			}
		case filterStateField:
			if str, ok := field(obj, s.filterState.field); ok {
				v = structpb.NewStringValue(truncate(str, s.maxLen))
			}
		default:
			v = obj.Typed()
		}
	}
	return appendJSONOrNull(dst, v)
}

// field reads a field of obj; an object without fields has none.
func field(obj filterstate.Object, name string) (string, bool) {
	if f, ok := obj.(filterstate.Fielder); ok {
		return f.Field(name)
	}
	return "", false
}
