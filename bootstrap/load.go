package bootstrap

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/legateproxy/legate/internal/exepages"
)

// Format is the syntax of a bootstrap source.
type Format int

const (
	// FormatAuto tries JSON, then YAML: what Envoy does for a file with another extension.
	FormatAuto Format = iota
	FormatJSON
	FormatYAML
)

func (f Format) String() string {
	switch f {
	case FormatJSON:
		return "json"
	case FormatYAML:
		return "yaml"
	}
	return "auto"
}

// FormatOf picks the format from a file name as Envoy does: .yaml and .yml are YAML, .json is
// JSON, anything else is FormatAuto.
func FormatOf(path string) Format {
	switch strings.ToLower(filepath.Ext(path)) {
	case ".yaml", ".yml":
		return FormatYAML
	case ".json":
		return FormatJSON
	}
	return FormatAuto
}

// ConfigYAMLName is the file name errors use for the --config-yaml source.
const ConfigYAMLName = "--config-yaml"

// Source says where the bootstrap comes from: Envoy's --config-path (Path), --config-yaml (YAML)
// and --allow-unknown-static-fields. At least one of Path and YAML must be set; when both are,
// YAML is merged over the file.
type Source struct {
	Path                     string
	YAML                     string
	AllowUnknownStaticFields bool
}

// Loaded is a decoded and validated bootstrap. It is not modified after Load returns and may be
// read from any goroutine.
type Loaded struct {
	Bootstrap *bootstrapv3.Bootstrap
	// Warnings lists, one per field, the unknown fields dropped because
	// AllowUnknownStaticFields was set, and the fields set that Legate accepts without
	// implementing them (Ignored in Audit's table); the server logs them and counts them in
	// server.static_unknown_fields.
	Warnings []string
	// Upgraded lists, one per rewrite, the v2 spellings rewritten into their v3 form.
	Upgraded []string
}

// Options tunes Parse.
type Options struct {
	// Name is the file name used in errors; "" means "bootstrap".
	Name string
	// AllowUnknownFields drops unknown fields with a warning instead of failing
	// (Envoy's --allow-unknown-static-fields).
	AllowUnknownFields bool
}

// Load reads, merges, upgrades, decodes and validates the bootstrap named by src, as Envoy's
// server does at start. A problem in the configuration is returned as Errors; a file that
// cannot be read as a wrapped os error.
func Load(src Source) (*Loaded, error) {
	if src.Path == "" && src.YAML == "" {
		return nil, errors.New("no bootstrap: at least one of --config-path and --config-yaml must be set")
	}
	var (
		out   Loaded
		names []string
	)
	if src.Path != "" {
		data, err := os.ReadFile(src.Path)
		if err != nil {
			return nil, fmt.Errorf("read bootstrap: %w", err)
		}
		b, err := decode(data, FormatOf(src.Path), Options{Name: src.Path, AllowUnknownFields: src.AllowUnknownStaticFields}, &out)
		if err != nil {
			return nil, err
		}
		out.Bootstrap = b
		names = append(names, src.Path)
	}
	if src.YAML != "" {
		b, err := decode([]byte(src.YAML), FormatYAML, Options{Name: ConfigYAMLName, AllowUnknownFields: src.AllowUnknownStaticFields}, &out)
		if err != nil {
			return nil, err
		}
		if out.Bootstrap == nil {
			out.Bootstrap = b
		} else {
			// Envoy's MergeFrom: scalars set in the override replace, messages merge,
			// repeated fields append, map entries replace.
			proto.Merge(out.Bootstrap, b)
		}
		names = append(names, ConfigYAMLName)
	}
	exepages.Checkpoint()
	p := &problems{file: strings.Join(names, " merged with ")}
	validate(p, "", out.Bootstrap)
	out.Warnings = append(out.Warnings, auditProblems(p, out.Bootstrap)...)
	out.Warnings = append(out.Warnings, deprecations(p.file, out.Bootstrap)...)
	if err := p.err(); err != nil {
		return nil, err
	}
	return &out, nil
}

// Parse decodes and validates one bootstrap source held in memory.
func Parse(data []byte, format Format, opts Options) (*Loaded, error) {
	var out Loaded
	b, err := decode(data, format, opts, &out)
	if err != nil {
		return nil, err
	}
	out.Bootstrap = b
	p := &problems{file: name(opts)}
	validate(p, "", b)
	out.Warnings = append(out.Warnings, auditProblems(p, b)...)
	out.Warnings = append(out.Warnings, deprecations(p.file, b)...)
	if err := p.err(); err != nil {
		return nil, err
	}
	return &out, nil
}

func name(opts Options) string {
	if opts.Name == "" {
		return "bootstrap"
	}
	return opts.Name
}

// decode turns one source into a Bootstrap without protoc-gen-validate checks (those run after
// merging), appending its warnings and upgrades to out.
func decode(data []byte, format Format, opts Options, out *Loaded) (*bootstrapv3.Bootstrap, error) {
	b := &bootstrapv3.Bootstrap{}
	w, err := decodeMessage(data, format, opts, b)
	if err != nil {
		return nil, err
	}
	out.Warnings = append(out.Warnings, w.warnings...)
	out.Upgraded = append(out.Upgraded, w.upgraded...)
	return b, nil
}

// Unmarshal decodes data, in format, into m with the rules Envoy's loader applies to any
// message it reads from a file (MessageUtil::loadFromFile), as Load does for the bootstrap:
// xDS resources read from a path config source use it. Unknown fields are errors. The error is
// Errors, naming name and the field paths.
func Unmarshal(name string, data []byte, format Format, m proto.Message) error {
	_, err := decodeMessage(data, format, Options{Name: name}, m)
	return err
}

// decodeMessage reads one source into m: the tree is checked and made canonical by the walk,
// then decoded by protojson.
func decodeMessage(data []byte, format Format, opts Options, m proto.Message) (*walker, error) {
	p := &problems{file: name(opts)}
	tree, err := toTree(data, format)
	var fe *FieldError
	switch {
	case errors.As(err, &fe):
		p.add(fe.Path, fe.Rule)
		return nil, p.err()
	case err != nil:
		p.add("", err.Error())
		return nil, p.err()
	}
	if tree == nil {
		tree = map[string]any{} // an empty YAML document is an empty message
	}
	// The parse, the walk over the descriptors, the re-encoding and protojson each run code and
	// read types spread over the binary: a checkpoint between them keeps their pages from adding
	// up (internal/exepages).
	exepages.Checkpoint()
	w := &walker{p: p, allowUnknown: opts.AllowUnknownFields}
	w.message("", m.ProtoReflect().Descriptor(), tree, false)
	exepages.Checkpoint()
	if err := p.err(); err != nil {
		return nil, err
	}
	canonical, err := json.Marshal(tree)
	if err != nil {
		p.add("", fmt.Sprintf("re-encoding: %v", err))
		return nil, p.err()
	}
	exepages.Checkpoint()
	if err := (protojson.UnmarshalOptions{DiscardUnknown: false}).Unmarshal(canonical, m); err != nil {
		// The walk accepts only what protojson accepts, so this names a gap in the walk.
		p.add("", fmt.Sprintf("decoding: %v", err))
		return nil, p.err()
	}
	return w, nil
}

// toTree parses data into a generic JSON tree whose numbers are json.Number, so that 64-bit
// integers keep every digit.
func toTree(data []byte, format Format) (any, error) {
	switch format {
	case FormatJSON:
		return jsonTree(data)
	case FormatYAML:
		return yamlTree(data)
	}
	tree, jerr := jsonTree(data)
	var fe *FieldError
	if jerr == nil || errors.As(jerr, &fe) {
		return tree, jerr // valid JSON syntax: its problem is not a reason to try YAML
	}
	tree, yerr := yamlTree(data)
	if yerr != nil {
		return nil, fmt.Errorf("neither JSON (%v) nor YAML (%v)", jerr, yerr)
	}
	return tree, nil
}

// maxDepth bounds the nesting of a bootstrap source; Envoy's own parsers stop far earlier than
// any real configuration would reach.
const maxDepth = 1000

func jsonTree(data []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	tree, err := readJSON(dec, "", 0)
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("invalid JSON: data after the top-level value")
	}
	if _, ok := tree.(map[string]any); !ok && tree != nil {
		return nil, fmt.Errorf("got %s at the top level; want an object", describe(tree))
	}
	return tree, nil
}

// readJSON reads one JSON value. Unlike json.Unmarshal into a map, it keeps every value of a
// key repeated in one object (as a jsonRepeat), because what protobuf's legacy parser makes of
// them depends on the field (mergeRepeat).
func readJSON(dec *json.Decoder, path string, depth int) (any, error) {
	if depth > maxDepth {
		return nil, &FieldError{Path: path, Rule: fmt.Sprintf("nested more than %d levels deep", maxDepth)}
	}
	tok, err := dec.Token()
	if err != nil {
		return nil, fmt.Errorf("invalid JSON: %v", err)
	}
	delim, ok := tok.(json.Delim)
	if !ok {
		return tok, nil // string, json.Number, bool or nil
	}
	switch delim {
	case '{':
		obj := map[string]any{}
		for dec.More() {
			kt, err := dec.Token()
			if err != nil {
				return nil, fmt.Errorf("invalid JSON: %v", err)
			}
			key, _ := kt.(string)
			v, err := readJSON(dec, joinPath(path, key), depth+1)
			if err != nil {
				return nil, err
			}
			obj[key] = withRepeat(obj[key], v)
		}
		_, err = dec.Token()
		if err != nil {
			return nil, fmt.Errorf("invalid JSON: %v", err)
		}
		return obj, nil
	case '[':
		list := []any{}
		for i := 0; dec.More(); i++ {
			v, err := readJSON(dec, fmt.Sprintf("%s[%d]", path, i), depth+1)
			if err != nil {
				return nil, err
			}
			list = append(list, v)
		}
		_, err = dec.Token()
		if err != nil {
			return nil, fmt.Errorf("invalid JSON: %v", err)
		}
		return list, nil
	}
	return nil, fmt.Errorf("invalid JSON: unexpected %v", delim)
}
