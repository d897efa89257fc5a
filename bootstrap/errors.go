package bootstrap

import (
	"strings"
)

// FieldError is one problem in a bootstrap source: the file it was found in ("--config-yaml"
// for the command-line YAML), the field path inside the bootstrap (proto field names as written
// in the file, "[i]" for list elements, `["key"]` for map entries; empty when the problem is
// the whole file) and the rule that was broken.
type FieldError struct {
	File string
	Path string
	Rule string
}

func (e *FieldError) Error() string {
	if e.Path == "" {
		return e.File + ": " + e.Rule
	}
	return e.File + ": " + e.Path + ": " + e.Rule
}

// Errors is every problem found in one load, in the order they were found. Load returns it as
// its error; use errors.As to reach the individual FieldErrors.
type Errors []*FieldError

func (es Errors) Error() string {
	var b strings.Builder
	for i, e := range es {
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(e.Error())
	}
	return b.String()
}

// Unwrap lets errors.Is and errors.As see each FieldError.
func (es Errors) Unwrap() []error {
	out := make([]error, len(es))
	for i, e := range es {
		out[i] = e
	}
	return out
}

// problems collects FieldErrors for one file.
type problems struct {
	file string
	errs Errors
}

func (p *problems) add(path, rule string) {
	p.errs = append(p.errs, &FieldError{File: p.file, Path: path, Rule: rule})
}

// err returns the collected errors, or nil.
func (p *problems) err() error {
	if len(p.errs) == 0 {
		return nil
	}
	return p.errs
}

// joinPath appends a field name to a path.
func joinPath(path, field string) string {
	if path == "" {
		return field
	}
	return path + "." + field
}
