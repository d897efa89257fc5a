// Package options parses the legate command line, which is Envoy's command line: the same
// option spellings (including the -c and -l short forms), defaults and validation rules, so a
// command that starts Envoy starts Legate unchanged. It also builds the
// envoy.admin.v3.CommandLineOptions message shown under "command_line_options" by the
// /server_info admin endpoint.
//
// Concurrency: Parse and Usage are pure functions of their arguments (and, for the default
// --concurrency, of the CPU count) and may be called from any goroutine. An *Options is a plain
// value: it is safe for concurrent reads once Parse has returned, and nothing in this package
// changes it afterwards.
package options
