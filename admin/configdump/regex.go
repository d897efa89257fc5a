package configdump

import (
	"errors"
	"net/http"
	"regexp"
	"regexp/syntax"
)

// compileNameRegex compiles name_regex for an RE2 full match of resource
// names. An empty expression matches every name.
func compileNameRegex(expr string) (func(string) bool, error) {
	if expr == "" {
		return func(string) bool { return true }, nil
	}
	// Check the expression alone first: anchoring it could turn an invalid
	// one such as "a)|(b" into a valid one.
	if _, err := regexp.Compile(expr); err != nil {
		return nil, &RequestError{
			Status: http.StatusBadRequest,
			Body:   "INVALID_ARGUMENT: Error while parsing name_regex from " + expr + ": " + re2ErrorText(err),
		}
	}
	re := regexp.MustCompile(`^(?:` + expr + `)$`)
	return re.MatchString, nil
}

// re2CodeText returns the wording of RE2's RegexpStatus::CodeText for Go's
// parse error code; Envoy's error body carries RE2's wording.
func re2CodeText(code syntax.ErrorCode) string {
	switch code {
	case syntax.ErrInternalError:
		return "unexpected error"
	case syntax.ErrInvalidCharClass:
		return "invalid character class"
	case syntax.ErrInvalidCharRange:
		return "invalid character class range"
	case syntax.ErrInvalidEscape:
		return "invalid escape sequence"
	case syntax.ErrInvalidNamedCapture:
		return "invalid named capture group"
	case syntax.ErrInvalidPerlOp:
		return "invalid perl operator"
	case syntax.ErrInvalidRepeatOp:
		return "bad repetition operator"
	case syntax.ErrInvalidRepeatSize:
		return "invalid repetition size"
	case syntax.ErrInvalidUTF8:
		return "invalid UTF-8"
	case syntax.ErrMissingBracket:
		return "missing ]"
	case syntax.ErrMissingParen:
		return "missing )"
	case syntax.ErrMissingRepeatArgument:
		return "no argument for repetition operator"
	case syntax.ErrTrailingBackslash:
		return "trailing \\"
	case syntax.ErrUnexpectedParen:
		return "unexpected )"
	case syntax.ErrNestingDepth, syntax.ErrLarge:
		return "pattern too large - compile failed"
	}
	return string(code)
}

// re2ErrorText renders a regexp error as RE2 does ("<code text>: <fragment>").
// The fragment Go reports is close to RE2's but not always identical.
func re2ErrorText(err error) string {
	var se *syntax.Error
	if !errors.As(err, &se) {
		return err.Error()
	}
	text := re2CodeText(se.Code)
	if se.Expr == "" {
		return text
	}
	return text + ": " + se.Expr
}
