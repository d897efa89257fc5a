package pbjson

import (
	"errors"
	"io"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
)

// Mode selects which fields without presence are printed. It mirrors protobuf
// C++'s always_print_fields_with_no_presence option.
type Mode int

const (
	// OmitDefaults leaves out scalar and enum fields without presence that
	// hold their zero value, and empty repeated and map fields. Fields with
	// presence (message fields, oneof members, proto3 optional fields) are
	// printed whenever they are set, even to a zero value. Envoy uses this
	// mode for /config_dump, /clusters?format=json, /init_dump and
	// /listeners?format=json.
	OmitDefaults Mode = iota
	// AllFields also prints every field without presence at its default
	// (0, false, "", the first enum value, [] and {}). Unset message fields
	// are still left out. Envoy uses this mode for /certs, /contention,
	// /memory, /runtime and /server_info.
	AllFields
)

// Resolver finds the message type named by an Any's type URL.
// *protoregistry.Types implements it.
type Resolver interface {
	FindMessageByURL(url string) (protoreflect.MessageType, error)
}

// Printer prints messages in Envoy's pretty proto JSON. The zero value prints
// with OmitDefaults and resolves Any types through protoregistry.GlobalTypes.
// A Printer is a plain value and safe for concurrent use.
type Printer struct {
	// Mode selects which default-valued fields are printed.
	Mode Mode
	// Resolver resolves the type URLs of Any messages. Nil means
	// protoregistry.GlobalTypes. An Any whose type cannot be resolved is an
	// error, as in Envoy.
	Resolver Resolver
}

// Marshal returns the pretty JSON of m followed by a newline.
func Marshal(m proto.Message, mode Mode) ([]byte, error) {
	return Printer{Mode: mode}.Marshal(m)
}

// Write prints the pretty JSON of m followed by a newline to w. Output is
// flushed to w in chunks while printing, so on error w may hold a prefix of
// the document.
func Write(w io.Writer, m proto.Message, mode Mode) error {
	return Printer{Mode: mode}.Write(w, m)
}

// Marshal returns the pretty JSON of m followed by a newline.
func (p Printer) Marshal(m proto.Message) ([]byte, error) {
	e := p.encoder(nil)
	if err := e.document(m); err != nil {
		return nil, err
	}
	return e.buf, nil
}

// flushSize is the amount of buffered output after which Write hands the
// buffer to the underlying writer.
const flushSize = 32 << 10

// Write prints the pretty JSON of m followed by a newline to w.
func (p Printer) Write(w io.Writer, m proto.Message) error {
	e := p.encoder(w)
	e.buf = make([]byte, 0, flushSize+flushSize/4)
	if err := e.document(m); err != nil {
		if e.werr != nil {
			return e.werr
		}
		return err
	}
	return e.flush()
}

func (p Printer) encoder(w io.Writer) *encoder {
	r := p.Resolver
	if r == nil {
		r = protoregistry.GlobalTypes
	}
	return &encoder{all: p.Mode == AllFields, resolver: r, out: w}
}

func (e *encoder) document(m proto.Message) error {
	if m == nil {
		e.buf = append(e.buf, "{}\n"...)
		return nil
	}
	if err := e.message(m.ProtoReflect(), true); err != nil {
		var pe *PathError
		if !errors.As(err, &pe) {
			err = &PathError{Err: err}
		}
		return err
	}
	e.buf = append(e.buf, '\n')
	return nil
}
