package logging

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// jsonPattern turns application_log_config.log_format.json_format into the
// spdlog pattern Envoy builds from it: the struct printed as compact JSON
// (keys sorted), %v and %_ rejected, "%*" inserted before the final '}' (for
// log tags) and every %j replaced by %+ (the JSON-escaped message).
func jsonPattern(format map[string]any) (string, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(format); err != nil {
		return "", fmt.Errorf("application_log_config.log_format.json_format: cannot be serialized as a JSON string: %w", err)
	}
	s := strings.TrimSuffix(b.String(), "\n")
	for _, flag := range []string{"%v", "%_"} {
		if strings.Contains(s, flag) {
			return "", fmt.Errorf("application_log_config.log_format.json_format = %s: usage of %s is unavailable for JSON log formats", s, flag)
		}
	}
	i := strings.LastIndexByte(s, '}')
	if i < 0 {
		return "", errors.New("application_log_config.log_format.json_format: not a JSON object")
	}
	s = s[:i] + "%*" + s[i:]
	return strings.ReplaceAll(s, "%j", "%+"), nil
}
