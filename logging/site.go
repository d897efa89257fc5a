package logging

import (
	"runtime"
	"strings"
)

// site is a resolved log call site. Sites are created once per program
// counter and never change.
type site struct {
	file string // module-relative source path, like Envoy's __FILE__
	line int
	fn   string
	// fileLog is the fine-grain logger of the file; nil unless fine-grain
	// logging is on.
	fileLog *fileLogger
}

// site returns the call site of pc, resolving and caching it on first use.
// Lookups read a copy-on-write map without a lock; call sites are finite, so
// the copies stop once every site has logged once.
func (r *Registry) site(pc uintptr) *site {
	if m := r.sites.Load(); m != nil {
		if s, ok := (*m)[pc]; ok {
			return s
		}
	}
	r.sitesMu.Lock()
	defer r.sitesMu.Unlock()
	old := r.sites.Load()
	if old != nil {
		if s, ok := (*old)[pc]; ok {
			return s
		}
	}
	frame, _ := runtime.CallersFrames([]uintptr{pc}).Next()
	s := &site{file: r.trimFile(frame.File), line: frame.Line, fn: shortFunc(frame.Function)}
	if r.fineGrain {
		s.fileLog = r.fileLogger(s.file)
	}
	next := make(map[uintptr]*site, len(mapOrEmpty(old))+1)
	for k, v := range mapOrEmpty(old) {
		next[k] = v
	}
	next[pc] = s
	r.sites.Store(&next)
	return s
}

func mapOrEmpty(m *map[uintptr]*site) map[uintptr]*site {
	if m == nil {
		return nil
	}
	return *m
}

// trimFile makes a source path relative to the module root, so that keys look
// like Envoy's "source/common/..." paths: "admin/logging.go".
func (r *Registry) trimFile(file string) string {
	if r.moduleRoot != "" && strings.HasPrefix(file, r.moduleRoot) {
		return file[len(r.moduleRoot):]
	}
	return file
}

// shortFunc drops the import path and package name from a function name:
// "github.com/x/admin.(*Server).handle" becomes "(*Server).handle".
func shortFunc(fn string) string {
	fn = fn[strings.LastIndexByte(fn, '/')+1:]
	if i := strings.IndexByte(fn, '.'); i >= 0 {
		return fn[i+1:]
	}
	return fn
}

// moduleRoot finds the directory that holds this package's directory, which
// is the module root (with -trimpath, the module path).
func moduleRoot() string {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return ""
	}
	dir := file[:strings.LastIndexByte(file, '/')+1] // ".../logging/"
	dir = strings.TrimSuffix(dir, "logging/")
	if dir == file[:strings.LastIndexByte(file, '/')+1] {
		return ""
	}
	return dir
}
