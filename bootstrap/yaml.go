package bootstrap

import (
	"encoding/json"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"

	yaml "go.yaml.in/yaml/v3"
)

// Envoy reads YAML with yaml-cpp and turns the document into a google.protobuf.Value before
// protobuf's JSON parser sees it (source/common/protobuf/yaml_utility.cc). yamlTree does the
// same on a yaml.v3 node tree, so that Legate accepts and refuses the same files:
//   - a key repeated in one mapping: the last value wins;
//   - a key tagged !ignore is dropped with its value (anchors for later aliases live there);
//   - `<<` is an ordinary key, as yaml-cpp has no merge keys (the walk then refuses it as
//     an unknown field);
//   - a quoted or block scalar is a string; a plain scalar is tried as a yaml-cpp bool, then
//     as an integer (32-bit values as numbers, wider ones as decimal strings, which protobuf
//     accepts for 64-bit fields), then as a floating-point number, else it is a string.

// maxAliasExpansions bounds the nodes aliases may expand to, so that a small file of nested
// aliases (a "billion laughs") cannot exhaust memory.
const maxAliasExpansions = 1 << 20

func yamlTree(data []byte) (any, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("invalid YAML: %s", strings.ReplaceAll(err.Error(), "\n  ", " "))
	}
	if doc.Kind == 0 {
		return nil, nil // an empty document
	}
	c := &yamlConverter{}
	tree, err := c.value(&doc, "", 0)
	if err != nil {
		return nil, err
	}
	if _, ok := tree.(map[string]any); !ok && tree != nil {
		return nil, fmt.Errorf("YAML got %s at the top level; want an object", describe(tree))
	}
	return tree, nil
}

type yamlConverter struct {
	expanded int // nodes reached through aliases so far
}

func (c *yamlConverter) value(n *yaml.Node, path string, depth int) (any, error) {
	if depth > maxDepth {
		return nil, &FieldError{Path: path, Rule: fmt.Sprintf("nested more than %d levels deep", maxDepth)}
	}
	switch n.Kind {
	case yaml.DocumentNode:
		if len(n.Content) == 0 {
			return nil, nil
		}
		return c.value(n.Content[0], path, depth)
	case yaml.AliasNode:
		if c.expanded++; c.expanded > maxAliasExpansions {
			return nil, &FieldError{Path: path, Rule: fmt.Sprintf("aliases expand to more than %d values", maxAliasExpansions)}
		}
		return c.value(n.Alias, path, depth+1)
	case yaml.SequenceNode:
		list := make([]any, 0, len(n.Content))
		for i, e := range n.Content {
			v, err := c.value(e, fmt.Sprintf("%s[%d]", path, i), depth+1)
			if err != nil {
				return nil, err
			}
			list = append(list, v)
		}
		return list, nil
	case yaml.MappingNode:
		return c.mapping(n, path, depth)
	case yaml.ScalarNode:
		return yamlScalar(n), nil
	}
	return nil, &FieldError{Path: path, Rule: "undefined YAML value"}
}

func (c *yamlConverter) mapping(n *yaml.Node, path string, depth int) (any, error) {
	obj := make(map[string]any, len(n.Content)/2)
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if k.Kind == yaml.AliasNode {
			k = k.Alias
		}
		if k.Tag == "!ignore" {
			continue
		}
		if k.Kind != yaml.ScalarNode || isYAMLNull(k) {
			return nil, &FieldError{Path: path, Rule: fmt.Sprintf("line %d: a mapping key must be a string", k.Line)}
		}
		val, err := c.value(v, joinPath(path, k.Value), depth+1)
		if err != nil {
			return nil, err
		}
		obj[k.Value] = val // a repeated key: the last one wins, as in yaml-cpp
	}
	return obj, nil
}

// yamlScalar converts a scalar as Envoy's parseYamlNode does.
func yamlScalar(n *yaml.Node) any {
	if n.Style&(yaml.DoubleQuotedStyle|yaml.SingleQuotedStyle|yaml.LiteralStyle|yaml.FoldedStyle) != 0 {
		return n.Value
	}
	if isYAMLNull(n) {
		return nil
	}
	s := n.Value
	if b, ok := yamlBool(s); ok {
		return b
	}
	if i, ok := yamlInt(s); ok {
		if i >= math.MinInt32 && i <= math.MaxInt32 {
			return json.Number(strconv.FormatInt(i, 10))
		}
		return strconv.FormatInt(i, 10)
	}
	if f, ok := yamlFloat(s); ok {
		switch {
		case math.IsNaN(f):
			return "NaN"
		case math.IsInf(f, 1):
			return "Infinity"
		case math.IsInf(f, -1):
			return "-Infinity"
		}
		return json.Number(strconv.FormatFloat(f, 'g', -1, 64))
	}
	return s
}

// isYAMLNull reports whether a plain scalar is YAML's null (yaml-cpp: "~", "null", "Null",
// "NULL" or nothing at all).
func isYAMLNull(n *yaml.Node) bool {
	if n.Style != 0 && n.Style != yaml.TaggedStyle && n.Style != yaml.FlowStyle {
		return false
	}
	switch n.Value {
	case "", "~", "null", "Null", "NULL":
		return n.Tag != "!!str"
	}
	return false
}

// yamlBool is yaml-cpp's convert<bool>: y/n, yes/no, true/false, on/off, in lower case,
// upper case or capitalised.
func yamlBool(s string) (value, ok bool) {
	if s == "" || (s != strings.ToLower(s) && s != strings.ToUpper(s) && s != strings.ToUpper(s[:1])+strings.ToLower(s[1:])) {
		return false, false
	}
	switch strings.ToLower(s) {
	case "y", "yes", "true", "on":
		return true, true
	case "n", "no", "false", "off":
		return false, true
	}
	return false, false
}

// yamlInt is yaml-cpp's convert<int64_t>, a C++ stream read with the base taken from the
// prefix: 0x hexadecimal, a leading 0 octal, else decimal; an optional sign; trailing
// whitespace allowed.
func yamlInt(s string) (int64, bool) {
	s = strings.TrimRight(s, " \t\n\r\f\v")
	body := strings.TrimLeft(s, "+-")
	if len(s)-len(body) > 1 || body == "" {
		return 0, false
	}
	base := 10
	switch {
	case len(body) > 2 && (body[:2] == "0x" || body[:2] == "0X"):
		base, body = 16, body[2:]
	case len(body) > 1 && body[0] == '0':
		base, body = 8, body[1:]
	}
	if strings.ContainsAny(body, "+-_") {
		return 0, false
	}
	u, err := strconv.ParseUint(body, base, 64)
	if err != nil {
		return 0, false
	}
	if strings.HasPrefix(s, "-") {
		if u > 1<<63 {
			return 0, false
		}
		return -int64(u), true
	}
	if u > math.MaxInt64 {
		return 0, false
	}
	return int64(u), true
}

// decimalFloat is the shape a C++ stream reads as a double.
var decimalFloat = regexp.MustCompile(`^[-+]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][-+]?[0-9]+)?[ \t\n\r\f\v]*$`)

// yamlFloat is yaml-cpp's convert<double>: a decimal number, or .inf / .nan in YAML's
// spellings.
func yamlFloat(s string) (float64, bool) {
	switch s {
	case ".inf", ".Inf", ".INF", "+.inf", "+.Inf", "+.INF":
		return math.Inf(1), true
	case "-.inf", "-.Inf", "-.INF":
		return math.Inf(-1), true
	case ".nan", ".NaN", ".NAN":
		return math.NaN(), true
	}
	if !decimalFloat.MatchString(s) {
		return 0, false
	}
	// An out-of-range value fails the stream read too, and the scalar stays a string.
	f, err := strconv.ParseFloat(strings.TrimRight(s, " \t\n\r\f\v"), 64)
	return f, err == nil
}
