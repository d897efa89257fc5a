package tap

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseRequestErrors(t *testing.T) {
	tests := []struct {
		name, body, want string
	}{
		{"empty", "", "/tap requires a JSON/YAML body"},
		{"blank", " \n", "/tap requires a JSON/YAML body"},
		{"not yaml", "config_id: [", "Unable to convert YAML as JSON: "},
		{"unknown field", "config_id: x\nbogus: 1", "Unable to parse JSON as proto ("},
		{"wrong type", `{"config_id": 3}`, "Unable to parse JSON as proto ("},
		{"no config_id", "tap_config: {match: {any_match: true}, output_config: {sinks: [{streaming_admin: {}}]}}", "Proto constraint validation failed (invalid TapRequest.ConfigId: value length must be at least 1 runes)"},
		{"no tap_config", "config_id: x", "Proto constraint validation failed (invalid TapRequest.TapConfig: value is required)"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseRequest([]byte(tc.body))
			if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
				t.Fatalf("ParseRequest error = %v; want one starting %q", err, tc.want)
			}
			if strings.Contains(err.Error(), "\n") {
				t.Errorf("ParseRequest error %q spans lines; want one line", err)
			}
		})
	}
}

func TestAttachErrors(t *testing.T) {
	m := NewManager()
	tapFilter(t, m, adminFilter)
	const output = `output_config: {sinks: [{streaming_admin: {}}]}`
	tests := []struct {
		name, body, want string
	}{
		{"unknown id", `{config_id: nope, tap_config: {match: {any_match: true}, ` + output + `}}`,
			"Unknown config id 'nope'. No extension has registered with this id."},
		{"no match", `{config_id: demo, tap_config: {` + output + `}}`,
			"tap_config: neither match nor match_config is set; one is required"},
		{"binary to admin", `{config_id: demo, tap_config: {match: {any_match: true}, output_config: {sinks: [{format: PROTO_BINARY, streaming_admin: {}}]}}}`,
			"tap_config.output_config.sinks[0].format = PROTO_BINARY; the streaming_admin sink cannot delimit it"},
		{"grpc sink", `{config_id: demo, tap_config: {match: {any_match: true}, output_config: {sinks: [{streaming_grpc: {grpc_service: {envoy_grpc: {cluster_name: c}}}}]}}}`,
			"tap_config.output_config.sinks[0].streaming_grpc: not implemented by Legate"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			req, err := ParseRequest([]byte(tc.body))
			if err != nil {
				t.Fatalf("ParseRequest: %v", err)
			}
			_, err = m.Attach(req)
			if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
				t.Errorf("Attach error = %v; want one starting %q", err, tc.want)
			}
		})
	}
	t.Run("second session", func(t *testing.T) {
		body := `{config_id: demo, tap_config: {match: {any_match: true}, ` + output + `}}`
		attach(t, m, body)
		req, _ := ParseRequest([]byte(body))
		if _, err := m.Attach(req); !errors.Is(err, ErrAttached) {
			t.Errorf("second Attach error = %v; want ErrAttached", err)
		}
	})
}

func TestFilterConfigErrors(t *testing.T) {
	tests := []struct {
		name, config, want string
	}{
		{"no common_config", `{}`, "CommonConfig"},
		{"empty config_id", `common_config: {admin_config: {config_id: ""}}`, "ConfigId"},
		{"static admin sink", `common_config: {static_config: {match: {any_match: true}, output_config: {sinks: [{streaming_admin: {}}]}}}`,
			"the admin sink needs an admin_config"},
		{"two sinks", `common_config: {static_config: {match: {any_match: true}, output_config: {sinks: [{file_per_tap: {path_prefix: a}}, {file_per_tap: {path_prefix: b}}]}}}`,
			"Sinks"},
		{"downstream connection", adminFilter + "\nrecord_downstream_connection: true", "record_downstream_connection = true: not implemented"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := newFromYAML(t, NewManager(), tc.config)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("New error = %v; want one containing %q", err, tc.want)
			}
		})
	}
}

func TestDeprecatedMatchConfig(t *testing.T) {
	dir := t.TempDir()
	f := tapFilter(t, NewManager(), `
common_config:
  static_config:
    match_config: {http_request_headers_match: {headers: [{name: x-tap, exact_match: "1"}]}}
    output_config: {sinks: [{file_per_tap: {path_prefix: "`+filepath.Join(dir, "t")+`"}}]}
`)
	if got := stream(f.NewTapper(), map[string]string{"x-tap": "1"}, nil, nil, 200, nil, nil, nil); !got {
		t.Errorf("End() with match_config matching = false; want true")
	}
	if got := stream(f.NewTapper(), map[string]string{"x-tap": "2"}, nil, nil, 200, nil, nil, nil); got {
		t.Errorf("End() with match_config not matching = true; want false")
	}
}

// TestWatch: /tap exists from the first admin-configured filter to the last; a filter that
// registers while a session is attached to its id is tapped too.
func TestWatch(t *testing.T) {
	m := NewManager()
	var events []bool
	m.Watch(func(available bool) { events = append(events, available) })
	static := tapFilter(t, m, `common_config: {static_config: {match: {any_match: true}, output_config: {sinks: [{file_per_tap: {path_prefix: "`+filepath.Join(t.TempDir(), "s")+`"}}]}}}`)
	static.Close()
	a := tapFilter(t, m, adminFilter)
	s := attach(t, m, `{config_id: demo, tap_config: {match: {any_match: true}, output_config: {sinks: [{streaming_admin: {}}]}}}`)
	b := tapFilter(t, m, adminFilter)
	if b.NewTapper() == nil {
		t.Errorf("a filter registered during a session is not tapped")
	}
	a.Close()
	b.Close()
	b.Close()
	if diff := cmp.Diff([]bool{true, false}, events); diff != "" {
		t.Errorf("watch events (-want +got):\n%s", diff)
	}
	s.Close()
	m.Watch(nil)
	c := tapFilter(t, m, adminFilter)
	var late []bool
	m.Watch(func(available bool) { late = append(late, available) })
	if diff := cmp.Diff([]bool{true}, late); diff != "" {
		t.Errorf("late watch events (-want +got):\n%s", diff)
	}
	c.Close()
}

func FuzzParseRequest(f *testing.F) {
	f.Add([]byte(`{config_id: demo, tap_config: {match: {any_match: true}, output_config: {sinks: [{streaming_admin: {}}]}}}`))
	f.Add([]byte("config_id: a\ntap_config:\n  match_config: {not_match: {any_match: true}}\n  output_config: {streaming: true, sinks: [{format: PROTO_TEXT, streaming_admin: {}}]}\n"))
	f.Add([]byte(`{"config_id": "x", "tap_config": {"match": {"http_request_generic_body_match": {"bytes_limit": 3, "patterns": [{"binary_match": "AAE="}]}}}}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		m := NewManager()
		fl, err := New(mustTapYAML(t, adminFilterFor("x")), m)
		if err != nil {
			t.Fatal(err)
		}
		defer fl.Close()
		req, err := ParseRequest(body)
		if err != nil {
			if strings.Contains(err.Error(), "\n") {
				t.Errorf("error %q spans lines", err)
			}
			return
		}
		req.ConfigId = "x"
		for _, sink := range req.GetTapConfig().GetOutputConfig().GetSinks() {
			if fp := sink.GetFilePerTap(); fp != nil {
				fp.PathPrefix = filepath.Join(t.TempDir(), "f") // fuzzed paths must not write elsewhere
			}
		}
		s, err := m.Attach(req)
		if err != nil {
			return
		}
		defer s.Close()
		tp := fl.NewTapper()
		stream(tp, map[string]string{"a": "b"}, []string{"body"}, nil, 200, nil, []string{"resp"}, nil)
	})
}
