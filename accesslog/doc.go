// Package accesslog implements Envoy's access-log format strings (the substitution formatter:
// %START_TIME%, %REQ(X?Y):Z%, %RESPONSE_CODE%, …), text and JSON output, and the file sink of
// envoy.access_loggers.file.
//
// A format string is parsed once into a Formatter, which is immutable and safe for concurrent
// use; Format appends one log line for an Entry to a caller-owned buffer and allocates only when
// that buffer grows. An Entry is a plain struct filled by the proxy for one request and read,
// never kept, by Format. A File is a buffered, reopenable log file safe for concurrent writers;
// its flush goroutine is started by OpenFile and stopped by Close. A Manager shares one File
// per path and reopens them all (admin /reopen_logs).
package accesslog
