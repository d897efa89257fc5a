package lua

import (
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"net/netip"
	"slices"

	glua "github.com/yuin/gopher-lua"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/legateproxy/legate/tlsutil"
)

func handleStreamInfo(L *glua.LState) int {
	L.Push(newObject(L, typeStreamInfo, handleArg(L)))
	return 1
}

func objectCall(L *glua.LState) *call {
	c, _ := L.CheckUserData(1).Value.(*call)
	return checkCall(L, c)
}

func pushString(L *glua.LState, s string) int {
	L.Push(glua.LString(s))
	return 1
}

// pushAddr pushes an address as "ip:port" ("" when unknown).
func pushAddr(L *glua.LState, a netip.AddrPort) int {
	if !a.IsValid() {
		return pushString(L, "")
	}
	return pushString(L, a.String())
}

var streamInfoMethods = map[string]glua.LGFunction{
	"protocol": func(L *glua.LState) int {
		return pushString(L, objectCall(L).x.Connection().Protocol)
	},
	"downstreamLocalAddress": func(L *glua.LState) int {
		return pushAddr(L, objectCall(L).x.Connection().Local)
	},
	"downstreamDirectRemoteAddress": func(L *glua.LState) int {
		return pushAddr(L, objectCall(L).x.Connection().DirectRemote)
	},
	"downstreamRemoteAddress": func(L *glua.LState) int {
		return pushAddr(L, objectCall(L).x.Connection().Remote)
	},
	"requestedServerName": func(L *glua.LState) int {
		return pushString(L, objectCall(L).x.Connection().ServerName)
	},
	"routeName": func(L *glua.LState) int {
		c := objectCall(L)
		name := ""
		if c.x.Downstream != nil {
			if m := c.x.Downstream.Route(); m != nil && m.Route != nil {
				name = m.Route.Name
			}
		}
		return pushString(L, name)
	},
	"dynamicMetadata": func(L *glua.LState) int {
		L.Push(newObject(L, typeDynMeta, objectCall(L)))
		return 1
	},
	"downstreamSslConnection": func(L *glua.LState) int { return pushSSL(L, objectCall(L)) },
}

var dynMetaMethods = map[string]glua.LGFunction{
	// get(namespace) is the namespace's table, or nil.
	"get": func(L *glua.LState) int {
		c := objectCall(L)
		st := c.x.Metadata[L.CheckString(2)]
		if st == nil {
			L.Push(glua.LNil)
			return 1
		}
		L.Push(structToLua(L, st))
		return 1
	},
	// set(namespace, key, value) sets one key of a namespace.
	"set": func(L *glua.LState) int {
		c := objectCall(L)
		ns, key := L.CheckString(2), L.CheckString(3)
		c.x.SetMetadataValue(ns, key, luaToValue(L, L.CheckAny(4), 0))
		return 0
	},
}

// dynMetaPairs iterates over (namespace, table) pairs, by namespace.
func dynMetaPairs(L *glua.LState) int {
	c := objectCall(L)
	names := make([]string, 0, len(c.x.Metadata))
	for k := range c.x.Metadata {
		names = append(names, k)
	}
	slices.Sort(names)
	return pushPairs(L, len(names), func(i int) (glua.LValue, glua.LValue) {
		return glua.LString(names[i]), structToLua(L, c.x.Metadata[names[i]])
	})
}

func pushPairs(L *glua.LState, n int, at func(i int) (k, v glua.LValue)) int {
	L.Push(iterator(L, n, at))
	L.Push(glua.LNil)
	L.Push(glua.LNil)
	return 3
}

// routeMetadata is the route's filter_metadata under the filter's name (Envoy's
// handle:metadata()), falling back to the canonical name; nil when it has none.
func (c *call) routeMetadata() *structpb.Struct {
	if c.x.Downstream == nil {
		return nil
	}
	m := c.x.Downstream.Route()
	if m == nil || m.Route == nil {
		return nil
	}
	if st, ok := m.Route.Metadata[c.f.name]; ok {
		return st
	}
	return m.Route.Metadata[Name]
}

func handleMetadata(L *glua.LState) int {
	L.Push(newObject(L, typeMetadata, handleArg(L)))
	return 1
}

var metadataMethods = map[string]glua.LGFunction{
	"get": func(L *glua.LState) int {
		c := objectCall(L)
		v, ok := c.routeMetadata().GetFields()[L.CheckString(2)]
		if !ok {
			L.Push(glua.LNil)
			return 1
		}
		L.Push(valueToLua(L, v))
		return 1
	},
}

func metadataPairs(L *glua.LState) int {
	c := objectCall(L)
	fields := c.routeMetadata().GetFields()
	keys := make([]string, 0, len(fields))
	for k := range fields {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return pushPairs(L, len(keys), func(i int) (glua.LValue, glua.LValue) {
		return glua.LString(keys[i]), valueToLua(L, fields[keys[i]])
	})
}

func structToLua(L *glua.LState, st *structpb.Struct) *glua.LTable {
	t := L.NewTable()
	for k, v := range st.GetFields() {
		t.RawSetString(k, valueToLua(L, v))
	}
	return t
}

func valueToLua(L *glua.LState, v *structpb.Value) glua.LValue {
	switch x := v.GetKind().(type) {
	case *structpb.Value_StringValue:
		return glua.LString(x.StringValue)
	case *structpb.Value_NumberValue:
		return glua.LNumber(x.NumberValue)
	case *structpb.Value_BoolValue:
		return glua.LBool(x.BoolValue)
	case *structpb.Value_StructValue:
		return structToLua(L, x.StructValue)
	case *structpb.Value_ListValue:
		t := L.NewTable()
		for _, e := range x.ListValue.GetValues() {
			t.Append(valueToLua(L, e))
		}
		return t
	}
	return glua.LNil
}

// maxDepth bounds the nesting of a table converted to metadata (a table may contain itself).
const maxDepth = 32

// luaToValue converts a Lua value to metadata: a table whose keys are 1..n is a list, any
// other table a struct of its string keys.
func luaToValue(L *glua.LState, lv glua.LValue, depth int) *structpb.Value {
	if depth > maxDepth {
		L.RaiseError("dynamicMetadata:set(): table nested deeper than %d", maxDepth)
	}
	switch x := lv.(type) {
	case glua.LString:
		return structpb.NewStringValue(string(x))
	case glua.LNumber:
		return structpb.NewNumberValue(float64(x))
	case glua.LBool:
		return structpb.NewBoolValue(bool(x))
	case *glua.LTable:
		if n := x.Len(); n > 0 {
			list := &structpb.ListValue{}
			for i := 1; i <= n; i++ {
				list.Values = append(list.Values, luaToValue(L, x.RawGetInt(i), depth+1))
			}
			return structpb.NewListValue(list)
		}
		st := &structpb.Struct{Fields: map[string]*structpb.Value{}}
		x.ForEach(func(k, v glua.LValue) {
			ks, ok := k.(glua.LString)
			if !ok {
				L.RaiseError("dynamicMetadata:set(): table keys must be strings")
			}
			st.Fields[string(ks)] = luaToValue(L, v, depth+1)
		})
		return structpb.NewStructValue(st)
	case *glua.LNilType:
		return structpb.NewNullValue()
	}
	L.RaiseError("dynamicMetadata:set(): a %s cannot be metadata", lv.Type())
	return nil
}

func handleConnection(L *glua.LState) int {
	L.Push(newObject(L, typeConnection, handleArg(L)))
	return 1
}

var connectionMethods = map[string]glua.LGFunction{
	"ssl": func(L *glua.LState) int { return pushSSL(L, objectCall(L)) },
}

// pushSSL pushes the connection's TLS object, or nil for plain text.
func pushSSL(L *glua.LState, c *call) int {
	st := c.x.Connection().TLS
	if st == nil {
		L.Push(glua.LNil)
		return 1
	}
	L.Push(newObject(L, typeSSL, &sslInfo{c: c, st: st}))
	return 1
}

type sslInfo struct {
	c  *call
	st *tls.ConnectionState
}

func sslArg(L *glua.LState) *tls.ConnectionState {
	s, _ := L.CheckUserData(1).Value.(*sslInfo)
	if s == nil {
		L.RaiseError("not a connection's ssl")
	}
	checkCall(L, s.c)
	return s.st
}

var sslMethods = map[string]glua.LGFunction{
	"peerCertificatePresented": func(L *glua.LState) int {
		L.Push(glua.LBool(len(sslArg(L).PeerCertificates) > 0))
		return 1
	},
	"peerCertificateValidated": func(L *glua.LState) int {
		L.Push(glua.LBool(len(sslArg(L).VerifiedChains) > 0))
		return 1
	},
	"tlsVersion": func(L *glua.LState) int {
		L.Push(glua.LString(tlsutil.VersionName(sslArg(L).Version)))
		return 1
	},
	"ciphersuiteString": func(L *glua.LState) int {
		L.Push(glua.LString(tlsutil.CipherName(sslArg(L).CipherSuite)))
		return 1
	},
	"sha256PeerCertificateDigest": func(L *glua.LState) int {
		st := sslArg(L)
		if len(st.PeerCertificates) == 0 {
			L.Push(glua.LString(""))
			return 1
		}
		sum := sha256.Sum256(st.PeerCertificates[0].Raw)
		L.Push(glua.LString(hex.EncodeToString(sum[:])))
		return 1
	},
	"uriSanPeerCertificate": func(L *glua.LState) int {
		t := L.NewTable()
		if st := sslArg(L); len(st.PeerCertificates) > 0 {
			for _, u := range st.PeerCertificates[0].URIs {
				t.Append(glua.LString(u.String()))
			}
		}
		L.Push(t)
		return 1
	},
	"dnsSansPeerCertificate": func(L *glua.LState) int {
		t := L.NewTable()
		if st := sslArg(L); len(st.PeerCertificates) > 0 {
			for _, d := range st.PeerCertificates[0].DNSNames {
				t.Append(glua.LString(d))
			}
		}
		L.Push(t)
		return 1
	},
}
