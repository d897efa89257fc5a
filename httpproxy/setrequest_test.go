package httpproxy

import (
	"net/http"
	"reflect"
	"testing"
	"time"

	"github.com/legateproxy/legate/httpproxy/route"
)

// TestSetRequestOnPutStream holds setRequest, which sets only the fields it is given, to the
// literal it stands for: putStream leaves the route request zero whatever it held (every
// field set here, checked by reflection, so that a field added to route.Request is set too),
// and setRequest then makes it the literal.
func TestSetRequestOnPutStream(t *testing.T) {
	s := getStream()
	s.req = route.Request{Authority: "a", Path: "/p", Method: "POST", Scheme: "https", Header: http.Header{"X": {"1"}},
		Fill: func() {}, Random: 7, DrawRandom: true, AddCookie: func(string, string, time.Duration) string { return "" }}
	v := reflect.ValueOf(s.req)
	for i := range v.NumField() {
		if v.Field(i).IsZero() {
			t.Fatalf("route.Request.%s is zero before putStream; give it a value here", v.Type().Field(i).Name)
		}
	}
	putStream(s)
	if !reflect.ValueOf(s.req).IsZero() {
		t.Fatalf("after putStream, s.req = %+v; want zero", s.req)
	}
	h := http.Header{"Y": {"2"}}
	s.setRequest("host", "/x", "GET", h)
	want := route.Request{Authority: "host", Path: "/x", Method: "GET", Scheme: "http", Header: h, DrawRandom: true}
	if !reflect.DeepEqual(s.req, want) {
		t.Errorf("setRequest = %+v; want %+v", s.req, want)
	}
}
