package route

import (
	"fmt"
	"net/http"
	"net/textproto"
	"strings"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"

	"github.com/legateproxy/legate/accesslog"
)

// AppendAction is HeaderValueOption.append_action.
type AppendAction uint8

// The append actions, with Envoy's names.
const (
	AppendIfExistsOrAdd AppendAction = iota
	AddIfAbsent
	OverwriteIfExistsOrAdd
	OverwriteIfExists
)

// HeaderAdd is one header to add, from a HeaderValueOption.
type HeaderAdd struct {
	// Key is the canonical MIME header name.
	Key string
	// Value is the literal value when Format is nil.
	Value string
	// Format is the compiled value when it holds %OPERATORS% (Envoy's header formatters).
	Format *accesslog.Formatter
	// Action is the append action (legacy append: true is AppendIfExistsOrAdd, false is
	// OverwriteIfExistsOrAdd).
	Action AppendAction
	// KeepEmptyValue adds the header even when its value formats to "".
	KeepEmptyValue bool
}

// HeaderOps are one level's request or response header mutations (route config, virtual host,
// route or weighted cluster): removals, then additions. Immutable.
type HeaderOps struct {
	Add    []HeaderAdd
	Remove []string // canonical MIME header names
}

// compileHeaderOps builds the ops of one level; field names the proto prefix
// ("request_headers" or "response_headers") and path the enclosing field path.
func compileHeaderOps(add []*corev3.HeaderValueOption, remove []string, path, field string, opts *Options) (*HeaderOps, error) {
	if len(add) == 0 && len(remove) == 0 {
		return nil, nil
	}
	ops := &HeaderOps{}
	for i, name := range remove {
		p := fmt.Sprintf("%s%s_to_remove[%d]", path, field, i)
		if name == "" || name[0] == ':' || strings.EqualFold(name, "host") {
			return nil, fmt.Errorf("%s = %q: pseudo-headers, host and empty names may not be removed", p, name)
		}
		ops.Remove = append(ops.Remove, textproto.CanonicalMIMEHeaderKey(name))
	}
	for i, o := range add {
		p := fmt.Sprintf("%s%s_to_add[%d]", path, field, i)
		h := o.GetHeader()
		if h.GetKey() == "" {
			return nil, fmt.Errorf("%s.header.key = \"\": must not be empty", p)
		}
		if h.GetKey()[0] == ':' || strings.EqualFold(h.GetKey(), "host") {
			return nil, fmt.Errorf("%s.header.key = %q: pseudo-headers and host may not be modified", p, h.GetKey())
		}
		value := h.GetValue()
		if h.GetRawValue() != nil {
			value = string(h.GetRawValue())
		}
		a := HeaderAdd{
			Key:            textproto.CanonicalMIMEHeaderKey(h.GetKey()),
			Value:          value,
			Action:         AppendAction(o.GetAppendAction()),
			KeepEmptyValue: o.GetKeepEmptyValue(),
		}
		if o.GetAppend() != nil {
			if o.GetAppendAction() != corev3.HeaderValueOption_APPEND_IF_EXISTS_OR_ADD {
				return nil, fmt.Errorf("%s: append and append_action are mutually exclusive", p)
			}
			if !o.GetAppend().GetValue() {
				a.Action = OverwriteIfExistsOrAdd
			}
		}
		if strings.IndexByte(value, '%') >= 0 {
			f, err := accesslog.ParseText(value, accesslog.Options{Hostname: opts.Hostname})
			if err != nil {
				return nil, fmt.Errorf("%s.header.value: %w", p, err)
			}
			a.Format = f
		}
		ops.Add = append(ops.Add, a)
	}
	return ops, nil
}

// apply mutates h: removals first, then additions in order. e feeds value formatters and may
// be nil when no value has operators (formatters then see an empty Entry).
func (ops *HeaderOps) apply(h http.Header, e *accesslog.Entry) {
	for _, k := range ops.Remove {
		delete(h, k)
	}
	for i := range ops.Add {
		a := &ops.Add[i]
		v := a.Value
		if a.Format != nil {
			if e == nil {
				e = &accesslog.Entry{}
			}
			v = string(a.Format.Format(nil, e))
		}
		if v == "" && !a.KeepEmptyValue {
			continue
		}
		_, exists := h[a.Key]
		switch a.Action {
		case AppendIfExistsOrAdd:
			h[a.Key] = append(h[a.Key], v)
		case AddIfAbsent:
			if !exists {
				h[a.Key] = []string{v}
			}
		case OverwriteIfExistsOrAdd:
			h[a.Key] = []string{v}
		case OverwriteIfExists:
			if exists {
				h[a.Key] = []string{v}
			}
		}
	}
}

// CompileHeaderOps compiles header additions and removals for an HTTP filter's header lists
// (response_headers_to_add and the like); path and field name them in errors as for route
// levels. nil means nothing to do.
func CompileHeaderOps(add []*corev3.HeaderValueOption, remove []string, path, field string) (*HeaderOps, error) {
	return compileHeaderOps(add, remove, path, field, &Options{})
}

// Apply mutates h as the ops say (removals, then additions); ops may be nil. Value formatters
// see an empty access-log entry.
func (ops *HeaderOps) Apply(h http.Header) { ops.ApplyEntry(h, nil) }

// ApplyEntry is Apply with value formatters reading e (nil: an empty entry).
func (ops *HeaderOps) ApplyEntry(h http.Header, e *accesslog.Entry) {
	if ops != nil {
		ops.apply(h, e)
	}
}
