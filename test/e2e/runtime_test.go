package e2e

import (
	"encoding/json"
	"io"
	"net/http"
	"strconv"
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

// TestRuntimeModifyOversizedBody is issue 18's defect 6 on the binary:
// 100,000 keys in a form body (over the admin's 1 MiB limit) were cut, and
// the first 18,271 applied with 200. The whole body must be refused and
// nothing applied.
func TestRuntimeModifyOversizedBody(t *testing.T) {
	p := start(t, "-c", writeConfig(t, minimalConfig+runtimeLayers))
	var b strings.Builder
	for i := range 100_000 {
		if i > 0 {
			b.WriteByte('&')
		}
		b.WriteString("big.key" + strconv.Itoa(i) + "=1")
	}
	resp, err := http.Post(p.admin+"/runtime_modify", "application/x-www-form-urlencoded", strings.NewReader(b.String()))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if want := "admin request body exceeds the limit of 1048576 bytes"; resp.StatusCode != http.StatusRequestEntityTooLarge || string(body) != want {
		t.Errorf("POST /runtime_modify with %d bytes = %d %q; want 413 %q", b.Len(), resp.StatusCode, body, want)
	}
	if _, _, rt := p.get("/runtime"); strings.Contains(rt, "big.key") {
		t.Errorf("part of the refused body was applied: /runtime has big.key* entries")
	}
	if code, _, body := p.post("/runtime_modify?big.key0=1"); code != http.StatusOK || body != "OK\n" {
		t.Errorf("a small /runtime_modify after the refusal = %d %q; want 200 OK", code, body)
	}
}
