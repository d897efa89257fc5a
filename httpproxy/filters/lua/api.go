package lua

import (
	glua "github.com/yuin/gopher-lua"
)

// The Lua types of Envoy's API objects, each a userdata whose metatable's __index finds its
// methods; a name the type lacks is a method that raises "not implemented by Legate".
const (
	typeHandle     = "handle"
	typeHeaders    = "headers"
	typeBuffer     = "buffer"
	typeStreamInfo = "streamInfo"
	typeDynMeta    = "dynamicMetadata"
	typeMetadata   = "metadata"
	typeConnection = "connection"
	typeSSL        = "ssl"
)

// api lists each type's methods and, for iterable types, its __pairs.
var api = map[string]struct {
	methods map[string]glua.LGFunction
	pairs   glua.LGFunction
}{
	typeHandle:     {methods: handleMethods},
	typeHeaders:    {methods: headerMethods, pairs: headersPairs},
	typeBuffer:     {methods: bufferMethods},
	typeStreamInfo: {methods: streamInfoMethods},
	typeDynMeta:    {methods: dynMetaMethods, pairs: dynMetaPairs},
	typeMetadata:   {methods: metadataMethods, pairs: metadataPairs},
	typeConnection: {methods: connectionMethods},
	typeSSL:        {methods: sslMethods},
}

// installAPI gives a new state the metatables of the API types and a pairs that honours
// __pairs (gopher-lua's, Lua 5.1's, iterates tables only; Envoy's LuaJIT honours it).
func installAPI(L *glua.LState) {
	for typ, t := range api {
		mt := L.NewTypeMetatable(typ)
		methods := L.SetFuncs(L.NewTable(), t.methods)
		label := typ
		mt.RawSetString("__index", L.NewFunction(func(L *glua.LState) int {
			name := L.CheckString(2)
			if fn := methods.RawGetString(name); fn != glua.LNil {
				L.Push(fn)
				return 1
			}
			L.Push(L.NewFunction(func(L *glua.LState) int {
				L.RaiseError("%s:%s() is not implemented by Legate", label, name)
				return 0
			}))
			return 1
		}))
		if t.pairs != nil {
			mt.RawSetString("__pairs", L.NewFunction(t.pairs))
		}
	}
	// os.exit would end the proxy: a script error instead.
	if os, ok := L.GetGlobal("os").(*glua.LTable); ok {
		os.RawSetString("exit", L.NewFunction(func(L *glua.LState) int {
			L.RaiseError("os.exit() is not available to scripts in Legate")
			return 0
		}))
	}
	basePairs := L.GetGlobal("pairs")
	L.SetGlobal("pairs", L.NewFunction(func(L *glua.LState) int {
		if ud, ok := L.Get(1).(*glua.LUserData); ok {
			if mm := L.GetMetaField(ud, "__pairs"); mm != glua.LNil {
				L.Push(mm)
				L.Push(ud)
				L.Call(1, 3)
				return 3
			}
		}
		L.Push(basePairs)
		L.Push(L.Get(1))
		L.Call(1, 3)
		return 3
	}))
}

// newObject makes a userdata of an API type holding v.
func newObject(L *glua.LState, typ string, v any) *glua.LUserData {
	ud := L.NewUserData()
	ud.Value = v
	L.SetMetatable(ud, L.GetTypeMetatable(typ))
	return ud
}

// iterator returns a Lua iterator function over n pairs made by at(i).
func iterator(L *glua.LState, n int, at func(i int) (k, v glua.LValue)) *glua.LFunction {
	i := 0
	return L.NewFunction(func(L *glua.LState) int {
		if i >= n {
			L.Push(glua.LNil)
			return 1
		}
		k, v := at(i)
		i++
		L.Push(k)
		L.Push(v)
		return 2
	})
}
