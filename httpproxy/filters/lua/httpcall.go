package lua

import (
	"bytes"
	"context"
	"net/http"
	"strconv"
	"strings"
	"time"

	glua "github.com/yuin/gopher-lua"

	"github.com/legateproxy/legate/httpproxy/filter"
	"github.com/legateproxy/legate/pool"
)

// handleHTTPCall is httpCall(cluster, headers, body, timeout_ms[, asynchronous]): a request
// to a host of cluster through the data plane's pools. headers must have :method, :path and
// :authority. It returns the response's headers (":status" included) and body (nil when
// empty); a failed call looks like a 503 "upstream failure", as Envoy's. Asynchronous, it
// returns at once and the response is dropped. A timeout of 0 waits as long as it takes.
func handleHTTPCall(L *glua.LState) int {
	c := handleArg(L)
	cluster := L.CheckString(2)
	hdr := luaHeaders(L, L.CheckTable(3), "httpCall")
	var body []byte
	if b, ok := L.Get(4).(glua.LString); ok {
		body = []byte(b)
	}
	timeout := time.Duration(L.CheckInt64(5)) * time.Millisecond
	if timeout < 0 {
		L.RaiseError("httpCall(): timeout must be >= 0")
	}
	async := false
	switch o := L.Get(6).(type) {
	case glua.LBool:
		async = bool(o)
	case *glua.LTable:
		o.ForEach(func(k, v glua.LValue) {
			if k.String() != "asynchronous" {
				L.RaiseError("httpCall(): option %q is not implemented by Legate", k.String())
			}
			async = glua.LVAsBool(v)
		})
	case *glua.LNilType:
	default:
		L.RaiseError("httpCall(): the 6th argument must be a boolean or an options table")
	}
	req := &pool.Request{Method: first(hdr, ":method"), Path: first(hdr, ":path"), Host: first(hdr, ":authority")}
	if req.Method == "" || req.Path == "" || req.Host == "" {
		L.RaiseError("http call headers must include ':path', ':method', and ':authority'")
	}
	if c.f.pools == nil || c.f.pools.Get(cluster) == nil {
		L.RaiseError("http call cluster invalid. Must be configured")
	}
	for k, vs := range hdr {
		if strings.HasPrefix(k, ":") {
			continue
		}
		for _, v := range vs {
			req.Header = append(req.Header, pool.Field{Name: k, Value: v})
		}
	}
	if len(body) > 0 {
		req.Body, req.ContentLength = bytes.NewReader(body), int64(len(body))
	}
	if async {
		c.f.callAsync(cluster, req, timeout)
		return 0
	}
	ctx, cancel := callContext(context.Background(), timeout)
	resp, err := filter.Call(ctx, c.f.pools, cluster, req, maxBody)
	cancel()
	if err != nil {
		c.f.log.Debugf("script log: httpCall to %s failed: %v", cluster, err)
		resp = &filter.CallResponse{Status: http.StatusServiceUnavailable, Body: []byte("upstream failure")}
	}
	t := L.NewTable()
	t.RawSetString(":status", glua.LString(strconv.Itoa(resp.Status)))
	for k, vs := range resp.Header {
		if len(vs) > 0 {
			t.RawSetString(strings.ToLower(k), glua.LString(vs[0]))
		}
	}
	L.Push(t)
	if len(resp.Body) == 0 {
		L.Push(glua.LNil)
	} else {
		L.Push(glua.LString(resp.Body))
	}
	return 2
}

func first(h http.Header, k string) string {
	if vs := h[k]; len(vs) > 0 {
		return vs[0]
	}
	return ""
}

func callContext(parent context.Context, timeout time.Duration) (context.Context, context.CancelFunc) {
	if timeout == 0 {
		return context.WithCancel(parent)
	}
	return context.WithTimeout(parent, timeout)
}

// callAsync sends req on its own goroutine, which ends with the call (or when the filter
// closes); the response is dropped.
func (f *Filter) callAsync(cluster string, req *pool.Request, timeout time.Duration) {
	f.async.Add(1)
	go func() {
		defer f.async.Done()
		ctx, cancel := callContext(f.closing, timeout)
		defer cancel()
		if _, err := filter.Call(ctx, f.pools, cluster, req, maxBody); err != nil {
			f.log.Debugf("script log: asynchronous httpCall to %s failed: %v", cluster, err)
		}
	}()
}
