package runtime

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v2"
)

// Denominator is envoy.type.v3.FractionalPercent.DenominatorType.
type Denominator uint8

// The FractionalPercent denominators.
const (
	Hundred Denominator = iota
	TenThousand
	Million
)

// Value returns the denominator as a number: 100, 10000 or 1000000.
func (d Denominator) Value() uint64 {
	switch d {
	case TenThousand:
		return 10_000
	case Million:
		return 1_000_000
	}
	return 100
}

// DenominatorOf is Value's inverse: 10,000 and 1,000,000 give their denominators, anything
// else Hundred.
func DenominatorOf(n uint64) Denominator {
	switch n {
	case 10_000:
		return TenThousand
	case 1_000_000:
		return Million
	}
	return Hundred
}

// Percent is envoy.type.v3.FractionalPercent: Numerator out of Denominator.
type Percent struct {
	Numerator   uint32
	Denominator Denominator
}

// entry is one runtime value: its raw string and the typed forms that parsed
// (Envoy's Snapshot::Entry).
type entry struct {
	raw       string
	uintV     uint64
	doubleV   float64
	boolV     bool
	fraction  Percent
	hasUint   bool
	hasDouble bool
	hasBool   bool
	hasFrac   bool
}

// setNumber is Envoy's setNumberValue: a number is a double; an integral
// number inside int range is also a bool (non-zero is true); a non-negative
// number is also a uint, floored.
func (e *entry) setNumber(d float64) {
	e.doubleV, e.hasDouble = d, true
	if d < math.MaxInt32 && d >= math.MinInt32 && d == math.Trunc(d) {
		e.boolV, e.hasBool = d != 0, true
	}
	if d >= 0 && d <= math.MaxUint64 {
		e.hasUint = true
		if d >= math.MaxUint64 {
			e.uintV = math.MaxUint64
		} else {
			e.uintV = uint64(d)
		}
	}
}

// parseDouble is absl::SimpleAtod: surrounding ASCII white space is ignored,
// an optional sign, decimal digits with optional fraction and exponent, or
// inf/infinity/nan in any case. Hexadecimal and digit separators, which Go's
// ParseFloat also accepts, are refused.
func parseDouble(s string) (float64, bool) {
	s = strings.Trim(s, " \t\n\v\f\r")
	if strings.HasPrefix(s, "+-") || strings.ContainsAny(s, "xX_") {
		return 0, false
	}
	d, err := strconv.ParseFloat(s, 64)
	if err != nil {
		if ne, ok := err.(*strconv.NumError); !ok || ne.Err != strconv.ErrRange {
			return 0, false
		}
	}
	return d, true
}

// stringEntry builds the entry of a value given as text (disk files, admin
// overrides): the text is parsed as YAML, as Envoy's ValueUtil::loadFromYaml
// does, and the raw text is kept as the entry's string.
func stringEntry(raw string) (entry, error) {
	var v any
	if err := yaml.Unmarshal([]byte(raw), &v); err != nil {
		return entry{}, fmt.Errorf("value %q is not valid YAML: %w", raw, err)
	}
	return valueEntry(v, raw)
}

// valueEntry is Envoy's SnapshotImpl::createEntry for a parsed value. raw, if
// not empty, is the entry's string; otherwise the string is derived from v.
func valueEntry(v any, raw string) (entry, error) {
	e := entry{raw: raw}
	switch x := v.(type) {
	case nil:
		// An empty file: a value with no typed form.
	case bool:
		e.boolV, e.hasBool = x, true
		if e.raw == "" {
			e.raw = strconv.FormatBool(x)
		}
	case int, int64, uint64, float64:
		d := toFloat(x)
		// YAML 1.1 also reads 0x1F, 0o17 and 1_000 as numbers; Envoy's
		// YAML reads them as strings.
		if raw != "" {
			if _, ok := parseDouble(raw); !ok {
				e.stringValue()
				break
			}
		}
		e.setNumber(d)
		if e.raw == "" {
			e.raw = formatNumber(d)
		}
	case string:
		if e.raw == "" {
			e.raw = x
		}
		e.stringValue()
	case map[any]any, map[string]any:
		m, err := stringMap(x)
		if err != nil {
			return e, err
		}
		if e.raw == "" {
			e.raw = structDebugString(m)
		}
		e.parseFraction(m)
	case []any:
		// Lists have no typed form; Envoy keeps only the raw text.
	default:
		return e, fmt.Errorf("value of type %T is not supported", v)
	}
	return e, nil
}

// stringValue types a string entry: only a number parse is attempted (Envoy
// with envoy.reloadable_features.reject_invalid_yaml, the default, no longer
// reads "True" or "numerator: 5" given as strings).
func (e *entry) stringValue() {
	if d, ok := parseDouble(e.raw); ok {
		e.setNumber(d)
	}
}

// parseFraction is Envoy's parseFractionValue: a struct holding only
// numerator (a number) and denominator (HUNDRED, TEN_THOUSAND, MILLION) is a
// fractional percent; the denominator defaults to HUNDRED.
func (e *entry) parseFraction(m map[string]any) {
	p := Percent{Denominator: Hundred}
	for k, v := range m {
		switch k {
		case "numerator":
			if d, ok := v.(float64); ok {
				p.Numerator = uint32(math.Max(0, math.Min(d, math.MaxUint32)))
			}
		case "denominator":
			s, ok := v.(string)
			if !ok {
				return
			}
			switch s {
			case "HUNDRED":
				p.Denominator = Hundred
			case "TEN_THOUSAND":
				p.Denominator = TenThousand
			case "MILLION":
				p.Denominator = Million
			default:
				return
			}
		default:
			return
		}
	}
	e.fraction, e.hasFrac = p, true
}

func toFloat(v any) float64 {
	switch x := v.(type) {
	case int:
		return float64(x)
	case int64:
		return float64(x)
	case uint64:
		return float64(x)
	case float64:
		return x
	}
	return 0
}

// formatNumber is absl::StrCat of a double: %g with six significant digits.
func formatNumber(d float64) string {
	return strconv.FormatFloat(d, 'g', 6, 64)
}

// stringMap converts a YAML map to map[string]any with float64 numbers, the
// shape structpb.Struct.AsMap returns.
func stringMap(v any) (map[string]any, error) {
	out := map[string]any{}
	put := func(k string, x any) error {
		n, err := normalise(x)
		out[k] = n
		return err
	}
	switch m := v.(type) {
	case map[string]any:
		for k, x := range m {
			if err := put(k, x); err != nil {
				return nil, err
			}
		}
	case map[any]any:
		for k, x := range m {
			if err := put(fmt.Sprint(k), x); err != nil {
				return nil, err
			}
		}
	}
	return out, nil
}

func normalise(v any) (any, error) {
	switch x := v.(type) {
	case int, int64, uint64:
		return toFloat(x), nil
	case map[any]any, map[string]any:
		return stringMap(x)
	case []any:
		out := make([]any, len(x))
		for i, y := range x {
			n, err := normalise(y)
			if err != nil {
				return nil, err
			}
			out[i] = n
		}
		return out, nil
	}
	return v, nil
}

// structDebugString renders a struct value the way protobuf's DebugString
// prints a google.protobuf.Struct (map entries sorted by key), which is the
// raw string Envoy shows for struct-valued static layer entries.
func structDebugString(m map[string]any) string {
	var b strings.Builder
	writeStructFields(&b, m, "")
	return b.String()
}

func writeStructFields(b *strings.Builder, m map[string]any, indent string) {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		b.WriteString(indent + "fields {\n")
		b.WriteString(indent + "  key: " + strconv.Quote(k) + "\n")
		b.WriteString(indent + "  value {\n")
		writeValue(b, m[k], indent+"    ")
		b.WriteString(indent + "  }\n")
		b.WriteString(indent + "}\n")
	}
}

func writeValue(b *strings.Builder, v any, indent string) {
	switch x := v.(type) {
	case nil:
		b.WriteString(indent + "null_value: NULL_VALUE\n")
	case bool:
		b.WriteString(indent + "bool_value: " + strconv.FormatBool(x) + "\n")
	case float64:
		b.WriteString(indent + "number_value: " + strconv.FormatFloat(x, 'g', -1, 64) + "\n")
	case string:
		b.WriteString(indent + "string_value: " + strconv.Quote(x) + "\n")
	case map[string]any:
		b.WriteString(indent + "struct_value {\n")
		writeStructFields(b, x, indent+"  ")
		b.WriteString(indent + "}\n")
	case []any:
		b.WriteString(indent + "list_value {\n")
		for _, y := range x {
			b.WriteString(indent + "  values {\n")
			writeValue(b, y, indent+"    ")
			b.WriteString(indent + "  }\n")
		}
		b.WriteString(indent + "}\n")
	}
}
