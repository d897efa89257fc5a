package pbjson

// AppendString appends s to b as a quoted JSON string with the printer's escaping (protobuf
// C++'s: short escapes, \u00XX for controls, < and >, invisible code points escaped, a space
// for each sequence that does not decode). Hand-written encoders of admin messages use it to
// print byte for byte what Marshal prints.
func AppendString(b []byte, s string) []byte { return appendQuoted(b, s) }

// AppendDouble appends v to b as the printer prints a double field: %.15g when that reads back
// as v, else %.17g; NaN and infinities quoted.
func AppendDouble(b []byte, v float64) []byte { return appendDouble(b, v) }
