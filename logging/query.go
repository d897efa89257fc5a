package logging

import (
	"errors"
	"net/http"
	"strings"
)

// The /logging errors, worded as Envoy words them.
var (
	errParamCount  = errors.New("invalid number of parameters")
	errLevel       = errors.New("unknown logger level")
	errEmptyNameOr = errors.New("empty logger name or empty logger level")
	errLoggerName  = errors.New("unknown logger name")
)

const loggingUsage = "usage: /logging?<name>=<level> (change single level)\n" +
	"usage: /logging?paths=name1:level1,name2:level2,... (change multiple levels)\n" +
	"usage: /logging?level=<level> (change all levels)\n" +
	"levels: trace debug info warning error critical off \n"

// HandleQuery is the core of POST /logging: it applies params (the query, or
// the form body when there is no query) exactly as Envoy does and returns the
// response body and status. On error nothing is changed, the status is 400
// and the body is the error and usage text followed by the logger list.
//
// Forms: no parameters (list only); level=<level> (every logger, and the
// fine-grain default); <name>=<level>; paths=<name>:<level>,… With
// fine-grain logging, names are file paths, base names or globs, the first
// matching entry wins and each update replaces the previous one.
func (r *Registry) HandleQuery(params map[string][]string) (body string, status int) {
	var b strings.Builder
	status = http.StatusOK
	if err := r.changeLevels(params); err != nil {
		status = http.StatusBadRequest
		b.WriteString("error: ")
		b.WriteString(err.Error())
		b.WriteString("\n\n")
		b.WriteString(loggingUsage)
	}
	b.WriteString("active loggers:\n")
	if r.fineGrain {
		b.WriteString(strings.Join(r.fileLoggerLines(), "\n"))
		b.WriteString("\n")
		return b.String(), status
	}
	for _, l := range r.loggers {
		b.WriteString("  ")
		b.WriteString(l.name)
		b.WriteString(": ")
		b.WriteString(l.Level().String())
		b.WriteString("\n")
	}
	b.WriteString("\n")
	return b.String(), status
}

func firstValue(params map[string][]string, key string) (string, bool) {
	vs, ok := params[key]
	if !ok {
		return "", false
	}
	if len(vs) == 0 {
		return "", true
	}
	return vs[0], true
}

// changeLevels validates everything before it changes anything.
func (r *Registry) changeLevels(params map[string][]string) error {
	// HTML forms send level and paths even when empty: empty ones are dropped.
	level, hasLevel := firstValue(params, "level")
	hasLevel = hasLevel && level != ""
	paths, hasPaths := firstValue(params, "paths")
	hasPaths = hasPaths && paths != ""
	keys := 0
	var single string
	for k := range params {
		if (k == "level" && !hasLevel) || (k == "paths" && !hasPaths) {
			continue
		}
		keys++
		single = k
	}
	if keys == 0 {
		return nil
	}
	if keys != 1 {
		return errParamCount
	}
	admin := r.byName["admin"]
	if hasLevel {
		l, ok := parseStrictLevel(level)
		if !ok {
			return errLevel
		}
		if r.fineGrain {
			admin.Infof("change all log levels and default verbosity level for fine grain loggers: level='%s'", l)
			r.setFineGrainDefault(l)
			return nil
		}
		admin.Infof("change all log levels: level='%s'", l)
		for _, lg := range r.loggers {
			lg.level.Store(int32(l))
		}
		return nil
	}
	var updates []globUpdate
	if hasPaths {
		for _, piece := range strings.Split(paths, ",") {
			if isBlank(piece) {
				continue
			}
			name, lvl := splitNameLevel(piece)
			if name == "" || lvl == "" {
				return errEmptyNameOr
			}
			l, ok := parseStrictLevel(lvl)
			if !ok {
				return errLevel
			}
			updates = append(updates, globUpdate{pattern: name, level: l})
		}
	} else {
		value, _ := firstValue(params, single)
		l, ok := parseStrictLevel(value)
		if !ok {
			return errLevel
		}
		updates = append(updates, globUpdate{pattern: single, level: l})
	}
	if r.fineGrain {
		for _, u := range updates {
			admin.Infof("adding fine-grain log update, glob='%s' level='%s'", u.pattern, u.level)
		}
		r.setGlobUpdates(updates)
		return nil
	}
	// Component loggers: a later entry for the same name wins; any unknown
	// name rejects the whole request.
	changes := make(map[string]Level, len(updates))
	for _, u := range updates {
		if _, ok := r.byName[u.pattern]; !ok {
			return errLoggerName
		}
		changes[u.pattern] = u.level
	}
	for _, lg := range r.loggers {
		if l, ok := changes[lg.name]; ok {
			admin.Infof("change log level: name='%s' level='%s'", lg.name, l)
			lg.level.Store(int32(l))
		}
	}
	return nil
}

// splitNameLevel splits "name:level" at the first ':' the way Envoy's
// StrSplit(MaxSplits(':', 1), SkipWhitespace) does: pieces that are empty or
// all white space are skipped, so ":info" yields ("info", "").
func splitNameLevel(piece string) (name, level string) {
	var parts []string
	if i := strings.IndexByte(piece, ':'); i >= 0 {
		parts = []string{piece[:i], piece[i+1:]}
	} else {
		parts = []string{piece}
	}
	var kept []string
	for _, p := range parts {
		if !isBlank(p) {
			kept = append(kept, p)
		}
	}
	switch len(kept) {
	case 0:
		return "", ""
	case 1:
		return kept[0], ""
	}
	return kept[0], kept[1]
}

// isBlank is absl::SkipWhitespace's test: empty or only ASCII white space.
func isBlank(s string) bool {
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case ' ', '\t', '\n', '\v', '\f', '\r':
		default:
			return false
		}
	}
	return true
}
