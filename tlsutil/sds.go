package tlsutil

import (
	"fmt"
	"sync"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/legateproxy/legate/xds/watch"
)

// sdsType is SDS's resource type for the xDS client's watch API: a Secret decodes to a
// Secret.
type sdsType struct{}

func (sdsType) TypeURL() string { return watch.SecretType }
func (sdsType) Short() string   { return "SDS" }

func (sdsType) Decode(a *anypb.Any) (string, any, error) {
	pb, s, err := DecodeSecret(a)
	if err != nil {
		return pb.GetName(), nil, err
	}
	return pb.GetName(), s, nil
}

func (sdsType) StatPrefix(name string) string { return "sds." + name + "." }

func (sdsType) InitTarget(name string) string { return SDSInitTarget(name) }

// SDSInitTarget is Envoy's name for the init target of the SDS subscription to name.
func SDSInitTarget(name string) string { return "SdsApi " + name }

// DecodeSecret decodes and validates an SDS resource. The message is returned, with its
// name, whenever it unmarshals.
func DecodeSecret(a *anypb.Any) (*tlsv3.Secret, Secret, error) {
	pb := &tlsv3.Secret{}
	name, err := watch.DecodeNamed(a, watch.SecretType, "secret", pb, pb.GetName)
	if err != nil {
		return pb, Secret{}, err
	}
	s, err := SecretFromProto(fmt.Sprintf("secret %q", name), pb)
	if err != nil {
		return pb, Secret{}, err
	}
	return pb, s, nil
}

// SDS is the TLS side of SDS: it watches the secrets that TLS contexts name with an
// sds_config through the xDS client, and serves them, after the static secrets, as a
// SecretProvider. Every accepted change runs the changed hook (the server reloads its
// contexts) after the watch's own.
//
// Concurrency: mu guards watches; it is a leaf lock, and Secret reads the subscriptions'
// values after releasing it. Watch and Secret are safe for concurrent use.
type SDS struct {
	static  SecretProvider
	changed func()
	client  watch.Client

	mu      sync.Mutex
	watches map[*sdsWatch]struct{}
}

// NewSDS returns the secrets of static (may be nil) and, once SetClient gave it the xDS
// client, of SDS. changed (may be nil) runs after an SDS secret changed.
func NewSDS(static SecretProvider, changed func()) *SDS {
	return &SDS{static: static, changed: changed, watches: map[*sdsWatch]struct{}{}}
}

// SetClient gives s the xDS client; it is called once, after the client is built and before
// anything watches.
func (s *SDS) SetClient(c watch.Client) { s.client = c }

// sdsWatch is one watch of a secret; Cancel ends it.
type sdsWatch struct {
	watch.Subscription
	s    *SDS
	name string
}

// Cancel ends the watch and forgets it.
func (w *sdsWatch) Cancel() {
	w.s.mu.Lock()
	delete(w.s.watches, w)
	w.s.mu.Unlock()
	w.Subscription.Cancel()
}

// Watch subscribes to the secret called name from the config source cs. onChange (may be
// nil) runs after each change of the secret, before the changed hook; it is called without
// locks on an xDS goroutine.
func (s *SDS) Watch(cs *corev3.ConfigSource, name string, onChange func()) (watch.Subscription, error) {
	sub, err := s.client.Watch(sdsType{}, cs, name, watch.Func(func(any) {
		if onChange != nil {
			onChange()
		}
		if s.changed != nil {
			s.changed()
		}
	}))
	if err != nil {
		return nil, err
	}
	w := &sdsWatch{Subscription: sub, s: s, name: name}
	s.mu.Lock()
	s.watches[w] = struct{}{}
	s.mu.Unlock()
	return w, nil
}

// WatchSecrets subscribes to the secrets a TLS context names with an sds_config; path names
// the context in errors. The returned function ends the subscriptions.
func (s *SDS) WatchSecrets(path string, common *tlsv3.CommonTlsContext) (func(), error) {
	var subs []watch.Subscription
	release := func() {
		for _, sub := range subs {
			sub.Cancel()
		}
	}
	for _, c := range sdsSecretConfigs(common) {
		if c.GetName() == "" {
			release()
			return nil, fmt.Errorf("%s: name is empty; an SDS secret needs a name", path)
		}
		sub, err := s.Watch(c.GetSdsConfig(), c.GetName(), nil)
		if err != nil {
			release()
			return nil, fmt.Errorf("%s: sds_config.%w", path, err)
		}
		subs = append(subs, sub)
	}
	return release, nil
}

// sdsSecretConfigs are the secrets of a TLS context that name an sds_config.
func sdsSecretConfigs(c *tlsv3.CommonTlsContext) []*tlsv3.SdsSecretConfig {
	var out []*tlsv3.SdsSecretConfig
	all := append([]*tlsv3.SdsSecretConfig{}, c.GetTlsCertificateSdsSecretConfigs()...)
	all = append(all, c.GetValidationContextSdsSecretConfig(), c.GetCombinedValidationContext().GetValidationContextSdsSecretConfig())
	for _, sc := range all {
		if sc.GetSdsConfig() != nil {
			out = append(out, sc)
		}
	}
	return out
}

// Secret implements SecretProvider: a static secret of that name, else the current value of
// a watch of it. It never blocks on the network.
func (s *SDS) Secret(name string) (Secret, bool) {
	if s.static != nil {
		if v, ok := s.static.Secret(name); ok {
			return v, true
		}
	}
	var subs []watch.Subscription
	s.mu.Lock()
	for w := range s.watches {
		if w.name == name {
			subs = append(subs, w.Subscription)
		}
	}
	s.mu.Unlock()
	for _, sub := range subs {
		if v, ok := sub.Value().(Secret); ok {
			return v, true
		}
	}
	return Secret{}, false
}
