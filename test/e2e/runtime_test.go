package e2e

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/types/known/structpb"
)

const runtimeLayers = `
layered_runtime:
  layers:
  - name: base
    static_layer:
      upstream: {healthy_panic_threshold: 40}
      feature.x: true
  - name: admin
    admin_layer: {}
`

// runtimeView is /runtime's shape.
type runtimeView struct {
	Layers  []string `json:"layers"`
	Entries map[string]struct {
		LayerValues []string `json:"layer_values"`
		FinalValue  string   `json:"final_value"`
	} `json:"entries"`
}

func TestRuntime(t *testing.T) {
	p := start(t, "-c", writeConfig(t, minimalConfig+runtimeLayers))
	read := func() runtimeView {
		t.Helper()
		_, _, body := p.get("/runtime")
		var s structpb.Struct
		strict(t, body, &s)
		var v runtimeView
		if err := json.Unmarshal([]byte(body), &v); err != nil {
			t.Fatal(err)
		}
		return v
	}
	v := read()
	if diff := cmp.Diff([]string{"base", "admin"}, v.Layers); diff != "" {
		t.Errorf("layers (-want +got):\n%s", diff)
	}
	if e := v.Entries["upstream.healthy_panic_threshold"]; e.FinalValue != "40" || !cmp.Equal(e.LayerValues, []string{"40", ""}) {
		t.Errorf("upstream.healthy_panic_threshold = %+v", e)
	}

	if code, _, body := p.post("/runtime_modify?upstream.healthy_panic_threshold=10&new.key=abc"); code != 200 || body != "OK\n" {
		t.Fatalf("POST /runtime_modify = %d %q", code, body)
	}
	v = read()
	if e := v.Entries["upstream.healthy_panic_threshold"]; e.FinalValue != "10" || !cmp.Equal(e.LayerValues, []string{"40", "10"}) {
		t.Errorf("after override: %+v", e)
	}
	if e := v.Entries["new.key"]; e.FinalValue != "abc" {
		t.Errorf("new.key = %+v", e)
	}
	// An empty value removes the admin override; the static value stays.
	p.post("/runtime_modify?upstream.healthy_panic_threshold=")
	if e := read().Entries["upstream.healthy_panic_threshold"]; e.FinalValue != "40" {
		t.Errorf("after removing the override: %+v", e)
	}
	if _, _, body := p.get("/stats?filter=^runtime.admin_overrides_active$"); body != "runtime.admin_overrides_active: 1\n" {
		t.Errorf("runtime.admin_overrides_active = %q", body)
	}
	if code, _, body := p.post("/runtime_modify"); code != 400 || !strings.HasPrefix(body, "usage: /runtime_modify?key1=value1") {
		t.Errorf("POST /runtime_modify without parameters = %d %q", code, body)
	}
}

func TestRuntimeModifyWithoutAdminLayer(t *testing.T) {
	p := start(t, "-c", writeConfig(t, minimalConfig))
	if code, _, body := p.post("/runtime_modify?a=b"); code != 503 || body != "No admin layer specified" {
		t.Errorf("POST /runtime_modify = %d %q; want 503", code, body)
	}
	if _, _, body := p.get("/runtime"); body != "{\n \"entries\": {},\n \"layers\": []\n}\n" {
		t.Errorf("GET /runtime without layers = %q", body)
	}
}
