package stats

import (
	"fmt"
	"reflect"
	"sort"
	"strings"
	"sync"
	"unsafe"

	"github.com/legateproxy/legate/stats/tags"
)

// field is one stat of a registered struct type.
type field struct {
	name   string  // relative to the registration prefix, e.g. "circuit_breakers.default.cx_open"
	offset uintptr // from the start of the outermost struct
	kind   Kind
	hot    bool       // a HotCounter or a HotGauge
	mode   ImportMode // gauges only
	unit   Unit       // histograms only
}

// layout is the field table of one struct type, computed once per type.
type layout struct {
	fields []field
	sorted []uint32 // field indexes in byte order of name

	tokOnce   sync.Once
	tokSorted []uint32 // field indexes in token order of name (Prometheus)

	// Tag extraction shared by the registrations of this layout (see
	// Registration.splitTags). Layouts in Store.layouts belong to one
	// Store, so one tag producer.
	tagOnce   sync.Once
	tagFields *tags.Fields
	idsMu     sync.Mutex                  // guards tagIDs
	tagIDs    map[*tags.Template][]uint32 // interned name id per field, by template
}

// tokenOrder returns the field indexes sorted token-wise by name.
func (l *layout) tokenOrder() []uint32 {
	l.tokOnce.Do(func() {
		l.tokSorted = append([]uint32(nil), l.sorted...)
		sort.SliceStable(l.tokSorted, func(a, b int) bool {
			return compareSplit(l.fields[l.tokSorted[a]].name, "", l.fields[l.tokSorted[b]].name, "", true) < 0
		})
	})
	return l.tokSorted
}

// fieldsFor returns the layout's field list for tag extraction by p.
func (l *layout) fieldsFor(p *tags.Producer) *tags.Fields {
	l.tagOnce.Do(func() {
		names := make([]string, len(l.fields))
		for i := range l.fields {
			names[i] = l.fields[i].name
		}
		l.tagFields = p.NewFields(names)
	})
	return l.tagFields
}

// templateIDs returns the interned ids of t's tag-extracted names, interning
// them on first use. Every registration with the template shares the slice.
func (l *layout) templateIDs(t *tags.Template, n *names) []uint32 {
	l.idsMu.Lock()
	defer l.idsMu.Unlock()
	if ids, ok := l.tagIDs[t]; ok {
		return ids
	}
	ids := make([]uint32, len(t.Names()))
	for i, name := range t.Names() {
		ids[i] = n.id(name)
	}
	if l.tagIDs == nil {
		l.tagIDs = make(map[*tags.Template][]uint32)
	}
	l.tagIDs[t] = ids
	return ids
}

var (
	counterType     = reflect.TypeFor[Counter]()
	hotCounterType  = reflect.TypeFor[HotCounter]()
	gaugeType       = reflect.TypeFor[Gauge]()
	hotGaugeType    = reflect.TypeFor[HotGauge]()
	histogramType   = reflect.TypeFor[Histogram]()
	textReadoutType = reflect.TypeFor[TextReadout]()
)

// buildLayout walks a struct type. Stat fields need a `stat:"name[,opts]"`
// tag; nested struct fields are flattened, with their tag (if any) as a name
// prefix, e.g. `stat:"circuit_breakers.default."`.
func buildLayout(t reflect.Type) (*layout, error) {
	l := &layout{}
	if err := l.walk(t, "", 0); err != nil {
		return nil, err
	}
	seen := make(map[string]bool, len(l.fields))
	for _, f := range l.fields {
		if seen[f.name] {
			return nil, fmt.Errorf("stats struct %s: stat name %q declared twice", t, f.name)
		}
		seen[f.name] = true
	}
	l.sorted = make([]uint32, len(l.fields))
	for i := range l.sorted {
		l.sorted[i] = uint32(i)
	}
	sort.Slice(l.sorted, func(a, b int) bool {
		return l.fields[l.sorted[a]].name < l.fields[l.sorted[b]].name
	})
	return l, nil
}

func (l *layout) walk(t reflect.Type, prefix string, offset uintptr) error {
	for i := range t.NumField() {
		sf := t.Field(i)
		tag, tagged := sf.Tag.Lookup("stat")
		var kind Kind
		switch sf.Type {
		case counterType, hotCounterType:
			kind = KindCounter
		case gaugeType, hotGaugeType:
			kind = KindGauge
		case histogramType:
			kind = KindHistogram
		case textReadoutType:
			kind = KindTextReadout
		default:
			if sf.Type.Kind() == reflect.Struct && tag != "-" {
				if err := l.walk(sf.Type, prefix+tag, offset+sf.Offset); err != nil {
					return err
				}
			}
			continue
		}
		if !tagged || tag == "" {
			return fmt.Errorf("stats struct %s: field %s: missing `stat:\"name\"` tag", t, sf.Name)
		}
		f, err := parseTag(tag, kind)
		if err != nil {
			return fmt.Errorf("stats struct %s: field %s: %w", t, sf.Name, err)
		}
		f.name = prefix + f.name
		f.offset = offset + sf.Offset
		f.hot = sf.Type == hotCounterType || sf.Type == hotGaugeType
		l.fields = append(l.fields, f)
	}
	return nil
}

// parseTag reads `name[,accumulate|never_import|hidden][,unit=ms|us|bytes|percent|unspecified]`.
func parseTag(tag string, kind Kind) (field, error) {
	parts := strings.Split(tag, ",")
	f := field{name: parts[0], kind: kind}
	if f.name == "" || strings.HasPrefix(f.name, ".") || strings.HasSuffix(f.name, ".") {
		return f, fmt.Errorf("stat tag %q: name must be non-empty and not start or end with '.'", tag)
	}
	for _, opt := range parts[1:] {
		switch {
		case kind == KindGauge && opt == "accumulate":
			f.mode = Accumulate
		case kind == KindGauge && opt == "never_import":
			f.mode = NeverImport
		case kind == KindGauge && opt == "hidden":
			f.mode = HiddenAccumulate
		case kind == KindHistogram && strings.HasPrefix(opt, "unit="):
			u, ok := parseUnit(strings.TrimPrefix(opt, "unit="))
			if !ok {
				return f, fmt.Errorf("stat tag %q: unit %q; must be one of unspecified, bytes, us, ms, percent", tag, opt)
			}
			f.unit = u
		default:
			return f, fmt.Errorf("stat tag %q: option %q is not valid for a %s", tag, opt, kind)
		}
	}
	return f, nil
}

// counterAt returns the counter of field f inside the struct at base, with a HotCounter's per-P
// increments folded in.
func counterAt(base unsafe.Pointer, f *field) *Counter {
	if f.hot {
		return at[HotCounter](base, f).fold()
	}
	return at[Counter](base, f)
}

// gaugeAt returns the gauge of field f inside the struct at base, with a HotGauge's per-P
// changes folded in.
func gaugeAt(base unsafe.Pointer, f *field) *Gauge {
	if f.hot {
		return at[HotGauge](base, f).fold()
	}
	return at[Gauge](base, f)
}

// at returns a pointer to field f inside the struct at base.
func at[T any](base unsafe.Pointer, f *field) *T {
	return (*T)(unsafe.Add(base, f.offset))
}
