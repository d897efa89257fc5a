package configdump

import (
	"github.com/cncf/xds/go/udpa/annotations"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
)

// Redacted is what sensitive strings and bytes are replaced with.
const Redacted = "[redacted]"

// Redact rewrites, in place, every field of m annotated
// (udpa.annotations.sensitive) = true and everything beneath it, as Envoy's
// MessageUtil::redact does before /config_dump prints (admin reference §6.8):
// strings become "[redacted]", bytes the bytes "[redacted]", each element of
// repeated strings and bytes likewise, other scalars are cleared, and of a
// map only the values are rewritten. Fields not set are left alone.
//
// Redact looks inside every google.protobuf.Any whose type is linked into the
// binary (protoregistry.GlobalTypes) and inside udpa.type.v1.TypedStruct and
// xds.type.v3.TypedStruct values whose type_url is known, and packs them
// again when something changed. Anys and TypedStructs of unknown types are
// left as they are. Redact keeps no state and may run concurrently on
// different messages.
func Redact(m proto.Message) {
	if m == nil {
		return
	}
	r := redactor{sensitive: map[protoreflect.FieldDescriptor]bool{}}
	r.message(m.ProtoReflect(), false)
}

// redactor walks one message tree. sensitive caches the annotation lookups
// of this walk.
type redactor struct {
	sensitive map[protoreflect.FieldDescriptor]bool
}

func (r *redactor) isSensitive(fd protoreflect.FieldDescriptor) bool {
	if v, ok := r.sensitive[fd]; ok {
		return v
	}
	v := false
	if opts := fd.Options(); opts != nil && opts.ProtoReflect().IsValid() {
		v, _ = proto.GetExtension(opts, annotations.E_Sensitive).(bool)
	}
	r.sensitive[fd] = v
	return v
}

// message redacts m; inSensitive says an ancestor field was sensitive. It
// reports whether anything changed.
func (r *redactor) message(m protoreflect.Message, inSensitive bool) bool {
	switch m.Descriptor().FullName() {
	case "google.protobuf.Any":
		return r.anyMessage(m, inSensitive)
	case "udpa.type.v1.TypedStruct", "xds.type.v3.TypedStruct":
		return r.typedStruct(m, inSensitive)
	}
	var set []protoreflect.FieldDescriptor
	m.Range(func(fd protoreflect.FieldDescriptor, _ protoreflect.Value) bool {
		set = append(set, fd)
		return true
	})
	changed := false
	for _, fd := range set {
		if r.field(m, fd, inSensitive || r.isSensitive(fd)) {
			changed = true
		}
	}
	return changed
}

// redactedScalar is the replacement of a sensitive scalar of fd's kind, or
// an invalid Value when the scalar is to be cleared.
func redactedScalar(fd protoreflect.FieldDescriptor) protoreflect.Value {
	switch fd.Kind() {
	case protoreflect.StringKind:
		return protoreflect.ValueOfString(Redacted)
	case protoreflect.BytesKind:
		return protoreflect.ValueOfBytes([]byte(Redacted))
	}
	return protoreflect.Value{}
}

func (r *redactor) field(m protoreflect.Message, fd protoreflect.FieldDescriptor, sensitive bool) bool {
	switch {
	case fd.IsMap():
		return r.mapValues(m.Mutable(fd).Map(), fd.MapValue(), sensitive)
	case fd.IsList() && fd.Message() != nil:
		l := m.Mutable(fd).List()
		changed := false
		for i := range l.Len() {
			if r.message(l.Get(i).Message(), sensitive) {
				changed = true
			}
		}
		return changed
	case fd.Message() != nil:
		return r.message(m.Mutable(fd).Message(), sensitive)
	case !sensitive:
		return false
	case fd.IsList():
		v := redactedScalar(fd)
		if !v.IsValid() {
			m.Clear(fd)
			return true
		}
		l := m.Mutable(fd).List()
		for i := range l.Len() {
			l.Set(i, v)
		}
		return true
	default:
		if v := redactedScalar(fd); v.IsValid() {
			m.Set(fd, v)
		} else {
			m.Clear(fd)
		}
		return true
	}
}

// mapValues redacts the values of a map; keys are kept.
func (r *redactor) mapValues(mp protoreflect.Map, valueFd protoreflect.FieldDescriptor, sensitive bool) bool {
	var keys []protoreflect.MapKey
	mp.Range(func(k protoreflect.MapKey, _ protoreflect.Value) bool {
		keys = append(keys, k)
		return true
	})
	changed := false
	for _, k := range keys {
		switch {
		case valueFd.Message() != nil:
			if r.message(mp.Mutable(k).Message(), sensitive) {
				changed = true
			}
		case sensitive:
			v := redactedScalar(valueFd)
			if !v.IsValid() {
				v = valueFd.Default()
			}
			mp.Set(k, v)
			changed = true
		}
	}
	return changed
}

// anyMessage redacts inside a packed message of a known type and packs it
// again if anything changed.
func (r *redactor) anyMessage(a protoreflect.Message, inSensitive bool) bool {
	inner, err := unpack(a)
	if err != nil || !r.message(inner, inSensitive) {
		return false
	}
	if err := repack(a, inner, a.Get(a.Descriptor().Fields().ByNumber(1)).String()); err != nil {
		// Never leave the secret behind: drop the packed value instead.
		a.Clear(a.Descriptor().Fields().ByNumber(2))
	}
	return true
}

// typedStruct redacts the Struct value of a TypedStruct by converting it to
// the message its type_url names and back, as Envoy does through JSON.
func (r *redactor) typedStruct(ts protoreflect.Message, inSensitive bool) bool {
	fds := ts.Descriptor().Fields()
	urlFd, valueFd := fds.ByName("type_url"), fds.ByName("value")
	if urlFd == nil || valueFd == nil || !ts.Has(valueFd) {
		return false
	}
	mt, err := protoregistry.GlobalTypes.FindMessageByURL(ts.Get(urlFd).String())
	if err != nil {
		return false
	}
	js, err := protojson.Marshal(ts.Get(valueFd).Message().Interface())
	if err != nil {
		return false
	}
	inner := mt.New()
	if err := protojson.Unmarshal(js, inner.Interface()); err != nil {
		return false
	}
	if !r.message(inner, inSensitive) {
		return false
	}
	value := ts.NewField(valueFd).Message()
	js, err = protojson.MarshalOptions{UseProtoNames: true}.Marshal(inner.Interface())
	if err == nil {
		err = protojson.Unmarshal(js, value.Interface())
	}
	if err != nil {
		// Never leave the secret behind: drop the value instead.
		ts.Clear(valueFd)
		return true
	}
	ts.Set(valueFd, protoreflect.ValueOfMessage(value))
	return true
}
