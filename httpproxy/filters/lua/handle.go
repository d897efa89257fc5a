package lua

import (
	"bytes"
	"encoding/base64"
	"errors"
	"io"
	"net/http"
	"strconv"

	glua "github.com/yuin/gopher-lua"

	"github.com/legateproxy/legate/httpproxy/filter"
)

// maxBody bounds a request body a script buffers (body()) and an httpCall's response body,
// as Envoy's default per-connection buffer limit (1 MiB).
const maxBody = 1 << 20

// call is one run of envoy_on_request or envoy_on_response: what the handle reaches.
type call struct {
	f        *Filter
	x        *filter.Exchange
	header   http.Header // the request's or the response's headers
	response bool
	// dead is set when the function returned: an object kept past it raises an error.
	dead bool
	// stopped is set by respond(), whose reply ends the script.
	stopped bool
	reply   *filter.Reply
	headers *glua.LUserData // made on first use
	// reqBody is the request body body() read; setBytes on it rewrites the request body.
	reqBody *buffer
	// bodyWanted is "body", "bodyChunks" or "trailers" when envoy_on_response yielded in
	// that method for the response body's end (alwaysWrap: body(true)); respBody is the body
	// once read, respTrailers its trailers (nil or empty: none).
	bodyWanted   string
	alwaysWrap   bool
	respBody     *buffer
	respTrailers http.Header
	// detached is set when the response script goes on after body(), inside the body
	// rewriter: it may change the held headers and the body, no longer reach the stream.
	detached bool
	// reqRewritten is set once setBytes asked for the request body's rewrite.
	reqRewritten bool
}

func newHandle(L *glua.LState, c *call) *glua.LUserData { return newObject(L, typeHandle, c) }

// checkLive returns the live call behind an object whose Value is, or leads to, a call.
func checkLive(L *glua.LState, c *call) *call {
	if c == nil || c.dead {
		L.RaiseError("object used outside of proper scope")
	}
	return c
}

// checkCall is checkLive for what reaches the stream, which a response script may not do
// once body() gave it the response body.
func checkCall(L *glua.LState, c *call) *call {
	checkLive(L, c)
	if c.detached {
		L.RaiseError("the stream's info is not available after body() in envoy_on_response (not implemented by Legate)")
	}
	return c
}

// handleArg is the handle's call, for methods that reach the stream.
func handleArg(L *glua.LState) *call {
	c, _ := L.CheckUserData(1).Value.(*call)
	return checkCall(L, c)
}

// handleArgLive is the handle's call, for methods that do not reach the stream.
func handleArgLive(L *glua.LState) *call {
	c, _ := L.CheckUserData(1).Value.(*call)
	return checkLive(L, c)
}

var handleMethods = map[string]glua.LGFunction{
	"headers":         handleHeaders,
	"body":            handleBody,
	"bodyChunks":      handleBodyChunks,
	"trailers":        handleTrailers,
	"respond":         handleRespond,
	"httpCall":        handleHTTPCall,
	"streamInfo":      handleStreamInfo,
	"metadata":        handleMetadata,
	"connection":      handleConnection,
	"base64Escape":    handleBase64Escape,
	"timestamp":       handleTimestamp,
	"timestampString": handleTimestampString,
	"logTrace":        logAt(func(c *call, m string) { c.f.log.Tracef("script log: %s", m) }),
	"logDebug":        logAt(func(c *call, m string) { c.f.log.Debugf("script log: %s", m) }),
	"logInfo":         logAt(func(c *call, m string) { c.f.log.Infof("script log: %s", m) }),
	"logWarn":         logAt(func(c *call, m string) { c.f.log.Warnf("script log: %s", m) }),
	"logErr":          logAt(func(c *call, m string) { c.f.log.Errorf("script log: %s", m) }),
	"logCritical":     logAt(func(c *call, m string) { c.f.log.Criticalf("script log: %s", m) }),
}

func logAt(log func(c *call, msg string)) glua.LGFunction {
	return func(L *glua.LState) int {
		c := handleArgLive(L)
		log(c, L.CheckString(2))
		return 0
	}
}

func handleHeaders(L *glua.LState) int {
	c := handleArgLive(L)
	if c.headers == nil {
		c.headers = newObject(L, typeHeaders, &headerMap{c: c, h: c.header})
	}
	L.Push(c.headers)
	return 1
}

// readBody buffers the request body whole; a body over maxBody answers 413, as Envoy does
// when a buffering filter's request overflows its buffer.
func (c *call) readBody(L *glua.LState, method string) *buffer {
	if c.reqBody != nil {
		return c.reqBody
	}
	if c.x.Downstream == nil {
		L.RaiseError("%s(): the stream has no body to read", method)
	}
	if err := c.x.Downstream.BufferBody(maxBody); err != nil {
		if errors.Is(err, filter.ErrBodyTooLarge) {
			c.reply = &filter.Reply{Status: http.StatusRequestEntityTooLarge, Body: "Payload Too Large", Details: "request_payload_too_large"}
		}
		// Either way the stream ends here: too large, or the client went away.
		c.stopped = true
		L.RaiseError("%s(): %v", method, err)
	}
	c.reqBody = &buffer{c: c, b: c.x.BufferedBody()}
	return c.reqBody
}

// awaitResponseBody yields envoy_on_response until the response body is read (the
// rewriter resumes it with what method returns); a second call has it at once.
func (c *call) awaitResponseBody(L *glua.LState, method string) int {
	if c.respBody != nil {
		L.Push(c.bodyValue(L, method))
		return 1
	}
	c.bodyWanted = method
	return L.Yield()
}

func handleBody(L *glua.LState) int {
	c := handleArgLive(L)
	if c.response {
		c.alwaysWrap = L.OptBool(2, false)
		return c.awaitResponseBody(L, "body")
	}
	checkCall(L, c)
	b := c.readBody(L, "body")
	if len(b.b) == 0 && !L.OptBool(2, false) {
		L.Push(glua.LNil)
		return 1
	}
	L.Push(newObject(L, typeBuffer, b))
	return 1
}

// handleBodyChunks iterates over the body: Legate has read it whole, so it is one chunk.
func handleBodyChunks(L *glua.LState) int {
	c := handleArgLive(L)
	if c.response {
		return c.awaitResponseBody(L, "bodyChunks")
	}
	checkCall(L, c)
	L.Push(chunksIterator(L, c.readBody(L, "bodyChunks")))
	return 1
}

// handleTrailers gives the stream's trailers once its body has ended, nil when it has none:
// the request's read whole as body() does (filter.Exchange.BufferedTrailers), the response's
// yielding as body() does.
func handleTrailers(L *glua.LState) int {
	c := handleArgLive(L)
	if c.response {
		return c.awaitResponseBody(L, "trailers")
	}
	checkCall(L, c)
	c.readBody(L, "trailers")
	L.Push(trailersValue(L, c, c.x.BufferedTrailers()))
	return 1
}

// handleRespond answers the request with the given headers (":status" required) and body,
// ending the script.
func handleRespond(L *glua.LState) int {
	c := handleArg(L)
	if c.response {
		L.RaiseError("respond() is only valid in envoy_on_request")
	}
	hdr := luaHeaders(L, L.CheckTable(2), "respond")
	status, err := strconv.Atoi(hdr.Get(":status"))
	if err != nil || status < 200 || status > 999 {
		L.RaiseError("respond(): :status %q must be an integer from 200", hdr.Get(":status"))
	}
	delete(hdr, ":status")
	c.reply = &filter.Reply{Status: status, Body: L.OptString(3, ""), Header: http.Header{}}
	for k, vs := range hdr {
		c.reply.Header[http.CanonicalHeaderKey(k)] = vs
	}
	c.stopped = true
	L.RaiseError("respond")
	return 0
}

// luaHeaders reads a table of header names to a string or a list of strings, names in
// lower case.
func luaHeaders(L *glua.LState, t *glua.LTable, method string) http.Header {
	h := http.Header{}
	t.ForEach(func(k, v glua.LValue) {
		name, ok := k.(glua.LString)
		if !ok {
			L.RaiseError("%s(): header names must be strings", method)
		}
		key := lowerASCII(string(name))
		switch v := v.(type) {
		case glua.LString:
			h[key] = append(h[key], string(v))
		case *glua.LTable:
			v.ForEach(func(_, e glua.LValue) { h[key] = append(h[key], e.String()) })
		default:
			h[key] = append(h[key], v.String())
		}
	})
	return h
}

func handleBase64Escape(L *glua.LState) int {
	handleArgLive(L)
	L.Push(glua.LString(base64.StdEncoding.EncodeToString([]byte(L.CheckString(2)))))
	return 1
}

// handleTimestamp is the time in milliseconds since the epoch (the only resolution).
func handleTimestamp(L *glua.LState) int {
	c := handleArgLive(L)
	L.Push(glua.LNumber(c.f.now()))
	return 1
}

func handleTimestampString(L *glua.LState) int {
	c := handleArgLive(L)
	switch r := L.OptString(2, "milliseconds"); r {
	case "milliseconds", "0":
		L.Push(glua.LString(strconv.FormatInt(c.f.now(), 10)))
	case "microseconds", "1":
		L.Push(glua.LString(strconv.FormatInt(c.f.nowMicros(), 10)))
	default:
		L.RaiseError("timestampString(): resolution %q is not implemented by Legate", r)
	}
	return 1
}

// buffer is a body as body() returns it.
type buffer struct {
	c *call
	b []byte
}

func bufferArg(L *glua.LState) *buffer {
	b, _ := L.CheckUserData(1).Value.(*buffer)
	if b == nil {
		L.RaiseError("not a buffer")
	}
	checkLive(L, b.c)
	return b
}

var bufferMethods = map[string]glua.LGFunction{
	"length": func(L *glua.LState) int {
		L.Push(glua.LNumber(len(bufferArg(L).b)))
		return 1
	},
	// getBytes(index, length): index from 0, as Envoy's.
	"getBytes": func(L *glua.LState) int {
		b := bufferArg(L).b
		i, n := L.CheckInt(2), L.CheckInt(3)
		if i < 0 || n < 0 || i+n > len(b) {
			L.RaiseError("index/length must be >= 0 and (index + length) must be <= buffer size")
		}
		L.Push(glua.LString(b[i : i+n]))
		return 1
	},
	// setBytes replaces the body: the request's is forwarded with its new length, the
	// response's sent once the script ends.
	"setBytes": func(L *glua.LState) int {
		b := bufferArg(L)
		c := b.c
		b.b = []byte(L.CheckString(2))
		if !c.response && c.reqBody == b && !c.reqRewritten {
			c.reqRewritten = true
			c.x.RewriteRequestBody(func(src filter.Body) io.Reader { return &replacedBody{src: src, b: b} })
		}
		return 0
	},
}

// replacedBody forwards a request body setBytes replaced: it drains the original (as a
// rewriter must) and serves the script's bytes.
type replacedBody struct {
	src filter.Body
	b   *buffer
	out *bytes.Reader
}

func (r *replacedBody) Read(p []byte) (int, error) {
	if r.out == nil {
		if _, err := io.Copy(io.Discard, r.src); err != nil {
			return 0, err
		}
		r.out = bytes.NewReader(r.b.b)
	}
	return r.out.Read(p)
}
