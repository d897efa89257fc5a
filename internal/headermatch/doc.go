// Package headermatch compiles Envoy's string, regex and header matchers
// (envoy.type.matcher.v3.StringMatcher, RegexMatcher and
// envoy.config.route.v3.HeaderMatcher) once, for the route table and the
// access-log header_filter alike, so both apply them the same way.
//
// Concurrency: compiled matchers are immutable and safe for concurrent use.
// Matching does not allocate: the caller looks the header up (several values
// joined with ",", as Envoy's HeaderUtility does) and hands the value in.
package headermatch
