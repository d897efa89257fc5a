package accesslog_test

import (
	"fmt"
	"net/http"
	"time"

	"github.com/legateproxy/legate/accesslog"
)

func ExampleFormatter_Format() {
	f, err := accesslog.ParseText("%START_TIME(%s.%3f)% %REQ(:METHOD)% %REQ(X-ENVOY-ORIGINAL-PATH?:PATH):12% %RESPONSE_CODE% %RESPONSE_FLAGS% %UPSTREAM_HOST%\n", accesslog.Options{})
	if err != nil {
		panic(err)
	}
	e := &accesslog.Entry{
		StartTime:      time.Unix(1700000000, 123456789),
		Method:         "GET",
		Path:           "/a/very/long/path",
		RequestHeaders: http.Header{},
		ResponseCode:   503,
		ResponseFlags:  accesslog.NoHealthyUpstream,
	}
	fmt.Print(string(f.Format(nil, e)))
	// Output: 1700000000.123 GET /a/very/long 503 UH -
}
