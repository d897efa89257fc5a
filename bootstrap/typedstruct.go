package bootstrap

import (
	"bytes"
	"encoding/json"
	"fmt"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/structpb"
)

// OpenTypedStructs replaces, in place, every Any in m that holds a udpa.type.v1.TypedStruct or
// xds.type.v3.TypedStruct (at any depth, inside other Anys too) by the Any of the message the
// TypedStruct describes, converted with the bootstrap loader's rules. The xDS decoders call it
// on each resource, so a TypedStruct delivered by a management server works as one in a
// bootstrap does. Errors are Errors whose paths start at path and whose file is "xds".
func OpenTypedStructs(path string, m proto.Message) error {
	p := &problems{file: "xds"}
	openAnys(p, path, m.ProtoReflect())
	return p.err()
}

// openAnys opens the TypedStructs inside the Anys of m and reports whether any changed.
func openAnys(p *problems, path string, m protoreflect.Message) bool {
	changed := false
	eachAny(path, m, func(apath string, a *anypb.Any) {
		if openAny(p, apath, a) {
			changed = true
		}
	})
	return changed
}

// openAny converts a when it holds a TypedStruct, then opens the Anys of the message inside it,
// re-encoding a when anything changed.
func openAny(p *problems, path string, a *anypb.Any) bool {
	mt, err := protoregistry.GlobalTypes.FindMessageByURL(a.GetTypeUrl())
	if err != nil {
		return false // left for the consumer to refuse, as before
	}
	inner := mt.New().Interface()
	if err := proto.Unmarshal(a.GetValue(), inner); err != nil {
		return false
	}
	converted := false
	if isTypedStruct(mt.Descriptor()) {
		if inner, converted = typedStructMessage(p, path, inner); !converted {
			return false
		}
	}
	if !openAnys(p, path, inner.ProtoReflect()) && !converted {
		return false
	}
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(inner)
	if err != nil {
		p.add(path, fmt.Sprintf("cannot encode %s: %v", inner.ProtoReflect().Descriptor().FullName(), err))
		return false
	}
	a.TypeUrl = "type.googleapis.com/" + string(inner.ProtoReflect().Descriptor().FullName())
	a.Value = b
	return true
}

// typedStructMessage converts a decoded TypedStruct (either package's: both have type_url and
// value) with the walk's rules, so that the result is what the bootstrap loader would build.
func typedStructMessage(p *problems, path string, ts proto.Message) (proto.Message, bool) {
	r := ts.ProtoReflect()
	fields := r.Descriptor().Fields()
	url := r.Get(fields.ByName("type_url")).String()
	var body map[string]any
	if v := r.Get(fields.ByName("value")).Message().Interface(); v != nil {
		if s, ok := v.(*structpb.Struct); ok {
			j, err := protojson.Marshal(s)
			if err != nil {
				p.add(joinPath(path, "value"), err.Error())
				return nil, false
			}
			dec := json.NewDecoder(bytes.NewReader(j))
			dec.UseNumber()
			if err := dec.Decode(&body); err != nil {
				p.add(joinPath(path, "value"), err.Error())
				return nil, false
			}
		}
	}
	obj := map[string]any{"@type": "type.googleapis.com/" + string(r.Descriptor().FullName()), "type_url": url}
	if body != nil {
		obj["value"] = body
	}
	w := &walker{p: p}
	before := len(p.errs)
	tree := w.anyMessage(path, obj)
	if len(p.errs) > before {
		return nil, false
	}
	j, err := json.Marshal(tree)
	if err != nil {
		p.add(path, err.Error())
		return nil, false
	}
	var a anypb.Any
	if err := protojson.Unmarshal(j, &a); err != nil {
		p.add(path, fmt.Sprintf("decoding: %v", err))
		return nil, false
	}
	out, err := a.UnmarshalNew()
	if err != nil {
		p.add(path, fmt.Sprintf("decoding: %v", err))
		return nil, false
	}
	return out, true
}
