package config

import (
	"fmt"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	internallistenerv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/bootstrap/internal_listener/v3"
)

// InternalListenerExtension is the name of the bootstrap extension that enables internal
// listeners.
const InternalListenerExtension = "envoy.bootstrap.internal_listener"

// DefaultInternalBufferSize is the buffer of each direction of an internal connection when
// buffer_size_kb is unset (Envoy's 64 KiB).
const DefaultInternalBufferSize = 64 << 10

// InternalListener is extensions.bootstrap.internal_listener.v3.InternalListener.
type InternalListener struct {
	// BufferSize is buffer_size_kb in bytes: how much one direction of an internal connection
	// holds before its writer waits for the reader.
	BufferSize int
}

// bootstrapExtensions reads bootstrap_extensions: the internal listener extension is the one
// Legate implements; any other is refused.
func (v *validator) bootstrapExtensions(exts []*corev3.TypedExtensionConfig) *InternalListener {
	var out *InternalListener
	for i, e := range exts {
		at := fmt.Sprintf("bootstrap_extensions[%d]", i)
		pb := &internallistenerv3.InternalListener{}
		if !e.GetTypedConfig().MessageIs(pb) {
			v.fail("%s: %q (typed_config %q): not implemented by Legate; only %s is", at, e.GetName(), e.GetTypedConfig().GetTypeUrl(), InternalListenerExtension)
			continue
		}
		if err := e.GetTypedConfig().UnmarshalTo(pb); err != nil {
			v.fail("%s.typed_config: %v", at, err)
			continue
		}
		if out != nil {
			v.fail("%s: %s is configured twice", at, InternalListenerExtension)
			continue
		}
		out = &InternalListener{BufferSize: DefaultInternalBufferSize}
		if kb := pb.GetBufferSizeKb(); kb != nil {
			// PGV holds it in [1, 8192].
			out.BufferSize = int(kb.GetValue()) << 10
		}
	}
	return out
}
