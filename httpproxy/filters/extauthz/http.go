package extauthz

import (
	"bytes"
	"context"
	"net/http"
	"net/url"
	"strings"

	"google.golang.org/protobuf/types/known/structpb"

	"github.com/legateproxy/legate/httpproxy/filter"
	"github.com/legateproxy/legate/pool"
)

// maxAuthBody bounds the body of an authorization service's answer Legate reads.
const maxAuthBody = 1 << 20

// httpChecker asks a plain HTTP authorization service through its cluster: the client's
// method and path (under path_prefix) with a chosen set of its headers; 200 allows, any other
// status denies with that status, and a failed exchange is an error.
type httpChecker struct {
	t     httpTarget
	set   *settings
	pools *pool.Registry
}

func (h *httpChecker) close() error { return nil }

// defaultRequestHeaders are the client's headers Envoy always sends to an HTTP service (the
// method, path and host travel as the request's own).
var defaultRequestHeaders = []string{"authorization"}

// never sent: the exchange's own framing.
func skipRequestHeader(name string) bool {
	switch name {
	case "content-length", "transfer-encoding", "connection", "host", "te", "upgrade", "keep-alive":
		return true
	}
	return false
}

func (h *httpChecker) check(ctx context.Context, x *filter.Exchange, in *input) result {
	ctx, cancel := context.WithTimeout(ctx, h.t.timeout)
	defer cancel()
	r := x.Request
	req := &pool.Request{Method: r.Method, Path: h.t.pathPrefix + r.Path, Host: r.Authority}
	for k, vs := range r.Header {
		name := strings.ToLower(k)
		if skipRequestHeader(name) || !h.sends(name) {
			continue
		}
		for _, v := range vs {
			req.Header = append(req.Header, pool.Field{Name: k, Value: v})
		}
	}
	for _, kv := range h.t.addRequest {
		req.Header = append(req.Header, pool.Field{Name: kv[0], Value: kv[1]})
	}
	if in.body != nil {
		req.Body, req.ContentLength = bytes.NewReader(in.body), int64(len(in.body))
	}
	resp, err := filter.Call(ctx, h.pools, h.t.cluster, req, maxAuthBody)
	if err != nil {
		return result{outcome: failed, err: err}
	}
	if resp.Status != http.StatusOK {
		return h.denial(resp)
	}
	return h.allow(resp)
}

// sends reports whether the client's header name goes to the service.
func (h *httpChecker) sends(name string) bool {
	for _, d := range defaultRequestHeaders {
		if name == d {
			return true
		}
	}
	return h.t.allowedRequest != nil && h.t.allowedRequest.match(name)
}

// allow reads a 200: the allowed upstream headers set or appended on the request, the client
// headers on success, and headers turned into dynamic metadata.
func (h *httpChecker) allow(resp *filter.CallResponse) result {
	r := result{outcome: allowed}
	md := map[string]*structpb.Value{}
	for k, vs := range resp.Header {
		name := strings.ToLower(k)
		for _, v := range vs {
			switch {
			case h.t.upstream != nil && h.t.upstream.match(name):
				r.upstream = append(r.upstream, header{name: k, value: v})
			case h.t.upstreamAppend != nil && h.t.upstreamAppend.match(name):
				r.upstream = append(r.upstream, header{name: k, value: v, append: true})
			}
			if h.t.clientOnSuccess != nil && h.t.clientOnSuccess.match(name) {
				r.responseAdd = append(r.responseAdd, header{name: k, value: v, append: true})
			}
			if h.t.toMetadata != nil && h.t.toMetadata.match(name) {
				md[name] = structpb.NewStringValue(v)
			}
		}
	}
	if len(md) > 0 {
		r.metadata = &structpb.Struct{Fields: md}
	}
	return r
}

// denial reads any other status: the client gets it with the service's body and its allowed
// client headers (every header but the exchange's own framing when none are listed).
func (h *httpChecker) denial(resp *filter.CallResponse) result {
	r := result{outcome: denied, status: resp.Status, body: string(resp.Body), reply: http.Header{}}
	for k, vs := range resp.Header {
		name := strings.ToLower(k)
		if skipRequestHeader(name) || name == "date" || name == "server" {
			continue
		}
		if h.t.client != nil && !h.t.client.match(name) {
			continue
		}
		r.reply[k] = vs
	}
	return r
}

// editQuery sets and removes query parameters of path (query_parameters_to_set/_to_remove).
func editQuery(path string, set [][2]string, remove []string) string {
	p, q, _ := strings.Cut(path, "?")
	vals, err := url.ParseQuery(q)
	if err != nil {
		return path
	}
	for _, k := range remove {
		vals.Del(k)
	}
	for _, kv := range set {
		vals.Set(kv[0], kv[1])
	}
	if len(vals) == 0 {
		return p
	}
	return p + "?" + vals.Encode()
}

// ctxPools is the context's pools, nil without a context.
func ctxPools(ctx *filter.Context) *pool.Registry {
	if ctx == nil {
		return nil
	}
	return ctx.Pools
}
