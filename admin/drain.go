package admin

import (
	"io"
	"net/http"

	"github.com/legateproxy/legate/listener"
)

// ListenerDrainer carries out /drain_listeners. *listener.Manager implements it.
type ListenerDrainer interface {
	// DrainListeners stops or drains the listeners r selects; after a graceful drain without
	// skip_exit it calls exit.
	DrainListeners(r listener.DrainRequest, exit func())
}

// DrainListenersEndpoint returns POST /drain_listeners over d. exit is called when a graceful
// drain without skip_exit has ended and the listeners have stopped: the server wires it to
// its shutdown. It may be nil.
func DrainListenersEndpoint(d ListenerDrainer, exit func()) Endpoint {
	return Endpoint{
		Path:    "/drain_listeners",
		Help:    "drain listeners",
		Mutates: true,
		Params: []Param{
			{Name: "graceful", Kind: ParamBool, Help: "When draining listeners, enter a graceful drain period prior to closing listeners. This behaviour and duration is configurable via server options or CLI"},
			{Name: "skip_exit", Kind: ParamBool, Help: "When draining listeners, do not exit after the drain period. This must be used with graceful"},
			{Name: "inboundonly", Kind: ParamBool, Help: "Drains all inbound listeners. traffic_direction field in envoy_v3_api_msg_config.listener.v3.Listener is used to determine whether a listener is inbound or outbound."},
		},
		Handle: func(w http.ResponseWriter, _ *http.Request, q Query) {
			r := listener.DrainRequest{InboundOnly: q.Has("inboundonly"), Graceful: q.Has("graceful"), SkipExit: q.Has("skip_exit")}
			if r.SkipExit && !r.Graceful {
				w.WriteHeader(http.StatusBadRequest)
				io.WriteString(w, "skip_exit requires graceful\n")
				return
			}
			d.DrainListeners(r, exit)
			io.WriteString(w, "OK\n")
		},
	}
}
