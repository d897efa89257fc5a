// Package matcher is Envoy's unified matcher API (xds.type.matcher.v3.Matcher) for any data:
// Compile checks a Matcher against a Domain (the registry kind of the inputs the data offers
// and the consumer's compiler of actions) and Match evaluates it.
//
// Implemented: matcher_list with single predicates (value_match: exact, prefix, suffix,
// contains, safe_regex, ignore_case), or_matcher, and_matcher and not_matcher; matcher_tree
// with exact_match_map, prefix_match_map (longest prefix first, falling back to shorter ones
// when a nested matcher does not match) and the IP range custom matcher
// (envoy.matching.custom_matchers.ip_range_matcher: longest range first, exclusive ranges);
// nested matchers; on_no_match at every level. Inputs are found by their typed_config type
// in the registry (internal/matcher/network registers the network ones).
//
// Refused with their field path and "not implemented by Legate": keep_matching, custom
// matchers in a single predicate, custom string matchers, inputs and actions the consumer
// does not know.
//
// Concurrency: a compiled Matcher is immutable; Match is safe for concurrent use and takes
// no lock.
package matcher
