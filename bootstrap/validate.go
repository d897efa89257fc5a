package bootstrap

import (
	"fmt"
	"slices"
	"strings"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/anypb"
)

// pgvField is the shape of every protoc-gen-validate error: the Go name of the field (with
// "[i]" or "[key]" for elements), the rule, and the nested error for embedded messages.
type pgvField interface {
	Field() string
	Reason() string
	Cause() error
}

// pgvMulti is the shape of protoc-gen-validate's ValidateAll result.
type pgvMulti interface {
	AllErrors() []error
}

// embeddedFailed is the reason protoc-gen-validate gives when a nested message failed; its cause
// holds the nested errors.
const embeddedFailed = "embedded message failed validation"

// validate runs protoc-gen-validate's ValidateAll on m and on the message inside every Any in
// m (typed_config and the like, which ValidateAll does not open, but which Envoy validates when
// it builds the extension). Problems are added under path.
func validate(p *problems, path string, m proto.Message) {
	if v, ok := m.(interface{ ValidateAll() error }); ok {
		if err := v.ValidateAll(); err != nil {
			addPGV(p, path, m.ProtoReflect().Descriptor(), err)
		}
	}
	eachAny(path, m.ProtoReflect(), func(apath string, a *anypb.Any) {
		inner, err := a.UnmarshalNew()
		if err != nil {
			p.add(apath, fmt.Sprintf("cannot decode %s: %v", a.GetTypeUrl(), err))
			return
		}
		validate(p, apath, inner)
	})
}

// addPGV turns a protoc-gen-validate error for a message of type md into FieldErrors whose
// paths use proto field names.
func addPGV(p *problems, path string, md protoreflect.MessageDescriptor, err error) {
	switch e := err.(type) {
	case pgvMulti:
		for _, sub := range e.AllErrors() {
			addPGV(p, path, md, sub)
		}
	case pgvField:
		goName, index, _ := strings.Cut(e.Field(), "[")
		fd, protoName := goField(md, goName)
		seg := protoName
		if index != "" {
			index = strings.TrimSuffix(index, "]")
			if fd != nil && fd.IsMap() {
				seg += fmt.Sprintf("[%q]", index)
			} else {
				seg += "[" + index + "]"
			}
		}
		fpath := joinPath(path, seg)
		if e.Reason() == embeddedFailed && e.Cause() != nil && fd != nil {
			sub := fd.Message()
			if fd.IsMap() {
				sub = fd.MapValue().Message()
			}
			if sub != nil {
				addPGV(p, fpath, sub, e.Cause())
				return
			}
		}
		rule := e.Reason()
		if c := e.Cause(); c != nil {
			rule += ": " + c.Error()
		}
		p.add(fpath, rule)
	default:
		p.add(path, err.Error())
	}
}

// goField finds the field or oneof of md whose generated Go name is goName and returns it with
// its proto name (fd is nil for a oneof). protoc-gen-go's names are the proto names in
// CamelCase, so comparing without case and underscores is enough.
func goField(md protoreflect.MessageDescriptor, goName string) (protoreflect.FieldDescriptor, string) {
	want := squash(goName)
	fields := md.Fields()
	for i := range fields.Len() {
		if fd := fields.Get(i); squash(string(fd.Name())) == want {
			return fd, string(fd.Name())
		}
	}
	oneofs := md.Oneofs()
	for i := range oneofs.Len() {
		if od := oneofs.Get(i); squash(string(od.Name())) == want {
			return nil, string(od.Name())
		}
	}
	return nil, goName
}

func squash(s string) string {
	return strings.ToLower(strings.ReplaceAll(s, "_", ""))
}

// eachAny calls fn for every Any set in m, depth first, with its path. It does not open the
// Anys; fn does.
func eachAny(path string, m protoreflect.Message, fn func(string, *anypb.Any)) {
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		fpath := joinPath(path, string(fd.Name()))
		switch {
		case fd.IsMap():
			if fd.MapValue().Message() == nil {
				return true
			}
			mp := v.Map()
			keys := make([]protoreflect.MapKey, 0, mp.Len())
			mp.Range(func(k protoreflect.MapKey, _ protoreflect.Value) bool {
				keys = append(keys, k)
				return true
			})
			slices.SortFunc(keys, func(a, b protoreflect.MapKey) int { return strings.Compare(a.String(), b.String()) })
			for _, k := range keys {
				visitAny(fmt.Sprintf("%s[%q]", fpath, k.String()), mp.Get(k).Message(), fn)
			}
		case fd.Message() == nil:
		case fd.IsList():
			list := v.List()
			for i := range list.Len() {
				visitAny(fmt.Sprintf("%s[%d]", fpath, i), list.Get(i).Message(), fn)
			}
		default:
			visitAny(fpath, v.Message(), fn)
		}
		return true
	})
}

func visitAny(path string, m protoreflect.Message, fn func(string, *anypb.Any)) {
	if a, ok := m.Interface().(*anypb.Any); ok {
		fn(path, a)
		return
	}
	eachAny(path, m, fn)
}
