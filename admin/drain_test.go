package admin

import (
	"net/http/httptest"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/legateproxy/legate/listener"
)

type recordingDrainer struct {
	got  []listener.DrainRequest
	exit func()
}

func (d *recordingDrainer) DrainListeners(r listener.DrainRequest, exit func()) {
	d.got = append(d.got, r)
	d.exit = exit
}

func TestDrainListeners(t *testing.T) {
	tests := []struct {
		query    string
		code     int
		body     string
		want     []listener.DrainRequest
		wantExit bool
	}{
		{"", 200, "OK\n", []listener.DrainRequest{{}}, true},
		{"inboundonly", 200, "OK\n", []listener.DrainRequest{{InboundOnly: true}}, true},
		{"graceful", 200, "OK\n", []listener.DrainRequest{{Graceful: true}}, true},
		{"graceful=0", 200, "OK\n", []listener.DrainRequest{{Graceful: true}}, true}, // presence flags
		{"inboundonly&graceful", 200, "OK\n", []listener.DrainRequest{{InboundOnly: true, Graceful: true}}, true},
		{"graceful&skip_exit", 200, "OK\n", []listener.DrainRequest{{Graceful: true, SkipExit: true}}, true},
		{"inboundonly&graceful&skip_exit", 200, "OK\n", []listener.DrainRequest{{InboundOnly: true, Graceful: true, SkipExit: true}}, true},
		{"skip_exit", 400, "skip_exit requires graceful\n", nil, false},
		{"inboundonly&skip_exit", 400, "skip_exit requires graceful\n", nil, false},
	}
	for _, tc := range tests {
		t.Run("query "+tc.query, func(t *testing.T) {
			d := &recordingDrainer{}
			exited := false
			e := DrainListenersEndpoint(d, func() { exited = true })
			if !e.Mutates {
				t.Errorf("/drain_listeners is not a POST endpoint")
			}
			w := httptest.NewRecorder()
			e.Handle(w, httptest.NewRequest("POST", "/drain_listeners?"+tc.query, nil), ParseQuery(tc.query))
			if w.Code != tc.code || w.Body.String() != tc.body {
				t.Errorf("reply = %d %q; want %d %q", w.Code, w.Body.String(), tc.code, tc.body)
			}
			if diff := cmp.Diff(tc.want, d.got); diff != "" {
				t.Errorf("DrainListeners calls (-want +got):\n%s", diff)
			}
			if tc.wantExit {
				if d.exit == nil {
					t.Fatalf("exit callback not passed")
				}
				d.exit()
				if !exited {
					t.Errorf("the exit callback given to the manager is not the server's")
				}
			}
		})
	}
}
