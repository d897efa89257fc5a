// Package logging implements Envoy's application logging: the fixed list of
// component loggers ("admin", "upstream", …) with their levels, the
// --log-level, --component-log-level, --log-format (spdlog pattern flags plus
// Envoy's %_ %j %* %+), --log-format-escaped and --log-path options, the
// bootstrap's application_log_config JSON format, fine-grain (per source
// file) loggers for --enable-fine-grain-logging, log reopening, and the
// POST /logging query core (HandleQuery).
//
// Concurrency: a Registry and its Loggers are safe for concurrent use. Levels
// are atomics, so a disabled log call costs one atomic load and allocates
// nothing. The compiled format is immutable after New. The output sink is
// guarded by one mutex held for a single Write per line. Fine-grain state
// (file loggers, glob updates, default level) is guarded by Registry.fineMu;
// call sites are resolved through a copy-on-write map read without a lock.
package logging
