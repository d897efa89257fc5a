package lua

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"

	glua "github.com/yuin/gopher-lua"

	"github.com/legateproxy/legate/httpproxy/filter"
)

// scriptBody is the response body of a script that called body(), bodyChunks() or
// trailers() in envoy_on_response: on its first Read it reads the upstream's body whole,
// resumes the script with it (or its trailers), and then serves the body the script left
// (setBytes may replace it); the trailers the script changed in place are what is sent. The
// response headers are held until then (filter.Exchange.HoldResponseHeaders), so the rest of
// the script may still change them; it is detached from the stream otherwise (c.detached):
// the body, the headers, logs and helpers, but not the stream's info or respond().
type scriptBody struct {
	f   *Filter
	s   *script
	v   *vm
	co  *glua.LState
	c   *call
	src filter.Body
	out *bytes.Reader // nil until the script ran
}

// errResponseTooLarge aborts a response over maxBody that a script buffers.
var errResponseTooLarge = fmt.Errorf("lua: response body over %d bytes", maxBody)

func (b *scriptBody) Read(p []byte) (int, error) {
	if b.out == nil {
		if err := b.runScript(); err != nil {
			return 0, err
		}
	}
	return b.out.Read(p)
}

// runScript reads the whole body and resumes the script with it.
func (b *scriptBody) runScript() error {
	body, err := io.ReadAll(io.LimitReader(b.src, maxBody+1))
	if err != nil {
		b.c.detached = true
		b.f.finish(b.s, b.v, b.c, nil)
		return err
	}
	if len(body) > maxBody {
		b.c.detached = true
		b.f.finish(b.s, b.v, b.c, nil)
		return errResponseTooLarge
	}
	c := b.c
	c.detached = true
	c.respBody = &buffer{c: c, b: body}
	c.respTrailers = b.src.Trailers()
	st, err, _ := b.v.L.Resume(b.co, nil, c.bodyValue(b.co, c.bodyWanted))
	if st == glua.ResumeYield {
		err = errors.New("envoy_on_response yielded outside of body()")
	}
	b.f.finish(b.s, b.v, c, err)
	b.out = bytes.NewReader(c.respBody.b)
	return nil
}

// bodyValue is what a response body(), bodyChunks() or trailers() (method) returns.
func (c *call) bodyValue(L *glua.LState, method string) glua.LValue {
	switch method {
	case "bodyChunks":
		return chunksIterator(L, c.respBody)
	case "trailers":
		return trailersValue(L, c, c.respTrailers)
	}
	if len(c.respBody.b) == 0 && !c.alwaysWrap {
		return glua.LNil
	}
	return newObject(L, typeBuffer, c.respBody)
}

// trailersValue is a stream's trailers as a header map object, nil when it has none (as in
// Envoy, a script cannot add trailers to a stream without them).
func trailersValue(L *glua.LState, c *call, h http.Header) glua.LValue {
	if len(h) == 0 {
		return glua.LNil
	}
	return newObject(L, typeHeaders, &headerMap{c: c, h: h, trailers: true})
}

func chunksIterator(L *glua.LState, b *buffer) *glua.LFunction {
	n := 1
	if len(b.b) == 0 {
		n = 0
	}
	return iterator(L, n, func(int) (glua.LValue, glua.LValue) {
		return newObject(L, typeBuffer, b), glua.LNil
	})
}
