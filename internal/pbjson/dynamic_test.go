package pbjson_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/dynamicpb"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/fieldmaskpb"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/legateproxy/legate/internal/pbjson"
)

// testDescriptor builds, without protoc, the message
//
//	syntax = "proto3";
//	package pbjsontest;
//	enum Color { RED = 0; BLUE = 1; }
//	message Sample {
//	  int32 late = 20;                        // declared first, printed last
//	  map<int32, string> by_int = 1;
//	  map<bool, string> by_bool = 2;
//	  map<uint64, string> by_uint = 3;
//	  optional int32 opt = 4;
//	  map<string, google.protobuf.Value> values = 5;
//	  repeated google.protobuf.Value list = 6;
//	  google.protobuf.Value single = 7;
//	  google.protobuf.FieldMask mask = 8;
//	  float ratio = 9;
//	  google.protobuf.NullValue nothing = 10;
//	  Color color = 11;
//	  map<sint64, Color> colors = 12;
//	}
func testDescriptor(t testing.TB) protoreflect.MessageDescriptor {
	t.Helper()
	label := func(l descriptorpb.FieldDescriptorProto_Label) *descriptorpb.FieldDescriptorProto_Label { return &l }
	typ := func(k descriptorpb.FieldDescriptorProto_Type) *descriptorpb.FieldDescriptorProto_Type { return &k }
	field := func(name string, num int32, k descriptorpb.FieldDescriptorProto_Type, typeName string, l descriptorpb.FieldDescriptorProto_Label) *descriptorpb.FieldDescriptorProto {
		f := &descriptorpb.FieldDescriptorProto{Name: proto.String(name), Number: proto.Int32(num), Type: typ(k), Label: label(l), JsonName: proto.String(name)}
		if typeName != "" {
			f.TypeName = proto.String(typeName)
		}
		return f
	}
	opt := descriptorpb.FieldDescriptorProto_LABEL_OPTIONAL
	rep := descriptorpb.FieldDescriptorProto_LABEL_REPEATED
	entry := func(name string, key descriptorpb.FieldDescriptorProto_Type, val descriptorpb.FieldDescriptorProto_Type, valType string) *descriptorpb.DescriptorProto {
		return &descriptorpb.DescriptorProto{
			Name:    proto.String(name),
			Field:   []*descriptorpb.FieldDescriptorProto{field("key", 1, key, "", opt), field("value", 2, val, valType, opt)},
			Options: &descriptorpb.MessageOptions{MapEntry: proto.Bool(true)},
		}
	}
	optField := field("opt", 4, descriptorpb.FieldDescriptorProto_TYPE_INT32, "", opt)
	optField.OneofIndex = proto.Int32(0)
	optField.Proto3Optional = proto.Bool(true)
	fdp := &descriptorpb.FileDescriptorProto{
		Name:       proto.String("pbjsontest/sample.proto"),
		Package:    proto.String("pbjsontest"),
		Syntax:     proto.String("proto3"),
		Dependency: []string{"google/protobuf/struct.proto", "google/protobuf/field_mask.proto"},
		EnumType: []*descriptorpb.EnumDescriptorProto{{
			Name: proto.String("Color"),
			Value: []*descriptorpb.EnumValueDescriptorProto{
				{Name: proto.String("RED"), Number: proto.Int32(0)},
				{Name: proto.String("BLUE"), Number: proto.Int32(1)},
			},
		}},
		MessageType: []*descriptorpb.DescriptorProto{{
			Name: proto.String("Sample"),
			Field: []*descriptorpb.FieldDescriptorProto{
				field("late", 20, descriptorpb.FieldDescriptorProto_TYPE_INT32, "", opt),
				field("by_int", 1, descriptorpb.FieldDescriptorProto_TYPE_MESSAGE, ".pbjsontest.Sample.ByIntEntry", rep),
				field("by_bool", 2, descriptorpb.FieldDescriptorProto_TYPE_MESSAGE, ".pbjsontest.Sample.ByBoolEntry", rep),
				field("by_uint", 3, descriptorpb.FieldDescriptorProto_TYPE_MESSAGE, ".pbjsontest.Sample.ByUintEntry", rep),
				optField,
				field("values", 5, descriptorpb.FieldDescriptorProto_TYPE_MESSAGE, ".pbjsontest.Sample.ValuesEntry", rep),
				field("list", 6, descriptorpb.FieldDescriptorProto_TYPE_MESSAGE, ".google.protobuf.Value", rep),
				field("single", 7, descriptorpb.FieldDescriptorProto_TYPE_MESSAGE, ".google.protobuf.Value", opt),
				field("mask", 8, descriptorpb.FieldDescriptorProto_TYPE_MESSAGE, ".google.protobuf.FieldMask", opt),
				field("ratio", 9, descriptorpb.FieldDescriptorProto_TYPE_FLOAT, "", opt),
				field("nothing", 10, descriptorpb.FieldDescriptorProto_TYPE_ENUM, ".google.protobuf.NullValue", opt),
				field("color", 11, descriptorpb.FieldDescriptorProto_TYPE_ENUM, ".pbjsontest.Color", opt),
				field("colors", 12, descriptorpb.FieldDescriptorProto_TYPE_MESSAGE, ".pbjsontest.Sample.ColorsEntry", rep),
			},
			NestedType: []*descriptorpb.DescriptorProto{
				entry("ByIntEntry", descriptorpb.FieldDescriptorProto_TYPE_INT32, descriptorpb.FieldDescriptorProto_TYPE_STRING, ""),
				entry("ByBoolEntry", descriptorpb.FieldDescriptorProto_TYPE_BOOL, descriptorpb.FieldDescriptorProto_TYPE_STRING, ""),
				entry("ByUintEntry", descriptorpb.FieldDescriptorProto_TYPE_UINT64, descriptorpb.FieldDescriptorProto_TYPE_STRING, ""),
				entry("ValuesEntry", descriptorpb.FieldDescriptorProto_TYPE_STRING, descriptorpb.FieldDescriptorProto_TYPE_MESSAGE, ".google.protobuf.Value"),
				entry("ColorsEntry", descriptorpb.FieldDescriptorProto_TYPE_SINT64, descriptorpb.FieldDescriptorProto_TYPE_ENUM, ".pbjsontest.Color"),
			},
			OneofDecl: []*descriptorpb.OneofDescriptorProto{{Name: proto.String("_opt")}},
		}},
	}
	fd, err := protodesc.NewFile(fdp, protoregistry.GlobalFiles)
	if err != nil {
		t.Fatalf("building test descriptor: %v", err)
	}
	return fd.Messages().ByName("Sample")
}

func TestDynamicMessage(t *testing.T) {
	md := testDescriptor(t)
	fields := md.Fields()
	set := func(m *dynamicpb.Message, name string, v protoreflect.Value) {
		m.Set(fields.ByName(protoreflect.Name(name)), v)
	}
	mapOf := func(m *dynamicpb.Message, name string, kv map[any]protoreflect.Value) {
		mp := m.Mutable(fields.ByName(protoreflect.Name(name))).Map()
		for k, v := range kv {
			mp.Set(protoreflect.ValueOf(k).MapKey(), v)
		}
	}
	str := protoreflect.ValueOfString
	tests := []struct {
		name  string
		build func(m *dynamicpb.Message)
		mode  pbjson.Mode
		want  string
	}{
		{
			name: "maps sorted by key value and fields by number",
			build: func(m *dynamicpb.Message) {
				set(m, "late", protoreflect.ValueOfInt32(7))
				mapOf(m, "by_int", map[any]protoreflect.Value{int32(10): str("ten"), int32(-2): str("minus two"), int32(9): str("nine")})
				mapOf(m, "by_bool", map[any]protoreflect.Value{true: str("t"), false: str("f")})
				mapOf(m, "by_uint", map[any]protoreflect.Value{uint64(18446744073709551615): str("max"), uint64(2): str("two")})
				mapOf(m, "colors", map[any]protoreflect.Value{int64(-1): protoreflect.ValueOfEnum(1), int64(3): protoreflect.ValueOfEnum(5)})
			},
			want: `{
 "by_int": {
  "-2": "minus two",
  "9": "nine",
  "10": "ten"
 },
 "by_bool": {
  "false": "f",
  "true": "t"
 },
 "by_uint": {
  "2": "two",
  "18446744073709551615": "max"
 },
 "colors": {
  "-1": "BLUE",
  "3": 5
 },
 "late": 7
}
`,
		},
		{
			name: "proto3 optional zero has presence",
			build: func(m *dynamicpb.Message) {
				set(m, "opt", protoreflect.ValueOfInt32(0))
				set(m, "ratio", protoreflect.ValueOfFloat32(0.1))
			},
			want: "{\n \"opt\": 0,\n \"ratio\": 0.1\n}\n",
		},
		{
			name:  "all fields skips unset optional and messages",
			build: func(*dynamicpb.Message) {},
			mode:  pbjson.AllFields,
			want: `{
 "by_int": {},
 "by_bool": {},
 "by_uint": {},
 "values": {},
 "list": [],
 "ratio": 0,
 "nothing": null,
 "color": "RED",
 "colors": {},
 "late": 0
}
`,
		},
		{
			name: "empty values dropped",
			build: func(m *dynamicpb.Message) {
				mapOf(m, "values", map[any]protoreflect.Value{
					"b": protoreflect.ValueOfMessage((&structpb.Value{}).ProtoReflect()),
					"a": protoreflect.ValueOfMessage(structpb.NewNumberValue(2).ProtoReflect()),
				})
				l := m.Mutable(fields.ByName("list")).List()
				l.Append(protoreflect.ValueOfMessage((&structpb.Value{}).ProtoReflect()))
				l.Append(protoreflect.ValueOfMessage(structpb.NewBoolValue(false).ProtoReflect()))
				set(m, "single", protoreflect.ValueOfMessage((&structpb.Value{}).ProtoReflect()))
			},
			want: "{\n \"values\": {\n  \"a\": 2\n },\n \"list\": [\n  false\n ]\n}\n",
		},
		{
			name: "field mask in lower camel case",
			build: func(m *dynamicpb.Message) {
				mask := &fieldmaskpb.FieldMask{Paths: []string{"foo_bar.baz_qux", "a__b", "x_1", "trailing_", "Upper_Case"}}
				set(m, "mask", protoreflect.ValueOfMessage(mask.ProtoReflect()))
			},
			want: "{\n \"mask\": \"fooBar.bazQux,aB,x1,trailing,Upper_Case\"\n}\n",
		},
		{
			name: "empty field mask",
			build: func(m *dynamicpb.Message) {
				set(m, "mask", protoreflect.ValueOfMessage((&fieldmaskpb.FieldMask{}).ProtoReflect()))
			},
			want: "{\n \"mask\": \"\"\n}\n",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := dynamicpb.NewMessage(md)
			tc.build(m)
			if diff := cmp.Diff(tc.want, mustMarshal(t, m, tc.mode)); diff != "" {
				t.Errorf("Marshal mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestPrinterResolver(t *testing.T) {
	md := testDescriptor(t)
	m := dynamicpb.NewMessage(md)
	m.Set(md.Fields().ByName("late"), protoreflect.ValueOfInt32(3))
	value, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	a := &anypb.Any{TypeUrl: "type.googleapis.com/pbjsontest.Sample", Value: value}
	var types protoregistry.Types
	if err := types.RegisterMessage(dynamicpb.NewMessageType(md)); err != nil {
		t.Fatal(err)
	}
	got, err := pbjson.Printer{Resolver: &types}.Marshal(a)
	if err != nil {
		t.Fatalf("Printer{Resolver}.Marshal() error: %v", err)
	}
	want := "{\n \"@type\": \"type.googleapis.com/pbjsontest.Sample\",\n \"late\": 3\n}\n"
	if string(got) != want {
		t.Errorf("Printer{Resolver}.Marshal() = %q; want %q", got, want)
	}
	if _, err := pbjson.Marshal(a, pbjson.OmitDefaults); err == nil {
		t.Errorf("Marshal() with the global registry = nil error; want the type to be unknown")
	}
}
