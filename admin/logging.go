package admin

import (
	"io"
	"net/http"

	"github.com/legateproxy/legate/logging"
)

// LoggingEndpoint returns /logging: without parameters it lists the loggers;
// with level=, <logger>=<level> or paths= it changes them. Validation and the
// exact bodies are the logging registry's.
func LoggingEndpoint(logs *logging.Registry) Endpoint {
	return Endpoint{
		Path:    "/logging",
		Help:    "query/change logging levels",
		Mutates: true,
		Params: []Param{
			{Name: "paths", Kind: ParamString, Help: "Change multiple logging levels by setting to <logger_name1>:<desired_level1>,<logger_name2>:<desired_level2>. If fine grain logging is enabled, use __FILE__ or a glob experision as the logger name. For example, source/common*:warning"},
			{Name: "level", Kind: ParamEnum, Help: "desired logging level, this will change all loggers's level", Choices: []string{"", "trace", "debug", "info", "warning", "error", "critical", "off"}},
		},
		Handle: func(w http.ResponseWriter, _ *http.Request, q Query) {
			body, status := logs.HandleQuery(q)
			w.WriteHeader(status)
			io.WriteString(w, body)
		},
	}
}
