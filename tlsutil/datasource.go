package tlsutil

import (
	"fmt"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
)

// DataSourceKind says where a DataSource's bytes come from.
type DataSourceKind uint8

const (
	// SourceNone is an unset data source.
	SourceNone DataSourceKind = iota
	// SourceFile reads Filename each time the context loads.
	SourceFile
	// SourceInline holds the bytes in Inline (inline_bytes or inline_string).
	SourceInline
	// SourceEnvironment reads the environment variable EnvironmentVariable.
	SourceEnvironment
)

// DataSource is Envoy's config.core.v3.DataSource: a file name, inline bytes
// or string, or an environment variable. The zero value is unset. It is a
// plain value and safe to share once built.
type DataSource struct {
	Kind                DataSourceKind
	Filename            string
	Inline              []byte
	EnvironmentVariable string
}

// IsSet reports whether the source names any data.
func (d DataSource) IsSet() bool { return d.Kind != SourceNone }

// DisplayPath is the path /certs shows: the file name, or "<inline>" for
// inline data and environment variables (Envoy has no path for either).
func (d DataSource) DisplayPath() string {
	if d.Kind == SourceFile {
		return d.Filename
	}
	return "<inline>"
}

// dataSourceFromProto converts a DataSource; path names the field for errors.
func dataSourceFromProto(path string, pb *corev3.DataSource) (DataSource, error) {
	switch s := pb.GetSpecifier().(type) {
	case nil:
		return DataSource{}, nil
	case *corev3.DataSource_Filename:
		if s.Filename == "" {
			return DataSource{}, fmt.Errorf("%s.filename: empty; must name a file", path)
		}
		return DataSource{Kind: SourceFile, Filename: s.Filename}, nil
	case *corev3.DataSource_InlineBytes:
		return DataSource{Kind: SourceInline, Inline: s.InlineBytes}, nil
	case *corev3.DataSource_InlineString:
		return DataSource{Kind: SourceInline, Inline: []byte(s.InlineString)}, nil
	case *corev3.DataSource_EnvironmentVariable:
		if s.EnvironmentVariable == "" {
			return DataSource{}, fmt.Errorf("%s.environment_variable: empty; must name a variable", path)
		}
		return DataSource{Kind: SourceEnvironment, EnvironmentVariable: s.EnvironmentVariable}, nil
	}
	return DataSource{}, fmt.Errorf("%s: unsupported specifier %T", path, pb.GetSpecifier())
}

// read returns the bytes of d. An unset source gives nil. path names the
// field for errors.
func (d DataSource) read(path string, deps *Deps) ([]byte, error) {
	switch d.Kind {
	case SourceFile:
		b, err := deps.readFile(d.Filename)
		if err != nil {
			return nil, fmt.Errorf("%s.filename = %q: %w", path, d.Filename, err)
		}
		return b, nil
	case SourceInline:
		return d.Inline, nil
	case SourceEnvironment:
		v, ok := deps.lookupEnv(d.EnvironmentVariable)
		if !ok {
			return nil, fmt.Errorf("%s.environment_variable = %q: variable is not set", path, d.EnvironmentVariable)
		}
		return []byte(v), nil
	}
	return nil, nil
}
