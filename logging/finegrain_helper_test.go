package logging

// helperLog logs from a second source file, so fine-grain tests see two
// file loggers.
func helperLog(l *Logger, msg string) { l.Debugf("%s", msg) }

// helperEnabled asks Enabled from this file.
func helperEnabled(l *Logger, level Level) bool { return l.Enabled(level) }
