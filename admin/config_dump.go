package admin

import (
	"net/http"

	"github.com/legateproxy/legate/admin/configdump"
)

// ConfigDumpEndpoint returns /config_dump over the dump registry that the
// bootstrap, cluster manager, listener manager and xDS add their sections to.
func ConfigDumpEndpoint(dumps *configdump.Registry) Endpoint {
	return Endpoint{
		Path: "/config_dump",
		Help: "dump current Envoy configs (experimental)",
		Params: []Param{
			{Name: "resource", Kind: ParamString, Help: "The resource to dump"},
			{Name: "mask", Kind: ParamString, Help: "The mask to apply. When both resource and mask are specified, the mask is applied to every element in the desired repeated field so that only a subset of fields are returned. The mask is parsed as a Protobuf::FieldMask"},
			{Name: "name_regex", Kind: ParamString, Help: "Dump only the currently loaded configurations whose names match the specified regex. Can be used with both resource and mask query parameters."},
			{Name: "include_eds", Kind: ParamBool, Help: "Dump currently loaded configuration including EDS. See the response definition for more information"},
		},
		Handle: func(w http.ResponseWriter, _ *http.Request, q Query) {
			req := configdump.Request{IncludeEDS: q.Has("include_eds")}
			req.Resource, _ = q.NonEmpty("resource")
			req.Mask, _ = q.NonEmpty("mask")
			req.NameRegex, _ = q.NonEmpty("name_regex")
			// Render writes the whole body once it knows the status, so a
			// buffer in between keeps errors from following a 200.
			var buf bufferWriter
			status, contentType, err := dumps.Render(&buf, req)
			if err != nil && status == 0 {
				status = http.StatusInternalServerError
			}
			if status == 0 {
				status = http.StatusOK
			}
			w.Header().Set("Content-Type", contentType)
			w.WriteHeader(status)
			w.Write(buf.b)
		},
	}
}

type bufferWriter struct{ b []byte }

func (w *bufferWriter) Write(p []byte) (int, error) {
	w.b = append(w.b, p...)
	return len(p), nil
}
