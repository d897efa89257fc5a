// Package pbjson prints protobuf messages as Envoy's admin interface does: the
// "pretty proto JSON" of protobuf C++'s MessageToJsonString with
// preserve_proto_field_names and add_whitespace set (one space of indentation
// per level, fields in field-number order, 64-bit integers quoted, doubles in
// %.15g/%.17g, Envoy's string escaping, well-known types in their JSON forms).
//
// Where the C++ printer's order is a hash-map accident (map fields, Struct
// keys), keys are sorted: strings bytewise, numbers numerically, false
// before true. An Any whose type cannot be resolved is an error, as in
// Envoy.
//
// Go's protojson is not used because its output is deliberately unstable and
// differs from the C++ printer in field order, number formatting and escaping.
//
// Concurrency: the package has no state. Marshal, Write and the methods of a
// Printer value may be called from any number of goroutines at once, as long
// as the message being printed is not modified concurrently.
package pbjson
