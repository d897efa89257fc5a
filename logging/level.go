package logging

import (
	"fmt"
)

// Level is a log severity, in spdlog's order. A logger emits a message when
// the message's level is at or above the logger's level; Off emits nothing.
type Level int32

// The spdlog levels Envoy uses, lowest first.
const (
	Trace Level = iota
	Debug
	Info
	Warning
	Error
	Critical
	Off
)

// levelNames are spdlog's level_string_views, indexed by Level. They are the
// names /logging accepts and prints.
var levelNames = [...]string{"trace", "debug", "info", "warning", "error", "critical", "off"}

// shortLevelNames are spdlog's short level names (%L).
var shortLevelNames = [...]string{"T", "D", "I", "W", "E", "C", "O"}

// String returns the level's spdlog name ("warning", not "warn").
func (l Level) String() string {
	if l < Trace || l > Off {
		return fmt.Sprintf("level(%d)", int32(l))
	}
	return levelNames[l]
}

// short returns the one-letter level name used by %L.
func (l Level) short() string {
	if l < Trace || l > Off {
		return "?"
	}
	return shortLevelNames[l]
}

// ParseLevel parses a command-line level name (-l/--log-level and
// --component-log-level): the spdlog names plus Envoy's alias "warn" for
// "warning". Names are case-sensitive, as in Envoy.
func ParseLevel(s string) (Level, error) {
	if s == "warn" {
		return Warning, nil
	}
	if l, ok := parseStrictLevel(s); ok {
		return l, nil
	}
	return 0, fmt.Errorf("log level %q is not valid; must be one of trace, debug, info, warning (or warn), error, critical, off", s)
}

// parseStrictLevel accepts only spdlog's level_string_views, as /logging does.
func parseStrictLevel(s string) (Level, bool) {
	for i, n := range levelNames {
		if n == s {
			return Level(i), true
		}
	}
	return 0, false
}
