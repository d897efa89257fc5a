package httpinspector

import (
	httpinspectorv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/listener/http_inspector/v3"
	"google.golang.org/protobuf/proto"

	"github.com/legateproxy/legate/internal/registry"
	"github.com/legateproxy/legate/listener/listenerfilter"
)

// Register registers the filter; the listener manager builds it for listener_filters.
func Register(b *registry.Builder) {
	registry.Add(b, listenerfilter.Filters, Name, &httpinspectorv3.HttpInspector{}, build)
	b.Alias(registry.ListenerFilter, "envoy.listener.http_inspector", Name)
}

func build(ctx *listenerfilter.Context, _ proto.Message) (listenerfilter.Filter, error) {
	return New(ctx.Stats), nil
}

// OnData sets the application protocol of a plain-text connection once Inspect decides; a
// connection the TLS inspector found to be TLS is left alone.
func (in *Inspector) OnData(b []byte, c *listenerfilter.Conn) (int, listenerfilter.Status) {
	if c.TLS {
		return 0, listenerfilter.Done
	}
	proto, done := in.Inspect(b)
	if !done {
		return 0, listenerfilter.NeedMore
	}
	if proto != "" {
		c.ALPN = []string{proto}
	}
	return 0, listenerfilter.Done
}

// ReadFailed counts a plain-text connection that ended before Inspect decided.
func (in *Inspector) ReadFailed(c *listenerfilter.Conn) {
	if !c.TLS {
		in.ReadError()
	}
}
