package pbjson

import (
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// encoder holds the state of one print: the output buffer, the current
// indentation and the options. It is used by one goroutine only.
type encoder struct {
	all      bool // Mode == AllFields
	resolver Resolver
	out      io.Writer // nil when printing into buf only
	buf      []byte
	indent   int
	werr     error // first error from out; reported unwrapped by Write
}

// PathError reports why a message could not be printed and where: Path is
// the dotted proto field path from the printed message, with list indexes
// and map keys in brackets.
type PathError struct {
	Path string
	Err  error
}

func (e *PathError) Error() string {
	if e.Path == "" {
		return "pbjson: " + e.Err.Error()
	}
	return "pbjson: " + e.Path + ": " + e.Err.Error()
}

func (e *PathError) Unwrap() error { return e.Err }

// within prefixes err's path with one more outer step.
func within(step string, err error) error {
	var pe *PathError
	if errors.As(err, &pe) {
		switch {
		case pe.Path == "":
			pe.Path = step
		case pe.Path[0] == '[':
			pe.Path = step + pe.Path
		default:
			pe.Path = step + "." + pe.Path
		}
		return pe
	}
	return &PathError{Path: step, Err: err}
}

func (e *encoder) newline() {
	e.buf = append(e.buf, '\n')
	for range e.indent {
		e.buf = append(e.buf, ' ')
	}
}

// comma writes the separator before every entry but the first.
func (e *encoder) comma(first *bool) {
	if *first {
		*first = false
		return
	}
	e.buf = append(e.buf, ',')
}

// maybeFlush hands the buffer to the writer once it is large enough.
func (e *encoder) maybeFlush() error {
	if e.out == nil || len(e.buf) < flushSize {
		return nil
	}
	return e.flush()
}

func (e *encoder) flush() error {
	if e.out == nil || len(e.buf) == 0 {
		return nil
	}
	_, err := e.out.Write(e.buf)
	e.buf = e.buf[:0]
	if err != nil && e.werr == nil {
		e.werr = err
	}
	return err
}

// message prints m as a JSON value: an object, or the special form of a
// well-known type.
func (e *encoder) message(m protoreflect.Message, topLevel bool) error {
	switch classify(m.Descriptor().FullName()) {
	case wkAny:
		return e.anyMessage(m)
	case wkWrapper:
		fd := m.Descriptor().Fields().ByNumber(1)
		return e.singular(fd, m.Get(fd))
	case wkValue:
		return e.value(m, topLevel)
	case wkStruct:
		fd := m.Descriptor().Fields().ByNumber(1)
		return e.mapField(m.Get(fd).Map(), fd)
	case wkList:
		fd := m.Descriptor().Fields().ByNumber(1)
		return e.list(m.Get(fd).List(), fd)
	case wkTimestamp:
		return e.timestamp(m)
	case wkDuration:
		return e.duration(m)
	case wkFieldMask:
		e.fieldMask(m)
		return nil
	}
	e.buf = append(e.buf, '{')
	e.indent++
	first := true
	err := e.fields(m, &first)
	e.indent--
	if err != nil {
		return err
	}
	if !first {
		e.newline()
	}
	e.buf = append(e.buf, '}')
	return nil
}

// fields prints the members of m that the mode selects, in ascending field
// number order, each preceded by a comma unless *first.
func (e *encoder) fields(m protoreflect.Message, first *bool) error {
	fds := m.Descriptor().Fields()
	n := fds.Len()
	selected := make([]protoreflect.FieldDescriptor, 0, n)
	sorted := true
	var last protoreflect.FieldNumber
	for i := range n {
		fd := fds.Get(i)
		if !m.Has(fd) && (!e.all || fd.HasPresence()) {
			continue
		}
		if fd.Number() < last {
			sorted = false
		}
		last = fd.Number()
		selected = append(selected, fd)
	}
	if m.Descriptor().ExtensionRanges().Len() > 0 {
		m.Range(func(fd protoreflect.FieldDescriptor, _ protoreflect.Value) bool {
			if fd.IsExtension() {
				selected = append(selected, fd)
				sorted = false
			}
			return true
		})
	}
	if !sorted {
		slices.SortFunc(selected, func(a, b protoreflect.FieldDescriptor) int {
			return int(a.Number()) - int(b.Number())
		})
	}
	for _, fd := range selected {
		if err := e.field(m, fd, first); err != nil {
			return within(string(fd.Name()), err)
		}
		if err := e.maybeFlush(); err != nil {
			return err
		}
	}
	return nil
}

func (e *encoder) field(m protoreflect.Message, fd protoreflect.FieldDescriptor, first *bool) error {
	v := m.Get(fd)
	if !fd.IsList() && !fd.IsMap() && isValueField(fd) && isEmpty(v.Message()) {
		// protobuf C++ drops a google.protobuf.Value that holds no kind.
		return nil
	}
	e.comma(first)
	e.newline()
	if fd.IsExtension() {
		e.buf = appendQuoted(e.buf, "["+string(fd.FullName())+"]")
	} else {
		e.buf = appendQuoted(e.buf, string(fd.Name()))
	}
	e.buf = append(e.buf, ':', ' ')
	switch {
	case fd.IsMap():
		return e.mapField(v.Map(), fd)
	case fd.IsList():
		return e.list(v.List(), fd)
	default:
		return e.singular(fd, v)
	}
}

func (e *encoder) list(l protoreflect.List, fd protoreflect.FieldDescriptor) error {
	e.buf = append(e.buf, '[')
	e.indent++
	first := true
	dropEmpty := isValueField(fd)
	for i := range l.Len() {
		v := l.Get(i)
		if dropEmpty && isEmpty(v.Message()) {
			continue
		}
		e.comma(&first)
		e.newline()
		if err := e.singular(fd, v); err != nil {
			e.indent--
			return within("["+strconv.Itoa(i)+"]", err)
		}
		if err := e.maybeFlush(); err != nil {
			e.indent--
			return err
		}
	}
	e.indent--
	if !first {
		e.newline()
	}
	e.buf = append(e.buf, ']')
	return nil
}

// mapField prints a map with its keys sorted: protobuf C++ uses hash order,
// which no client can rely on, so a stable order is as compatible and
// reproducible.
func (e *encoder) mapField(mp protoreflect.Map, fd protoreflect.FieldDescriptor) error {
	keys := make([]protoreflect.MapKey, 0, mp.Len())
	mp.Range(func(k protoreflect.MapKey, _ protoreflect.Value) bool {
		keys = append(keys, k)
		return true
	})
	slices.SortFunc(keys, compareKeys)
	valueFd := fd.MapValue()
	dropEmpty := isValueField(valueFd)
	e.buf = append(e.buf, '{')
	e.indent++
	first := true
	for _, k := range keys {
		v := mp.Get(k)
		if dropEmpty && isEmpty(v.Message()) {
			continue
		}
		e.comma(&first)
		e.newline()
		e.appendMapKey(k, fd.MapKey().Kind())
		e.buf = append(e.buf, ':', ' ')
		if err := e.singular(valueFd, v); err != nil {
			e.indent--
			return within("["+k.String()+"]", err)
		}
		if err := e.maybeFlush(); err != nil {
			e.indent--
			return err
		}
	}
	e.indent--
	if !first {
		e.newline()
	}
	e.buf = append(e.buf, '}')
	return nil
}

func compareKeys(a, b protoreflect.MapKey) int {
	switch x := a.Interface().(type) {
	case string:
		return strings.Compare(x, b.String())
	case bool:
		switch {
		case x == b.Bool():
			return 0
		case x:
			return 1
		default:
			return -1
		}
	case int32, int64:
		return cmpInt(a.Int(), b.Int())
	default:
		return cmpInt(a.Uint(), b.Uint())
	}
}

func cmpInt[T int64 | uint64](a, b T) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// appendMapKey writes a map key; JSON object keys are always strings, so
// numbers and booleans are quoted.
func (e *encoder) appendMapKey(k protoreflect.MapKey, kind protoreflect.Kind) {
	switch kind {
	case protoreflect.StringKind:
		e.buf = appendQuoted(e.buf, k.String())
	case protoreflect.BoolKind:
		if k.Bool() {
			e.buf = append(e.buf, `"true"`...)
		} else {
			e.buf = append(e.buf, `"false"`...)
		}
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind,
		protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind:
		e.buf = append(e.buf, '"')
		e.buf = strconv.AppendInt(e.buf, k.Int(), 10)
		e.buf = append(e.buf, '"')
	default:
		e.buf = append(e.buf, '"')
		e.buf = strconv.AppendUint(e.buf, k.Uint(), 10)
		e.buf = append(e.buf, '"')
	}
}

// singular prints one value of field fd (a list element, map value or
// non-repeated field).
func (e *encoder) singular(fd protoreflect.FieldDescriptor, v protoreflect.Value) error {
	switch fd.Kind() {
	case protoreflect.FloatKind:
		e.buf = appendFloat32(e.buf, float32(v.Float()))
	case protoreflect.DoubleKind:
		e.buf = appendDouble(e.buf, v.Float())
	case protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind:
		e.buf = append(e.buf, '"')
		e.buf = strconv.AppendInt(e.buf, v.Int(), 10)
		e.buf = append(e.buf, '"')
	case protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		e.buf = append(e.buf, '"')
		e.buf = strconv.AppendUint(e.buf, v.Uint(), 10)
		e.buf = append(e.buf, '"')
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind:
		e.buf = strconv.AppendInt(e.buf, v.Int(), 10)
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind:
		e.buf = strconv.AppendUint(e.buf, v.Uint(), 10)
	case protoreflect.BoolKind:
		e.buf = strconv.AppendBool(e.buf, v.Bool())
	case protoreflect.StringKind:
		e.buf = appendQuoted(e.buf, v.String())
	case protoreflect.BytesKind:
		e.buf = appendBase64(e.buf, v.Bytes())
	case protoreflect.EnumKind:
		ed := fd.Enum()
		if ed.FullName() == "google.protobuf.NullValue" {
			e.buf = append(e.buf, "null"...)
			break
		}
		if ev := ed.Values().ByNumber(v.Enum()); ev != nil {
			e.buf = appendQuoted(e.buf, string(ev.Name()))
		} else {
			// A number the enum does not define prints bare.
			e.buf = strconv.AppendInt(e.buf, int64(v.Enum()), 10)
		}
	case protoreflect.MessageKind, protoreflect.GroupKind:
		return e.message(v.Message(), false)
	default:
		return fmt.Errorf("unsupported field kind %v", fd.Kind())
	}
	return nil
}

// anyMessage prints google.protobuf.Any as {"@type": url, <fields>} or, for a
// packed well-known type, {"@type": url, "value": <special form>}.
func (e *encoder) anyMessage(m protoreflect.Message) error {
	fds := m.Descriptor().Fields()
	url := m.Get(fds.ByNumber(1)).String()
	value := m.Get(fds.ByNumber(2)).Bytes()
	if url == "" {
		if len(value) == 0 {
			e.buf = append(e.buf, "{}"...)
			return nil
		}
		return errors.New("google.protobuf.Any has a value but no type_url")
	}
	if slash := strings.LastIndexByte(url, '/'); slash <= 0 {
		return fmt.Errorf("google.protobuf.Any type_url %q: must contain a host and a '/'", url)
	}
	mt, err := e.resolver.FindMessageByURL(url)
	if err != nil {
		return fmt.Errorf("google.protobuf.Any type_url %q: %w", url, err)
	}
	inner := mt.New()
	if err := proto.Unmarshal(value, inner.Interface()); err != nil {
		return fmt.Errorf("google.protobuf.Any value of type %q: %w", url, err)
	}
	e.buf = append(e.buf, '{')
	e.indent++
	e.newline()
	e.buf = append(e.buf, `"@type": `...)
	e.buf = appendQuoted(e.buf, url)
	first := false
	if classify(inner.Descriptor().FullName()) != notWellKnown {
		e.buf = append(e.buf, ',')
		e.newline()
		e.buf = append(e.buf, `"value": `...)
		err = e.message(inner, false)
	} else {
		err = e.fields(inner, &first)
	}
	e.indent--
	if err != nil {
		return err
	}
	e.newline()
	e.buf = append(e.buf, '}')
	return nil
}

// value prints google.protobuf.Value as the plain JSON value it holds. An
// empty Value prints nothing; callers drop empty nested Values beforehand.
func (e *encoder) value(m protoreflect.Message, topLevel bool) error {
	fds := m.Descriptor().Fields()
	for n := protoreflect.FieldNumber(1); n <= 6; n++ {
		fd := fds.ByNumber(n)
		if fd == nil || !m.Has(fd) {
			continue
		}
		v := m.Get(fd)
		switch n {
		case 1:
			e.buf = append(e.buf, "null"...)
		case 2:
			f := v.Float()
			if math.IsNaN(f) || math.IsInf(f, 0) {
				return fmt.Errorf("google.protobuf.Value number_value = %v; JSON has no such number", f)
			}
			e.buf = appendDouble(e.buf, f)
		case 3:
			e.buf = appendQuoted(e.buf, v.String())
		case 4:
			e.buf = strconv.AppendBool(e.buf, v.Bool())
		case 5, 6:
			return e.message(v.Message(), false)
		}
		return nil
	}
	if !topLevel {
		return errors.New("empty google.protobuf.Value")
	}
	return nil
}

// Range limits of google.protobuf.Timestamp and Duration JSON.
const (
	minTimestampSeconds = -62135596800 // 0001-01-01T00:00:00Z
	maxTimestampSeconds = 253402300799 // 9999-12-31T23:59:59Z
	maxDurationSeconds  = 3652500 * 86400
	maxNanos            = 999999999
)

func secondsAndNanos(m protoreflect.Message) (int64, int32) {
	fds := m.Descriptor().Fields()
	return m.Get(fds.ByNumber(1)).Int(), int32(m.Get(fds.ByNumber(2)).Int())
}

// timestamp prints RFC 3339 in UTC with 0, 3, 6 or 9 fractional digits.
func (e *encoder) timestamp(m protoreflect.Message) error {
	secs, nanos := secondsAndNanos(m)
	if secs < minTimestampSeconds || secs > maxTimestampSeconds {
		return fmt.Errorf("google.protobuf.Timestamp seconds = %d; must be within 0001-01-01T00:00:00Z and 9999-12-31T23:59:59Z", secs)
	}
	if nanos < 0 || nanos > maxNanos {
		return fmt.Errorf("google.protobuf.Timestamp nanos = %d; must be within [0, 999999999]", nanos)
	}
	e.buf = append(e.buf, '"')
	e.buf = time.Unix(secs, 0).UTC().AppendFormat(e.buf, "2006-01-02T15:04:05")
	e.buf = appendFraction(e.buf, nanos)
	e.buf = append(e.buf, 'Z', '"')
	return nil
}

// duration prints "<seconds>[.<fraction>]s" with 0, 3, 6 or 9 fractional
// digits.
func (e *encoder) duration(m protoreflect.Message) error {
	secs, nanos := secondsAndNanos(m)
	if secs < -maxDurationSeconds || secs > maxDurationSeconds {
		return fmt.Errorf("google.protobuf.Duration seconds = %d; must be within ±%d", secs, maxDurationSeconds)
	}
	if nanos < -maxNanos || nanos > maxNanos {
		return fmt.Errorf("google.protobuf.Duration nanos = %d; must be within ±999999999", nanos)
	}
	if secs != 0 && nanos != 0 && (secs < 0) != (nanos < 0) {
		return fmt.Errorf("google.protobuf.Duration seconds = %d, nanos = %d; signs must match", secs, nanos)
	}
	e.buf = append(e.buf, '"')
	if nanos == 0 {
		e.buf = strconv.AppendInt(e.buf, secs, 10)
	} else {
		if secs < 0 || nanos < 0 {
			e.buf = append(e.buf, '-')
		}
		e.buf = strconv.AppendUint(e.buf, absInt(secs), 10)
		e.buf = appendFraction(e.buf, int32(absInt(int64(nanos))))
	}
	e.buf = append(e.buf, 's', '"')
	return nil
}

func absInt(v int64) uint64 {
	if v < 0 {
		return uint64(-v)
	}
	return uint64(v)
}

// appendFraction writes ".ddd", ".dddddd" or ".ddddddddd" for non-zero
// nanos, dropping trailing groups of three zeros.
func appendFraction(b []byte, nanos int32) []byte {
	if nanos == 0 {
		return b
	}
	digits := 9
	for nanos%1000 == 0 {
		nanos /= 1000
		digits -= 3
	}
	b = append(b, '.')
	s := strconv.Itoa(int(nanos))
	for range digits - len(s) {
		b = append(b, '0')
	}
	return append(b, s...)
}

// fieldMask prints the paths comma-joined, each converted to lowerCamelCase
// the way protobuf C++ does with its legacy (lenient) conversion: an
// underscore before a lowercase letter upper-cases it, an underscore before
// anything else is dropped unless the next character is neither a digit, a
// lowercase letter nor a dot.
func (e *encoder) fieldMask(m protoreflect.Message) {
	paths := m.Get(m.Descriptor().Fields().ByNumber(1)).List()
	e.buf = append(e.buf, '"')
	for i := range paths.Len() {
		if i > 0 {
			e.buf = append(e.buf, ',')
		}
		sawUnderscore := false
		for _, c := range []byte(paths.Get(i).String()) {
			switch {
			case c >= 'a' && c <= 'z' && sawUnderscore:
				e.buf = append(e.buf, c-'a'+'A')
			case c >= 'a' && c <= 'z', c >= '0' && c <= '9', c == '.':
				e.buf = append(e.buf, c)
			case c == '_':
				sawUnderscore = true
				continue
			default:
				if sawUnderscore {
					e.buf = append(e.buf, '_')
				}
				e.buf = append(e.buf, c)
			}
			sawUnderscore = false
		}
	}
	e.buf = append(e.buf, '"')
}

// wellKnown classifies the google.protobuf types that have a special JSON
// form.
type wellKnown int

const (
	notWellKnown wellKnown = iota
	wkAny
	wkWrapper
	wkStruct
	wkList
	wkValue
	wkTimestamp
	wkDuration
	wkFieldMask
)

func classify(name protoreflect.FullName) wellKnown {
	short, ok := strings.CutPrefix(string(name), "google.protobuf.")
	if !ok {
		return notWellKnown
	}
	switch short {
	case "Any":
		return wkAny
	case "BoolValue", "BytesValue", "DoubleValue", "FloatValue", "Int32Value",
		"Int64Value", "StringValue", "UInt32Value", "UInt64Value":
		return wkWrapper
	case "Struct":
		return wkStruct
	case "ListValue":
		return wkList
	case "Value":
		return wkValue
	case "Timestamp":
		return wkTimestamp
	case "Duration":
		return wkDuration
	case "FieldMask":
		return wkFieldMask
	}
	return notWellKnown
}

// isValueField reports whether fd's (element) type is google.protobuf.Value.
func isValueField(fd protoreflect.FieldDescriptor) bool {
	md := fd.Message()
	return md != nil && md.FullName() == "google.protobuf.Value"
}

// isEmpty reports whether m has no field set.
func isEmpty(m protoreflect.Message) bool {
	empty := true
	m.Range(func(protoreflect.FieldDescriptor, protoreflect.Value) bool {
		empty = false
		return false
	})
	return empty
}
