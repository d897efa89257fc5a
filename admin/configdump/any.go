package configdump

import (
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
)

// unpack decodes the message packed in the google.protobuf.Any a, whose
// type must be linked into the binary.
func unpack(a protoreflect.Message) (protoreflect.Message, error) {
	fds := a.Descriptor().Fields()
	mt, err := protoregistry.GlobalTypes.FindMessageByURL(a.Get(fds.ByNumber(1)).String())
	if err != nil {
		return nil, err
	}
	m := mt.New()
	if err := proto.Unmarshal(a.Get(fds.ByNumber(2)).Bytes(), m.Interface()); err != nil {
		return nil, err
	}
	return m, nil
}

// repack stores m in the google.protobuf.Any a under typeURL.
func repack(a, m protoreflect.Message, typeURL string) error {
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(m.Interface())
	if err != nil {
		return err
	}
	fds := a.Descriptor().Fields()
	a.Set(fds.ByNumber(1), protoreflect.ValueOfString(typeURL))
	a.Set(fds.ByNumber(2), protoreflect.ValueOfBytes(b))
	return nil
}
