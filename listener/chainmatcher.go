package listener

import (
	"fmt"

	xdscorev3 "github.com/cncf/xds/go/xds/core/v3"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/legateproxy/legate/config"
	"github.com/legateproxy/legate/internal/matcher"
	"github.com/legateproxy/legate/internal/matcher/network"
)

// chainMatcher is a listener's compiled filter_chain_matcher: its actions are the filter
// chains they name, nil for a name no chain has.
type chainMatcher = matcher.Matcher[network.Data, *chain]

// compileChainMatcher compiles l's filter_chain_matcher against chains, the version's filter
// chains, with the network inputs of the registry.
func (m *Manager) compileChainMatcher(name string, l *config.Listener, chains []*chain) (*chainMatcher, error) {
	if m.cfg.Extensions == nil {
		return nil, fmt.Errorf("listener %q: filter_chain_matcher: set; not implemented by this listener manager (no matching inputs)", name)
	}
	byName := make(map[string]*chain, len(chains))
	for _, c := range chains {
		byName[c.cfg.Name] = c
	}
	cm, err := matcher.Compile(l.FilterChainMatcher, "filter_chain_matcher", matcher.Domain[network.Data, *chain]{
		Registry: m.cfg.Extensions,
		Inputs:   network.Inputs,
		Action: func(path string, a *xdscorev3.TypedExtensionConfig) (*chain, error) {
			var chainName wrapperspb.StringValue
			if a.GetTypedConfig() == nil || !a.GetTypedConfig().MessageIs(&chainName) {
				return nil, fmt.Errorf("%s.typed_config: type %q (name %q): not implemented by Legate; a filter chain matcher's action is a google.protobuf.StringValue naming a filter chain", path, a.GetTypedConfig().GetTypeUrl(), a.GetName())
			}
			if err := a.GetTypedConfig().UnmarshalTo(&chainName); err != nil {
				return nil, fmt.Errorf("%s.typed_config: %w", path, err)
			}
			// A name no chain has is no error: the match then fails and the default filter
			// chain serves, as Envoy does.
			return byName[chainName.GetValue()], nil
		},
	})
	if err != nil {
		return nil, fmt.Errorf("listener %q: %w", name, err)
	}
	return cm, nil
}

// matchChain runs the matcher cm on f: the chain its action names, else def (which may be nil).
func matchChain(cm *chainMatcher, f *connFacts, def *chain) *chain {
	d := network.Data{
		Local: f.dst, Remote: f.src, DirectRemote: f.directSrc, IP: f.ip,
		ServerName: f.sni, TransportProtocol: f.transport, ALPN: f.alpn,
	}
	if c, ok := cm.Match(&d); ok && c != nil {
		return c
	}
	return def
}
