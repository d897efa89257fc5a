package configdump_test

import (
	"bytes"
	"net/http"
	"strings"
	"testing"

	adminv3 "github.com/envoyproxy/go-control-plane/envoy/admin/v3"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/legateproxy/legate/admin/configdump"
)

// FuzzRender feeds arbitrary resource, mask and name_regex parameters to
// Render: it must answer 200 with a ConfigDump that protojson decodes
// strictly and that holds no secret, or 400/404 with the error as the body.
func FuzzRender(f *testing.F) {
	f.Add("", "", "", false)
	f.Add("dynamic_active_clusters", "cluster.name,version_info", "service_.*", false)
	f.Add("static_clusters", "cluster.transport_socket.typed_config", "", true)
	f.Add("", "bootstrap.node,static_clusters", "(", false)
	f.Add("bootstrap", ",,", "a|b", true)
	f.Add("static_secrets", "secret.tls_certificate.private_key", ".*", false)
	r := fullRegistry(f)
	f.Fuzz(func(t *testing.T, resource, mask, regex string, eds bool) {
		var buf bytes.Buffer
		req := configdump.Request{Resource: resource, Mask: mask, NameRegex: regex, IncludeEDS: eds}
		status, ct, err := r.Render(&buf, req)
		body := buf.String()
		switch status {
		case http.StatusOK:
			if err != nil || ct != "application/json" {
				t.Fatalf("Render(%+v) = 200, %q, %v; want application/json, nil", req, ct, err)
			}
			var dump adminv3.ConfigDump
			if err := protojson.Unmarshal(buf.Bytes(), &dump); err != nil {
				t.Fatalf("Render(%+v) body does not decode: %v\n%s", req, err, body)
			}
			if strings.Contains(body, "KEY") || strings.Contains(body, "hunter2") {
				t.Fatalf("Render(%+v) body leaks a secret:\n%s", req, body)
			}
		case http.StatusBadRequest, http.StatusNotFound:
			if err == nil || ct != "text/plain" || body != err.Error() {
				t.Fatalf("Render(%+v) = %d, %q, %v, body %q; want text/plain and the error as body", req, status, ct, err, body)
			}
		default:
			t.Fatalf("Render(%+v) status = %d, error %v", req, status, err)
		}
	})
}
