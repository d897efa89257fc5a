package admin

import (
	"bufio"
	"net/http"

	adminv3 "github.com/envoyproxy/go-control-plane/envoy/admin/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"

	"github.com/legateproxy/legate/config"
	"github.com/legateproxy/legate/internal/pbjson"
	"github.com/legateproxy/legate/listener"
)

// ListenerSource is what /listeners reads: the active listeners in insertion order with
// their bound addresses. *listener.Manager implements it.
type ListenerSource interface {
	Statuses() []listener.Status
}

// ListenersEndpoint returns /listeners over src: one "<name>::<address>" line per listening
// address, or envoy.admin.v3.Listeners with format=json.
func ListenersEndpoint(src ListenerSource) Endpoint {
	return Endpoint{
		Path: "/listeners",
		Help: "print listener info",
		Params: []Param{
			{Name: "format", Kind: ParamEnum, Help: "File format to use", Choices: []string{"text", "json"}},
		},
		Handle: func(w http.ResponseWriter, _ *http.Request, q Query) {
			statuses := src.Statuses()
			if q.Get("format") == "json" {
				writeProto(w, listenersProto(statuses), pbjson.OmitDefaults)
				return
			}
			b := bufio.NewWriter(w)
			for _, s := range statuses {
				for _, a := range s.Addresses {
					b.WriteString(s.Name)
					b.WriteString("::")
					b.WriteString(a.String())
					b.WriteByte('\n')
				}
			}
			b.Flush()
		},
	}
}

// listenersProto builds envoy.admin.v3.Listeners.
func listenersProto(statuses []listener.Status) *adminv3.Listeners {
	out := &adminv3.Listeners{}
	for _, s := range statuses {
		ls := &adminv3.ListenerStatus{Name: s.Name}
		for i, a := range s.Addresses {
			if i == 0 {
				ls.LocalAddress = addressProto(a)
				continue
			}
			ls.AdditionalLocalAddresses = append(ls.AdditionalLocalAddresses, addressProto(a))
		}
		out.ListenerStatuses = append(out.ListenerStatuses, ls)
	}
	return out
}

// addressProto is a listener address as core.Address.
func addressProto(a config.Address) *corev3.Address {
	if a.Kind == config.PipeAddress {
		return &corev3.Address{Address: &corev3.Address_Pipe{Pipe: &corev3.Pipe{Path: a.Path}}}
	}
	return &corev3.Address{Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{
		Address:       a.Host,
		PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: a.Port},
	}}}
}
