package tags

import (
	"regexp"
	"regexp/syntax"
	"strings"
	"unicode/utf8"

	"github.com/dlclark/regexp2"
)

// kind says how an Extractor matches.
type kind uint8

const (
	// kindRE2 is one of Envoy's default regexes (TagExtractorRe2Impl): the
	// regex needs two capture groups; an empty group 1 is no match; an empty
	// group 2 means the value is group 1; a value equal to the negative value
	// is no match.
	kindRE2 kind = iota
	// kindCustomRegex is a stats_config.stats_tags regex. Envoy compiles these
	// as std::regex (TagExtractorStdRegexImpl): one capture group is enough;
	// the tag is added whatever the groups hold, its value is group 2 when the
	// regex has two or more groups (even if group 2 is empty) and group 1
	// otherwise. Legate compiles the expression with Go's RE2 engine when it
	// can, and with regexp2's ECMAScript mode otherwise (compileCustom).
	kindCustomRegex
	// kindTokens is a dot-separated token pattern (TagExtractorTokensImpl).
	kindTokens
	// kindFixed always matches, adds a constant tag and removes nothing
	// (TagExtractorFixedImpl).
	kindFixed
)

// Extractor is one named tag extractor: one of Envoy's default regex or
// tokenized extractors, a stats_config.stats_tags entry, or a fixed tag.
// It runs only when its hints allow: its prefix token must equal the stat
// name's first dot-separated token (an empty prefix runs on every name), and
// a regex extractor also needs its substring hint (Envoy's "substr") to occur
// in the name. Extractors are created by New and immutable; they are safe for
// concurrent use.
type Extractor struct {
	name   string
	kind   kind
	prefix string // first-token hint; "" runs on every name

	// Regex kinds.
	re       *regexp.Regexp
	ecma     *regexp2.Regexp                                       // a custom regex RE2 cannot compile (lookahead); re is nil
	fast     func(name string) (value string, lo, hi int, ok bool) // replaces re when set
	window   int                                                   // >0: the result depends only on the name's last window bytes
	groups   int                                                   // number of capture groups in re
	substr   string                                                // Envoy's hint: the name must contain it
	negative string                                                // kindRE2: a value equal to this is no match
	// Derived from re; purely a fast rejection, never changes a result.
	mustStart   string // a match needs the name to start with this
	mustContain string // a match needs the name to contain this

	// kindTokens.
	pattern []string
	dollar  int // index of "$" in pattern

	// kindFixed.
	value string

	// shared is set when another extractor of the same Producer has the same
	// tag name; only the first of them that matches a name contributes a tag.
	shared bool
}

// Name returns the tag name the extractor produces.
func (e *Extractor) Name() string { return e.name }

// Prefix returns the first dot-separated token a stat name needs for the
// extractor to run, or "" when it runs on every name.
func (e *Extractor) Prefix() string { return e.prefix }

func newRE2Extractor(d regexDescriptor) *Extractor {
	e := &Extractor{
		name:     d.name,
		kind:     kindRE2,
		prefix:   regexPrefix(d.re.String()),
		re:       d.re,
		fast:     d.fast,
		window:   d.window,
		groups:   d.re.NumSubexp(),
		substr:   d.substr,
		negative: d.negative,
	}
	e.mustStart, e.mustContain = requiredLiterals(d.re.String())
	if strings.Contains(e.substr, e.mustContain) {
		// The hint already implies the derived literal (".ssl.curves."
		// holds ".ssl.curves"); one scan of the name is enough.
		e.mustContain = ""
	}
	return e
}

// newCustomExtractor builds a stats_config.stats_tags regex extractor from one of re and
// ecma (compileCustom's results).
func newCustomExtractor(name, expr string, re *regexp.Regexp, ecma *regexp2.Regexp) *Extractor {
	e := &Extractor{
		name:   name,
		kind:   kindCustomRegex,
		prefix: regexPrefix(expr),
		re:     re,
		ecma:   ecma,
	}
	if ecma != nil {
		e.groups = len(ecma.GetGroupNumbers()) - 1 // group 0 is the whole match
		return e
	}
	e.groups = re.NumSubexp()
	e.mustStart, e.mustContain = requiredLiterals(expr)
	return e
}

// compileCustom compiles a stats_config.stats_tags regex. Envoy uses std::regex, whose
// ECMAScript grammar has lookahead (Istio's bootstraps use `(?=\.)`) that RE2 lacks. Go's
// RE2 engine is tried first: for the expressions both accept, its leftmost-first matching
// picks the same submatches as a backtracking ECMAScript engine, in linear time. The others
// go to regexp2 in ECMAScript mode.
func compileCustom(expr string) (*regexp.Regexp, *regexp2.Regexp, error) {
	if re, err := regexp.Compile(expr); err == nil {
		return re, nil, nil
	}
	ecma, err := regexp2.Compile(posixClasses(expr), regexp2.ECMAScript)
	if err != nil {
		return nil, nil, err
	}
	return nil, ecma, nil
}

// posixBracketClass maps the character class names std::regex accepts inside brackets
// ("[[:digit:]]") to ranges, which regexp2 would otherwise read as the characters of the name.
var posixBracketClass = map[string]string{
	"alnum": "a-zA-Z0-9", "alpha": "a-zA-Z", "blank": ` \t`, "cntrl": `\x00-\x1f\x7f`,
	"digit": "0-9", "d": "0-9", "graph": `\x21-\x7e`, "lower": "a-z", "print": `\x20-\x7e`,
	"punct": `!-/:-@\[-` + "`" + `{-~`, "space": `\s`, "s": `\s`, "upper": "A-Z", "w": `\w`,
	"xdigit": "0-9A-Fa-f",
}

// posixClasses rewrites the [:name:] classes inside the bracket expressions of expr.
func posixClasses(expr string) string {
	var b strings.Builder
	inBracket := false
	for i := 0; i < len(expr); i++ {
		c := expr[i]
		switch {
		case c == '\\' && i+1 < len(expr):
			b.WriteString(expr[i : i+2])
			i++
			continue
		case !inBracket && c == '[':
			inBracket = true
		case inBracket && c == ']':
			inBracket = false
		case inBracket && strings.HasPrefix(expr[i:], "[:"):
			if end := strings.Index(expr[i+2:], ":]"); end >= 0 {
				if ranges, ok := posixBracketClass[expr[i+2:i+2+end]]; ok {
					b.WriteString(ranges)
					i += end + 3
					continue
				}
			}
		}
		b.WriteByte(c)
	}
	return b.String()
}

func newTokenExtractor(d tokenDescriptor) *Extractor {
	pattern := strings.Split(d.pattern, ".")
	e := &Extractor{name: d.name, kind: kindTokens, pattern: pattern}
	for i, t := range pattern {
		if t == "$" {
			e.dollar = i
			break
		}
	}
	if first := pattern[0]; first != "$" && first != "*" && first != "**" {
		e.prefix = first
	}
	return e
}

// newFixedExtractor builds a constant tag. Envoy derives the prefix hint of a
// fixed tag from its value as if the value were a regex, so a value such as
// `^foo\.x` limits the tag to names starting with "foo."; that quirk is kept.
func newFixedExtractor(name, value string) *Extractor {
	return &Extractor{name: name, kind: kindFixed, value: value, prefix: regexPrefix(value)}
}

// regexPrefix returns the literal first token a regex requires, following
// Envoy's rule: after a leading '^', the run of [A-Za-z0-9_] characters
// (at least one) counts when it is followed by `\.` or `(?=\.)`, or by a '$'
// that ends the regex.
func regexPrefix(expr string) string {
	if !strings.HasPrefix(expr, "^") {
		return ""
	}
	i := 1
	for i < len(expr) && isWordByte(expr[i]) {
		i++
	}
	if i == 1 || i == len(expr) {
		return ""
	}
	rest := expr[i:]
	if i == len(expr)-1 {
		if rest == "$" {
			return expr[1:i]
		}
		return ""
	}
	if strings.HasPrefix(rest, `\.`) || strings.HasPrefix(rest, `(?=\.)`) {
		return expr[1:i]
	}
	return ""
}

func isWordByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_'
}

// requiredLiterals finds literal text every match of expr must contain: the
// literal right after a leading `^` (start) and the longest literal among the
// top-level concatenation and the capture groups in it (contain). They let
// Extract skip the regex engine for most names.
func requiredLiterals(expr string) (start, contain string) {
	re, err := syntax.Parse(expr, syntax.Perl)
	if err != nil {
		return "", ""
	}
	parts := []*syntax.Regexp{re}
	if re.Op == syntax.OpConcat {
		parts = re.Sub
	}
	if len(parts) >= 2 && parts[0].Op == syntax.OpBeginText {
		start = plainLiteral(parts[1])
	}
	var walk func(parts []*syntax.Regexp)
	walk = func(parts []*syntax.Regexp) {
		for _, p := range parts {
			switch {
			case p.Op == syntax.OpCapture && p.Sub[0].Op == syntax.OpConcat:
				walk(p.Sub[0].Sub)
			case p.Op == syntax.OpCapture:
				walk(p.Sub)
			default:
				if lit := plainLiteral(p); len(lit) > len(contain) {
					contain = lit
				}
			}
		}
	}
	walk(parts)
	return start, contain
}

// plainLiteral returns the text of a case-sensitive literal node, or "".
// Literals holding U+FFFD are refused: the regex engine matches them against
// invalid UTF-8 bytes, which a plain substring test would not.
func plainLiteral(re *syntax.Regexp) string {
	if re.Op != syntax.OpLiteral || re.Flags&syntax.FoldCase != 0 {
		return ""
	}
	for _, r := range re.Rune {
		if r == utf8.RuneError {
			return ""
		}
	}
	return string(re.Rune)
}

// span is the byte range [lo, hi) of one dot-separated token of a name.
type span struct{ lo, hi int }

// splitTokens appends the tokens of name to buf. Like absl::StrSplit, n dots
// give n+1 tokens, empty ones included.
func splitTokens(name string, buf []span) []span {
	lo := 0
	for i := 0; i < len(name); i++ {
		if name[i] == '.' {
			buf = append(buf, span{lo, i})
			lo = i + 1
		}
	}
	return append(buf, span{lo, len(name)})
}

// matchRegex runs a regex extractor against name and returns the tag value
// and the byte range to remove (lo == hi removes nothing).
func (e *Extractor) matchRegex(name string) (value string, lo, hi int, ok bool) {
	if e.substr != "" && !strings.Contains(name, e.substr) ||
		e.mustStart != "" && !strings.HasPrefix(name, e.mustStart) ||
		e.mustContain != "" && !strings.Contains(name, e.mustContain) {
		return "", 0, 0, false
	}
	if e.fast != nil {
		return e.fast(name)
	}
	if (e.kind == kindRE2 && e.groups < 2) || e.groups < 1 {
		return "", 0, 0, false
	}
	if e.ecma != nil {
		return e.matchECMA(name)
	}
	// FindStringSubmatchIndex allocates only when it matches.
	m := e.re.FindStringSubmatchIndex(name)
	if m == nil {
		return "", 0, 0, false
	}
	g1lo, g1hi := m[2], m[3]
	if e.kind == kindCustomRegex {
		if g1lo < 0 {
			g1lo, g1hi = 0, 0
		}
		if e.groups >= 2 {
			if m[4] >= 0 {
				value = name[m[4]:m[5]]
			}
		} else {
			value = name[g1lo:g1hi]
		}
		return value, g1lo, g1hi, true
	}
	if g1lo < 0 || g1lo == g1hi {
		return "", 0, 0, false
	}
	value = name[g1lo:g1hi]
	if m[4] >= 0 && m[4] < m[5] {
		value = name[m[4]:m[5]]
	}
	if e.negative != "" && value == e.negative {
		return "", 0, 0, false
	}
	return value, g1lo, g1hi, true
}

// matchECMA is matchRegex's custom-regex rule run by regexp2.
func (e *Extractor) matchECMA(name string) (value string, lo, hi int, ok bool) {
	m, err := e.ecma.FindStringMatch(name)
	if err != nil || m == nil {
		return "", 0, 0, false
	}
	lo, hi, _ = groupBytes(name, m.GroupByNumber(1))
	if e.groups >= 2 {
		if vlo, vhi, matched := groupBytes(name, m.GroupByNumber(2)); matched {
			value = name[vlo:vhi]
		}
	} else {
		value = name[lo:hi]
	}
	return value, lo, hi, true
}

// groupBytes returns the byte range of a regexp2 group (whose positions count runes), and
// whether it took part in the match.
func groupBytes(name string, g *regexp2.Group) (lo, hi int, matched bool) {
	if g == nil || len(g.Captures) == 0 {
		return 0, 0, false
	}
	return runeOffset(name, g.Index), runeOffset(name, g.Index+g.Length), true
}

// runeOffset is the byte offset of the n-th rune of s.
func runeOffset(s string, n int) int {
	for i := range s {
		if n == 0 {
			return i
		}
		n--
	}
	return len(s)
}

// matchTokens runs a tokenized extractor against the tokens of name. The
// "$" token is the value; it is removed with the dot after it, or with the
// dot before it when it is the last token.
func (e *Extractor) matchTokens(name string, toks []span) (value string, lo, hi int, ok bool) {
	at, ok := e.searchTokens(name, toks, 0, 0)
	if !ok || at < 0 {
		return "", 0, 0, false
	}
	t := toks[at]
	lo, hi = t.lo, t.hi
	if at < len(toks)-1 {
		hi++
	} else if lo > 0 {
		lo--
	}
	return name[t.lo:t.hi], lo, hi, true
}

// searchTokens reports whether pattern[pi:] matches toks[ti:], and the index
// of the token matched by "$". "*" and "$" match one token. "**" at the end
// of the pattern matches one or more tokens; elsewhere it matches zero or
// more, trying the shortest run first.
func (e *Extractor) searchTokens(name string, toks []span, ti, pi int) (int, bool) {
	at := -1
	for ; ti < len(toks) && pi < len(e.pattern); ti, pi = ti+1, pi+1 {
		if pi == e.dollar {
			at = ti
			continue
		}
		want := e.pattern[pi]
		if want == "**" {
			if pi == len(e.pattern)-1 {
				return at, true
			}
			for ; ti < len(toks); ti++ {
				if sub, ok := e.searchTokens(name, toks, ti, pi+1); ok {
					if sub < 0 {
						sub = at
					}
					return sub, true
				}
			}
			return -1, false
		}
		if want != "*" && want != name[toks[ti].lo:toks[ti].hi] {
			return -1, false
		}
	}
	return at, pi == len(e.pattern) && ti == len(toks)
}
