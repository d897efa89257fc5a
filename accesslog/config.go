package accesslog

import (
	"fmt"
	"os"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	filev3 "github.com/envoyproxy/go-control-plane/envoy/extensions/access_loggers/file/v3"
)

// FromSubstitutionFormatString compiles an Envoy SubstitutionFormatString: text_format,
// text_format_source (inline string or bytes, a file, or an environment variable) or
// json_format, with omit_empty_values. path names the field in errors ("log_format").
// Custom formatters (the formatters field) are not supported and are an error.
func FromSubstitutionFormatString(p *corev3.SubstitutionFormatString, path string, opts Options) (*Formatter, error) {
	opts.OmitEmptyValues = p.GetOmitEmptyValues()
	if len(p.GetFormatters()) > 0 {
		return nil, fmt.Errorf("%s.formatters: custom formatter extensions are not supported", path)
	}
	switch {
	case p.GetJsonFormat() != nil:
		f, err := ParseJSON(p.GetJsonFormat(), opts)
		if err != nil {
			return nil, fmt.Errorf("%s.%w", path, err)
		}
		return f, nil
	case p.GetTextFormatSource() != nil:
		text, err := readDataSource(p.GetTextFormatSource(), path+".text_format_source", opts.LookupEnv)
		if err != nil {
			return nil, err
		}
		f, err := ParseText(text, opts)
		if err != nil {
			return nil, fmt.Errorf("%s.text_format_source: %w", path, err)
		}
		return f, nil
	case p.GetTextFormat() != "":
		f, err := ParseText(p.GetTextFormat(), opts)
		if err != nil {
			return nil, fmt.Errorf("%s.text_format: %w", path, err)
		}
		return f, nil
	}
	return ParseText(DefaultFormat, opts)
}

// FromFileAccessLog compiles the format of an envoy.access_loggers.file config (format,
// json_format, typed_json_format or log_format; Envoy's default format when none is set).
func FromFileAccessLog(p *filev3.FileAccessLog, opts Options) (*Formatter, error) {
	switch {
	case p.GetLogFormat() != nil:
		return FromSubstitutionFormatString(p.GetLogFormat(), "log_format", opts)
	case p.GetJsonFormat() != nil:
		opts.JSONStrings = true
		return ParseJSON(p.GetJsonFormat(), opts)
	case p.GetTypedJsonFormat() != nil:
		return ParseJSON(p.GetTypedJsonFormat(), opts)
	case p.GetFormat() != "":
		f, err := ParseText(p.GetFormat(), opts)
		if err != nil {
			return nil, fmt.Errorf("format: %w", err)
		}
		return f, nil
	}
	return ParseText(DefaultFormat, opts)
}

// maxDataSourceBytes bounds a text_format_source file.
const maxDataSourceBytes = 1 << 20

func readDataSource(d *corev3.DataSource, path string, lookupEnv func(string) (string, bool)) (string, error) {
	switch {
	case d.GetFilename() != "":
		st, err := os.Stat(d.GetFilename())
		if err != nil {
			return "", fmt.Errorf("%s.filename = %q: %w", path, d.GetFilename(), err)
		}
		if st.Size() > maxDataSourceBytes {
			return "", fmt.Errorf("%s.filename = %q: size %d; must be <= %d bytes", path, d.GetFilename(), st.Size(), maxDataSourceBytes)
		}
		b, err := os.ReadFile(d.GetFilename())
		if err != nil {
			return "", fmt.Errorf("%s.filename = %q: %w", path, d.GetFilename(), err)
		}
		return string(b), nil
	case d.GetInlineBytes() != nil:
		return string(d.GetInlineBytes()), nil
	case d.GetEnvironmentVariable() != "":
		if lookupEnv == nil {
			lookupEnv = os.LookupEnv
		}
		v, ok := lookupEnv(d.GetEnvironmentVariable())
		if !ok {
			return "", fmt.Errorf("%s.environment_variable = %q: variable is not set", path, d.GetEnvironmentVariable())
		}
		return v, nil
	}
	return d.GetInlineString(), nil
}
