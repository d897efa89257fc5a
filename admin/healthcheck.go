package admin

import (
	"io"
	"net/http"
	"sync/atomic"
)

// HealthCheckEndpoints returns /healthcheck/fail and /healthcheck/ok. failed
// is the server-wide flag the HTTP health_check filter reads; changed is
// called after each change so the server republishes its state (DRAINING
// while failed).
func HealthCheckEndpoints(failed *atomic.Bool, changed func()) []Endpoint {
	set := func(v bool) func(http.ResponseWriter, *http.Request, Query) {
		return func(w http.ResponseWriter, _ *http.Request, _ Query) {
			failed.Store(v)
			changed()
			io.WriteString(w, "OK\n")
		}
	}
	return []Endpoint{
		{Path: "/healthcheck/fail", Help: "cause the server to fail health checks", Mutates: true, Handle: set(true)},
		{Path: "/healthcheck/ok", Help: "cause the server to pass health checks", Mutates: true, Handle: set(false)},
	}
}
