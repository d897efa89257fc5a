package logging

import (
	"sort"
	"strings"
	"sync/atomic"
)

// fileLogger is a fine-grain logger: one per source file that has logged,
// named by the file's module-relative path (Envoy's FINE_GRAIN_LOG loggers,
// keyed by __FILE__). Created on a site's first log call, whatever its level.
type fileLogger struct {
	key   string
	level atomic.Int32
}

// globUpdate is one entry of the last /logging glob update (Envoy's
// VerbosityLogUpdateInfo).
type globUpdate struct {
	pattern string
	isPath  bool // the pattern holds a '/': match the whole path
	level   Level
}

// fileLogger returns the logger for key, creating it at the level the
// current default and glob updates give it.
func (r *Registry) fileLogger(key string) *fileLogger {
	r.fineMu.Lock()
	defer r.fineMu.Unlock()
	if fl, ok := r.files[key]; ok {
		return fl
	}
	fl := &fileLogger{key: key}
	fl.level.Store(int32(r.levelForLocked(key)))
	r.files[key] = fl
	return fl
}

// levelForLocked returns the level of the first glob update matching file,
// or the default level. A pattern with a '/' is matched against the whole
// path, with or without its extensions; any other pattern against the base
// name, with or without its extensions ("logging" and "logging.go" both match
// "admin/logging.go"). Envoy matches only the extension-less stem; accepting
// the full name as well is a superset. Requires fineMu.
func (r *Registry) levelForLocked(file string) Level {
	if len(r.updates) == 0 {
		return r.defaultLevel
	}
	base := file[strings.LastIndexByte(file, '/')+1:]
	stemBase, stem := base, file
	if i := strings.IndexByte(base, '.'); i >= 0 {
		stemBase = base[:i]
		stem = file[:len(file)-len(base)+i]
	}
	for _, u := range r.updates {
		if u.isPath {
			if globMatch(u.pattern, stem) || globMatch(u.pattern, file) {
				return u.level
			}
		} else if globMatch(u.pattern, stemBase) || globMatch(u.pattern, base) {
			return u.level
		}
	}
	return r.defaultLevel
}

// setGlobUpdates replaces the glob updates (each /logging update replaces
// the previous one) and re-levels every file logger: loggers no pattern
// matches go back to the default level (spec rule 5). A pattern already
// matched by an earlier pattern of the same update is dropped, since the
// first match wins and it could never apply.
func (r *Registry) setGlobUpdates(updates []globUpdate) {
	r.fineMu.Lock()
	defer r.fineMu.Unlock()
	r.updates = r.updates[:0]
next:
	for _, u := range updates {
		for _, have := range r.updates {
			if globMatch(have.pattern, u.pattern) {
				continue next
			}
		}
		u.isPath = strings.IndexByte(u.pattern, '/') >= 0
		r.updates = append(r.updates, u)
	}
	for key, fl := range r.files {
		fl.level.Store(int32(r.levelForLocked(key)))
	}
}

// setFineGrainDefault makes level the default and the level of every file
// logger, dropping earlier glob updates (/logging?level=).
func (r *Registry) setFineGrainDefault(level Level) {
	r.fineMu.Lock()
	defer r.fineMu.Unlock()
	r.defaultLevel = level
	r.updates = r.updates[:0]
	for _, fl := range r.files {
		fl.level.Store(int32(level))
	}
}

// fileLoggerLines returns "  <file>: <level>" for every file logger, sorted
// by file (Envoy's order is its hash map's).
func (r *Registry) fileLoggerLines() []string {
	r.fineMu.Lock()
	defer r.fineMu.Unlock()
	lines := make([]string, 0, len(r.files))
	for key, fl := range r.files {
		lines = append(lines, "  "+key+": "+Level(fl.level.Load()).String())
	}
	sort.Strings(lines)
	return lines
}

// globMatch reports whether s matches pattern, where '*' matches any run of
// bytes (including '/') and '?' any one byte; everything else is literal.
// It is Envoy's safeFileNameMatch, written iteratively so that no pattern can
// make it take exponential time.
func globMatch(pattern, s string) bool {
	p, i := 0, 0
	starP, starI := -1, 0
	for i < len(s) {
		switch {
		case p < len(pattern) && pattern[p] == '*':
			starP, starI = p, i
			p++
		case p < len(pattern) && (pattern[p] == '?' || pattern[p] == s[i]):
			p++
			i++
		case starP >= 0:
			p = starP + 1
			starI++
			i = starI
		default:
			return false
		}
	}
	for p < len(pattern) && pattern[p] == '*' {
		p++
	}
	return p == len(pattern)
}
