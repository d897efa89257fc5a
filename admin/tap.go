package admin

import (
	"io"
	"net/http"

	"github.com/legateproxy/legate/httpproxy/filters/tap"
)

// WatchTap makes POST /tap exist exactly while at least one tap filter with an admin_config
// is configured (Envoy adds the handler with the first such filter and removes it with the
// last); without one, /tap is an unknown path (404 with the help text), which is Envoy's
// "unavailable" behaviour. m is the Manager the tap filters were registered with.
func WatchTap(reg *Registry, m *tap.Manager) {
	m.Watch(func(available bool) {
		if !available {
			reg.Remove("/tap")
			return
		}
		// The only error is a path already taken, which the Manager's watch cannot cause
		// twice; a second registration attempt would leave the first in place.
		_ = reg.Register(TapEndpoint(m))
	})
}

// TapEndpoint is POST /tap ("tap filter control"). The body is a YAML or JSON
// envoy.admin.v3.TapRequest; a bad body, an unknown config_id or a second concurrent session
// gets 400 with Envoy's one-line reason. Otherwise the response is 200 and streams each
// matched stream's TraceWrapper in the sink's format (pretty JSON for the JSON formats) for
// as long as the client keeps the request open; when the client goes away the tap detaches.
func TapEndpoint(m *tap.Manager) Endpoint {
	return Endpoint{
		Path:      "/tap",
		Help:      "tap filter control",
		Mutates:   true,
		QueryOnly: true,
		Handle: func(w http.ResponseWriter, r *http.Request, _ Query) {
			serveTap(w, r, m)
		},
	}
}

func serveTap(w http.ResponseWriter, r *http.Request, m *tap.Manager) {
	body, err := readBody(r)
	if refuseTooLarge(w, err) {
		return
	}
	if err != nil {
		tapBadRequest(w, "unable to read the request body: "+err.Error())
		return
	}
	req, err := tap.ParseRequest(body)
	if err != nil {
		tapBadRequest(w, err.Error())
		return
	}
	s, err := m.Attach(req)
	if err != nil {
		tapBadRequest(w, err.Error())
		return
	}
	defer s.Close()
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	if rc.Flush() != nil {
		return
	}
	var buf []byte
	for {
		select {
		case <-r.Context().Done():
			return
		case tw := <-s.Traces():
			buf, err = tap.Encode(buf[:0], tw, s.Format())
			if err != nil {
				continue // a trace that cannot be encoded is skipped, the stream goes on
			}
			if _, err := w.Write(buf); err != nil {
				return
			}
			if rc.Flush() != nil {
				return
			}
		}
	}
}

func tapBadRequest(w http.ResponseWriter, msg string) {
	w.WriteHeader(http.StatusBadRequest)
	io.WriteString(w, msg)
}
