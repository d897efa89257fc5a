package admin

import (
	"io"
	"net/http"

	"github.com/legateproxy/legate/internal/pbjson"
	"github.com/legateproxy/legate/runtime"
)

// RuntimeEndpoints returns /runtime (the layers and every key's value per
// layer) and /runtime_modify (merge query parameters into the admin layer).
func RuntimeEndpoints(rt *runtime.Runtime) []Endpoint {
	return []Endpoint{
		{
			Path: "/runtime",
			Help: "print runtime values",
			Handle: func(w http.ResponseWriter, _ *http.Request, _ Query) {
				writeProto(w, rt.AdminView(), pbjson.AllFields)
			},
		},
		{
			Path:    "/runtime_modify",
			Help:    "Adds or modifies runtime values as passed in query parameters. To delete a previously added key, use an empty string as the value. Note that deletion only applies to overrides added via this endpoint; values loaded from disk can be modified via override but not deleted. E.g. ?key1=value1&key2=value2...",
			Mutates: true,
			Handle: func(w http.ResponseWriter, _ *http.Request, q Query) {
				if len(q) == 0 {
					w.WriteHeader(http.StatusBadRequest)
					io.WriteString(w, "usage: /runtime_modify?key1=value1&key2=value2&keyN=valueN\n"+
						"       or send the parameters as form values\n"+
						"use an empty value to remove a previously added override")
					return
				}
				values := make(map[string]string, len(q))
				for k := range q {
					values[k] = q.Get(k)
				}
				if err := rt.Modify(values); err != nil {
					w.WriteHeader(http.StatusServiceUnavailable)
					io.WriteString(w, err.Error())
					return
				}
				io.WriteString(w, "OK\n")
			},
		},
	}
}
