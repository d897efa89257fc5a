package logging

import (
	"fmt"
	"runtime"
	"sync/atomic"
)

// Logger is one component logger (Envoy's Logger::Logger, e.g. "upstream").
// With fine-grain logging the component is ignored and each call logs through
// the logger of its source file instead, as Envoy's ENVOY_LOG does.
//
// A nil *Logger discards everything, so components can be built without
// logging in tests. Safe for concurrent use. A call below the logger's level
// costs an atomic load (plus a call-site lookup with fine-grain logging) and
// neither formats nor allocates.
type Logger struct {
	reg   *Registry
	name  string
	level atomic.Int32
}

// Name returns the component name.
func (l *Logger) Name() string {
	if l == nil {
		return ""
	}
	return l.name
}

// Level returns the component logger's level.
func (l *Logger) Level() Level {
	if l == nil {
		return Off
	}
	return Level(l.level.Load())
}

// Enabled reports whether a message at level would be written from the
// calling site.
func (l *Logger) Enabled(level Level) bool {
	if l == nil || level >= Off {
		return false
	}
	if !l.reg.fineGrain {
		return level >= Level(l.level.Load())
	}
	var pcs [1]uintptr
	if runtime.Callers(2, pcs[:]) == 0 {
		return false
	}
	s := l.reg.site(pcs[0])
	return level >= Level(s.fileLog.level.Load())
}

// Tracef logs at trace level.
func (l *Logger) Tracef(format string, args ...any) { l.logf(Trace, format, args) }

// Debugf logs at debug level.
func (l *Logger) Debugf(format string, args ...any) { l.logf(Debug, format, args) }

// Infof logs at info level.
func (l *Logger) Infof(format string, args ...any) { l.logf(Info, format, args) }

// Warnf logs at warning level.
func (l *Logger) Warnf(format string, args ...any) { l.logf(Warning, format, args) }

// Errorf logs at error level.
func (l *Logger) Errorf(format string, args ...any) { l.logf(Error, format, args) }

// Criticalf logs at critical level.
func (l *Logger) Criticalf(format string, args ...any) { l.logf(Critical, format, args) }

// Logf logs at the given level.
func (l *Logger) Logf(level Level, format string, args ...any) { l.logf(level, format, args) }

// logf must be called directly by the exported methods: it skips exactly
// three frames (Callers, logf, the exported method) to find the call site.
func (l *Logger) logf(level Level, format string, args []any) {
	if l == nil || level >= Off || level < Trace {
		return
	}
	fine := l.reg.fineGrain
	if !fine && level < Level(l.level.Load()) {
		return
	}
	var s *site
	if fine || l.reg.pattern.needsSource {
		var pcs [1]uintptr
		if runtime.Callers(3, pcs[:]) > 0 {
			s = l.reg.site(pcs[0])
		}
	}
	name := l.name
	if fine {
		if s == nil || level < Level(s.fileLog.level.Load()) {
			return
		}
		name = s.fileLog.key
	}
	msg := format
	if len(args) > 0 {
		msg = fmt.Sprintf(format, args...)
	}
	l.reg.emit(level, name, s, msg)
}
