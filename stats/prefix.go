package stats

import "strings"

// PrefixJoin joins a configured stat prefix and a name as Envoy's statPrefixJoin does: with a
// dot, unless the prefix is empty or already ends with one. Filters whose stat_prefix users
// write either as "name" or as "name." get the same stats.
func PrefixJoin(prefix, name string) string {
	switch {
	case prefix == "":
		return name
	case strings.HasSuffix(prefix, "."):
		return prefix + name
	}
	return prefix + "." + name
}
