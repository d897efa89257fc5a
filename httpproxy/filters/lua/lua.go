package lua

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	luav3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/lua/v3"
	glua "github.com/yuin/gopher-lua"
	"github.com/yuin/gopher-lua/parse"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/legateproxy/legate/httpproxy/filter"
	"github.com/legateproxy/legate/internal/registry"
	"github.com/legateproxy/legate/logging"
	"github.com/legateproxy/legate/pool"
	"github.com/legateproxy/legate/stats"
)

// Name and the type URLs select the filter in http_filters (TypeURL) and in
// typed_per_filter_config (PerRouteTypeURL).
const (
	Name            = "envoy.filters.http.lua"
	TypeURL         = "type.googleapis.com/envoy.extensions.filters.http.lua.v3.Lua"
	PerRouteTypeURL = "type.googleapis.com/envoy.extensions.filters.http.lua.v3.LuaPerRoute"
)

// Stats are the filter's stats (http.<stat_prefix>.lua[.<lua stat_prefix>].*).
type Stats struct {
	Errors stats.Counter `stat:"errors"`
}

// script is one compiled Lua source with its pool of states. Safe for concurrent use.
type script struct {
	name  string
	proto *glua.FunctionProto
	// hasRequest and hasResponse say which of envoy_on_request and envoy_on_response the
	// script defines (found when it was checked at load).
	hasRequest, hasResponse bool
	states                  sync.Pool // of *vm
}

// vm is a Lua state that ran a script's chunk, used by one stream at a time.
type vm struct {
	L                     *glua.LState
	onRequest, onResponse *glua.LFunction
}

// compileScript parses and compiles src, then runs it once in a fresh state so that a
// script failing at load is refused with its Lua error, as Envoy refuses it.
func compileScript(name, src string) (*script, error) {
	chunk, err := parse.Parse(strings.NewReader(src), name)
	if err != nil {
		return nil, err
	}
	proto, err := glua.Compile(chunk, name)
	if err != nil {
		return nil, err
	}
	s := &script{name: name, proto: proto}
	v, err := s.newVM()
	if err != nil {
		return nil, err
	}
	s.hasRequest, s.hasResponse = v.onRequest != nil, v.onResponse != nil
	s.states.Put(v)
	return s, nil
}

// newVM makes a state with Envoy's API and the script's globals.
func (s *script) newVM() (*vm, error) {
	L := glua.NewState()
	installAPI(L)
	L.Push(L.NewFunctionFromProto(s.proto))
	if err := L.PCall(0, 0, nil); err != nil {
		L.Close()
		return nil, err
	}
	v := &vm{L: L}
	v.onRequest, _ = L.GetGlobal("envoy_on_request").(*glua.LFunction)
	v.onResponse, _ = L.GetGlobal("envoy_on_response").(*glua.LFunction)
	return v, nil
}

// get returns a state of the script for one stream's call.
func (s *script) get() (*vm, error) {
	if v, ok := s.states.Get().(*vm); ok {
		return v, nil
	}
	return s.newVM()
}

// perRoute is a compiled LuaPerRoute.
type perRoute struct {
	disabled bool
	name     string  // a source_codes entry of the filter
	script   *script // source_code
}

// Filter is one configured Lua filter. Immutable after FromAny; safe for concurrent use.
type Filter struct {
	name      string // the key of its typed_per_filter_config entries and route metadata
	def       *script
	named     map[string]*script
	stats     *Stats
	release   func()
	log       *logging.Logger
	pools     *pool.Registry
	now       func() (ms int64)
	nowMicros func() int64
	// closing ends asynchronous httpCalls when the filter goes away.
	closing context.Context
	cancel  context.CancelFunc
	async   sync.WaitGroup
}

// Register registers the filter and its per-route configuration (LuaPerRoute).
func Register(b *registry.Builder) {
	registry.Add(b, filter.HTTPFilters, Name, &luav3.Lua{}, filter.Extension{
		New:            func(cfg *anypb.Any, ctx *filter.Context) (filter.Filter, error) { return FromAny(cfg, ctx) },
		PerRoute:       func(cfg *anypb.Any) (any, error) { return PerRouteFromAny(cfg) },
		PerRouteConfig: &luav3.LuaPerRoute{},
	})
}

// source reads a DataSource: inline or from a file.
func source(ds *corev3.DataSource, path string) (string, error) {
	switch x := ds.GetSpecifier().(type) {
	case *corev3.DataSource_InlineString:
		return x.InlineString, nil
	case *corev3.DataSource_InlineBytes:
		return string(x.InlineBytes), nil
	case *corev3.DataSource_Filename:
		b, err := os.ReadFile(x.Filename)
		if err != nil {
			return "", fmt.Errorf("%s.filename: %w", path, err)
		}
		return string(b), nil
	case nil:
		return "", fmt.Errorf("%s: no source", path)
	}
	return "", fmt.Errorf("%s: %T is not implemented by Legate", path, ds.GetSpecifier())
}

// FromAny builds the filter from its typed_config.
func FromAny(cfg *anypb.Any, ctx *filter.Context) (*Filter, error) {
	var pb luav3.Lua
	if cfg != nil {
		if cfg.GetTypeUrl() != TypeURL {
			return nil, fmt.Errorf("%s: typed_config: type %q; want %s", Name, cfg.GetTypeUrl(), TypeURL)
		}
		if err := cfg.UnmarshalTo(&pb); err != nil {
			return nil, fmt.Errorf("%s: typed_config: %w", Name, err)
		}
	}
	if err := pb.ValidateAll(); err != nil {
		return nil, fmt.Errorf("%s: %w", Name, err)
	}
	if c := pb.GetClearRouteCache(); c != nil && !c.GetValue() {
		// Legate routes a request after its filters ran, on the headers they left.
		return nil, fmt.Errorf("%s: clear_route_cache: false is not implemented by Legate", Name)
	}
	if pb.GetInlineCode() != "" && pb.GetDefaultSourceCode() != nil {
		return nil, fmt.Errorf("%s: only one of inline_code and default_source_code may be set", Name)
	}
	if ctx == nil {
		ctx = &filter.Context{}
	}
	f := &Filter{name: Name, named: map[string]*script{}, log: ctx.Log("lua"), pools: ctx.Pools}
	if ctx.Name != "" {
		f.name = ctx.Name
	}
	clock := ctx.Clock()
	f.now = func() int64 { return clock().UnixMilli() }
	f.nowMicros = func() int64 { return clock().UnixMicro() }
	code, path := pb.GetInlineCode(), "inline_code"
	if ds := pb.GetDefaultSourceCode(); ds != nil {
		var err error
		if code, err = source(ds, "default_source_code"); err != nil {
			return nil, fmt.Errorf("%s: %w", Name, err)
		}
		path = "default_source_code"
	}
	if code != "" {
		s, err := compileScript(path, code)
		if err != nil {
			return nil, fmt.Errorf("%s: %s: %w", Name, path, err)
		}
		f.def = s
	}
	for name, ds := range pb.GetSourceCodes() {
		p := fmt.Sprintf("source_codes[%q]", name)
		src, err := source(ds, p)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", Name, err)
		}
		s, err := compileScript(name, src)
		if err != nil {
			return nil, fmt.Errorf("%s: %s: %w", Name, p, err)
		}
		f.named[name] = s
	}
	prefix := ctx.StatPrefix + "lua."
	if p := pb.GetStatPrefix(); p != "" {
		prefix += p + "."
	}
	f.stats, f.release = filter.AcquireStats[Stats](ctx.Stats, prefix)
	f.closing, f.cancel = context.WithCancel(context.Background())
	return f, nil
}

// PerRouteFromAny compiles a typed_per_filter_config entry (LuaPerRoute).
func PerRouteFromAny(cfg *anypb.Any) (*perRoute, error) {
	if cfg.GetTypeUrl() != PerRouteTypeURL {
		return nil, fmt.Errorf("%s: typed_per_filter_config: type %q; want %s", Name, cfg.GetTypeUrl(), PerRouteTypeURL)
	}
	var pb luav3.LuaPerRoute
	if err := cfg.UnmarshalTo(&pb); err != nil {
		return nil, fmt.Errorf("%s: typed_per_filter_config: %w", Name, err)
	}
	if err := pb.ValidateAll(); err != nil {
		return nil, fmt.Errorf("%s: typed_per_filter_config: %w", Name, err)
	}
	if pb.GetOverride() == nil {
		return nil, fmt.Errorf("%s: typed_per_filter_config: one of disabled, name and source_code is required", Name)
	}
	if pb.GetFilterContext() != nil {
		return nil, fmt.Errorf("%s: typed_per_filter_config.filter_context: not implemented by Legate", Name)
	}
	pr := &perRoute{disabled: pb.GetDisabled(), name: pb.GetName()}
	if ds := pb.GetSourceCode(); ds != nil {
		src, err := source(ds, "typed_per_filter_config.source_code")
		if err != nil {
			return nil, fmt.Errorf("%s: %w", Name, err)
		}
		if pr.script, err = compileScript("route source_code", src); err != nil {
			return nil, fmt.Errorf("%s: typed_per_filter_config.source_code: %w", Name, err)
		}
	}
	return pr, nil
}

// Close ends asynchronous calls and drops the filter's hold on its stats.
func (f *Filter) Close() error {
	f.cancel()
	f.async.Wait()
	f.release()
	return nil
}

// scriptFor returns the script that runs for the request: the most specific route level's
// (disabled: none; name: that source_codes entry, none when missing), else the default.
func (f *Filter) scriptFor(x *filter.Exchange) *script {
	if c, ok := x.PerFilterConfig(f.name); ok {
		if pr, ok := c.Config.(*perRoute); ok {
			switch {
			case pr.disabled:
				return nil
			case pr.script != nil:
				return pr.script
			case pr.name != "":
				return f.named[pr.name]
			}
		}
	}
	return f.def
}

// OnRequest runs envoy_on_request; a respond() answers the request.
func (f *Filter) OnRequest(x *filter.Exchange) *filter.Reply {
	s := f.scriptFor(x)
	x.Keep(f, s)
	if s == nil || !s.hasRequest {
		return nil
	}
	c := &call{f: f, x: x, header: x.Request.Header}
	f.run(s, c)
	if c.reply != nil {
		x.Keep(f, (*script)(nil)) // the reply does not run the response script
	}
	return c.reply
}

// OnResponse runs envoy_on_response with the response headers.
func (f *Filter) OnResponse(x *filter.Exchange, h http.Header) {
	kept := x.Kept(f)
	s, _ := kept.(*script)
	if kept == nil {
		// A local reply before OnRequest ran (another filter answered): Envoy runs the
		// response script of the route's filter all the same.
		s = f.scriptFor(x)
	}
	if s == nil || !s.hasResponse {
		return
	}
	f.run(s, &call{f: f, x: x, header: h, response: true})
}

// errStop is raised by respond() to end the script without an error.
var errStop = errors.New("respond")

// run calls the script's function for c's direction with a fresh handle. A script error is
// counted and logged and the stream goes on, as Envoy's scriptError; the state that failed
// is dropped rather than reused.
func (f *Filter) run(s *script, c *call) {
	v, err := s.get()
	if err != nil {
		f.scriptError(err)
		return
	}
	h := newHandle(v.L, c)
	if !c.response {
		f.finish(s, v, c, v.L.CallByParam(glua.P{Fn: v.onRequest, NRet: 0, Protect: true}, h))
		return
	}
	// The response script runs as a coroutine: body() yields until the rewriter has the
	// whole body (responsebody.go).
	co, _ := v.L.NewThread()
	st, err, _ := v.L.Resume(co, v.onResponse, h)
	switch {
	case st == glua.ResumeYield && c.bodyWanted != "":
		// The headers wait for the script, which may still change them after body().
		c.x.HoldResponseHeaders()
		c.x.RewriteResponseBody(func(src filter.Body) io.Reader {
			return &scriptBody{f: f, s: s, v: v, co: co, c: c, src: src}
		})
	case st == glua.ResumeYield:
		f.finish(s, v, c, errors.New("envoy_on_response yielded outside of body()"))
	default:
		f.finish(s, v, c, err)
	}
}

// finish ends a call: an error (but respond()'s) is the script's, and its state is dropped
// rather than reused.
func (f *Filter) finish(s *script, v *vm, c *call, err error) {
	c.dead = true
	if err != nil && !c.stopped {
		f.scriptError(err)
		v.L.Close()
		return
	}
	s.states.Put(v)
}

func (f *Filter) scriptError(err error) {
	f.stats.Errors.Inc()
	msg := err.Error()
	var ae *glua.ApiError
	if errors.As(err, &ae) && ae.Object != nil {
		msg = ae.Object.String()
	}
	f.log.Errorf("script log: %s", msg)
}
