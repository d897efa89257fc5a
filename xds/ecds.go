package xds

import (
	"fmt"
	"sort"
	"time"

	adminv3 "github.com/envoyproxy/go-control-plane/envoy/admin/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/legateproxy/legate/stats"
	"github.com/legateproxy/legate/xds/resource"
)

// ecdsStats are the ECDS-only stats of an HTTP filter configuration subscription, next to its
// subscription stats under extension_config_discovery.http_filter.<name>. As in Envoy,
// config_reload counts accepted changes, config_fail rejected configurations and initial
// fetch timeouts, and config_conflict filters that found the current configuration unfit
// (its type not in their type_urls, or refused by their factory) when they subscribed.
type ecdsStats struct {
	ConfigConflict stats.Counter `stat:"config_conflict"`
	ConfigFail     stats.Counter `stat:"config_fail"`
	ConfigReload   stats.Counter `stat:"config_reload"`
}

var ecdsKind = &namedKind{
	typeURL: resource.ExtensionConfigType,
	short:   "ECDS",
	decode: func(_ *Client, a *anypb.Any) (string, any, error) {
		tc, err := resource.DecodeExtensionConfig(a)
		if err != nil {
			return resource.ExtensionConfigName(a), nil, err
		}
		return tc.GetName(), tc, nil
	},
	statPrefix: func(name, _ string) string { return "extension_config_discovery.http_filter." + name + "." },
	initTarget: func(name string) string { return "ExtensionConfigSubscription " + name },
	extra: func(st *stats.Store, prefix string) subExtra {
		s := &ecdsStats{}
		return subExtra{
			reg:     st.Register(prefix, s),
			stats:   s,
			changed: func(time.Time, time.Duration) { s.ConfigReload.Inc() },
			failed:  func() { s.ConfigFail.Inc() },
		}
	},
	vet: vetExtensions,
}

// vetExtensions runs the filters' checks on the new configurations of u (those a subscription
// with checks would take): first every subscriber's quick check (type_urls), then every full
// check (the filter factories), so that nothing is built for a configuration some filter's
// type_urls exclude. It returns, by resource index, the first error and the discards of the
// full checks that accepted (all of them released when a later check refuses). Checks run
// without locks, in the order the filters subscribed; a configuration that fails to decode
// is left to apply.
func vetExtensions(h *namedHandler, src *mux, u update) map[int]vetted {
	type job struct {
		i      int
		checks []valueCheck
	}
	var jobs []job
	h.mu.Lock()
	for i, a := range u.resources {
		sub := h.subs[serviceKey(src, resource.ExtensionConfigName(a))]
		if sub == nil || len(sub.checks) == 0 || (sub.raw != nil && proto.Equal(sub.raw, a)) {
			continue
		}
		ids := make([]uint64, 0, len(sub.checks))
		for id := range sub.checks {
			ids = append(ids, id)
		}
		sort.Slice(ids, func(a, b int) bool { return ids[a] < ids[b] })
		j := job{i: i}
		for _, id := range ids {
			j.checks = append(j.checks, sub.checks[id])
		}
		jobs = append(jobs, j)
	}
	h.mu.Unlock()
	var out map[int]vetted
	for _, j := range jobs {
		tc, err := resource.DecodeExtensionConfig(u.resources[j.i])
		if err != nil {
			continue
		}
		v := vetChecks(j.checks, tc)
		if v.err != nil || v.discard != nil {
			if out == nil {
				out = map[int]vetted{}
			}
			out[j.i] = v
		}
	}
	return out
}

// vetChecks runs checks on tc: the quick ones, then the full ones (those that stand in for
// others only when no other has one). When one refuses, what the full checks before it built
// is released at once, and the error returned.
func vetChecks(checks []valueCheck, tc *corev3.TypedExtensionConfig) vetted {
	for _, c := range checks {
		if c.quick == nil {
			continue
		}
		if err := c.quick(tc); err != nil {
			return vetted{err: err}
		}
	}
	own := false
	for _, c := range checks {
		own = own || (c.full != nil && !c.standIn)
	}
	var v vetted
	for _, c := range checks {
		if c.full == nil || (c.standIn && own) {
			continue
		}
		discard, err := c.full(tc)
		if err != nil {
			for _, d := range v.discard {
				d()
			}
			return vetted{err: err}
		}
		if discard != nil {
			v.discard = append(v.discard, discard)
		}
	}
	return v
}

// extensionCheck is the check of one watch of the configuration called name: its type must
// be one of typeURLs (config_discovery.type_urls; none: any type), then check (the filter's
// factory; nil for none) must accept it.
func extensionCheck(name string, typeURLs []string, check func(*corev3.TypedExtensionConfig) (func(), error)) valueCheck {
	var vc valueCheck
	if len(typeURLs) > 0 {
		vc.quick = func(v any) error {
			tc, _ := v.(*corev3.TypedExtensionConfig)
			if err := resource.CheckExtensionType(typeURLs, tc); err != nil {
				return fmt.Errorf("extension config %q: %w", name, err)
			}
			return nil
		}
	}
	if check != nil {
		vc.full = func(v any) (func(), error) {
			tc, _ := v.(*corev3.TypedExtensionConfig)
			discard, err := check(tc)
			if err != nil {
				return nil, fmt.Errorf("extension config %q: %w", name, err)
			}
			return discard, nil
		}
	}
	return vc
}

// setCheck adds check to the checks of r's subscription, which vet runs on every new
// resource before the watchers see it, and returns the subscription's current value and
// generation.
func (r watchRef) setCheck(check valueCheck) (any, uint64) {
	r.h.mu.Lock()
	defer r.h.mu.Unlock()
	if _, live := r.sub.watchers[r.id]; live && (check.quick != nil || check.full != nil) {
		if r.sub.checks == nil {
			r.sub.checks = map[uint64]valueCheck{}
		}
		r.sub.checks[r.id] = check
	}
	return r.sub.val, r.sub.gen
}

// conflict counts a filter that found the current configuration of r's subscription unfit.
func (r watchRef) conflict() {
	r.h.mu.Lock()
	defer r.h.mu.Unlock()
	if s, ok := r.sub.extra.stats.(*ecdsStats); ok {
		s.ConfigConflict.Inc()
	}
}

// WatchExtensionConfig implements httpproxy.ExtensionConfigProvider: it subscribes to the ECDS
// resource (TypedExtensionConfig) called name from cd.config_source — one subscription per
// name and transport, shared by every HTTP filter that discovers it, with its stats under
// extension_config_discovery.http_filter.<name>. — and calls update with every accepted new
// version (gen grows), and with nil when the first fetch times out or fails, or the resource
// is removed.
//
// Every new version must suit every watcher of the subscription before any of them sees it,
// as in Envoy (FilterConfigSubscription::onConfigUpdate): its typed_config type must be one of
// each watcher's type_urls (all of those are checked before any factory runs), then each
// check (nil: none) must accept it. Otherwise the response is NACKed with the error (naming
// the configuration and the rule), update_rejected and config_fail count it, the config dump
// shows it as error_state, and the previous version keeps serving; the discard of every check
// that accepted the rejected version is called at once.
//
// It returns the current configuration — nil until one arrives, and nil when it does not suit
// this filter (config_conflict counts that; the filter then serves its default) — its
// generation and cancel. check, discard and update run on an xDS goroutine without xds locks
// and must not block; check runs before the update that carries the configuration. Safe for
// concurrent use; a subscription made before Run registers an init target.
func (c *Client) WatchExtensionConfig(name string, cd *corev3.ExtensionConfigSource,
	check func(tc *corev3.TypedExtensionConfig) (discard func(), err error),
	update func(gen uint64, tc *corev3.TypedExtensionConfig)) (*corev3.TypedExtensionConfig, uint64, func(), error) {
	src, err := resource.SourceFromProto(cd.GetConfigSource())
	if err != nil {
		return nil, 0, nil, fmt.Errorf("config_discovery.config_source.%w", err)
	}
	if src.Self {
		return nil, 0, nil, fmt.Errorf("config_discovery.config_source.self is not supported")
	}
	ref, _, _, _, err := c.ecds.subscribe(src, name, "", func(gen uint64, v any) {
		tc, _ := v.(*corev3.TypedExtensionConfig)
		update(gen, tc)
	})
	if err != nil {
		return nil, 0, nil, fmt.Errorf("extension config %q: %w", name, err)
	}
	vc := extensionCheck(name, cd.GetTypeUrls(), check)
	val, gen := ref.setCheck(vc)
	tc, _ := val.(*corev3.TypedExtensionConfig)
	if tc != nil {
		if v := vetChecks([]valueCheck{vc}, tc); v.err != nil {
			ref.conflict()
			c.log.Warnf("xds: ECDS: %v; the filter serves its default configuration", v.err)
			tc = nil
		}
	}
	return tc, gen, ref.release, nil
}

// watchListenerExtension makes r (a warming listener's wait for the ECDS configuration of
// one of its HTTP filters, d) check new configurations as that filter will once built: the
// type must be one of d's type_urls, and Config.ExtensionCheck (the HTTP filter factories)
// must accept it. So a first configuration the filter would refuse is NACKed and ends the
// listener's wait, as Envoy's providers, made with the listener, check it. The factory check
// stands in for the filters: it runs only while no filter of the subscription has a check of
// its own (they make the same check, and their errors name the connection manager).
func (c *Client) watchListenerExtension(r watchRef, d resource.Dependency) {
	var check func(*corev3.TypedExtensionConfig) (func(), error)
	if fc := c.cfg.ExtensionCheck; fc != nil {
		check = func(tc *corev3.TypedExtensionConfig) (func(), error) { return nil, fc(tc) }
	}
	vc := extensionCheck(d.Name, d.TypeURLs, check)
	vc.standIn = true
	r.setCheck(vc)
}

// EcdsConfigDump returns the "ecds_filter_http" config dump: an ecds_filters entry per
// subscription that has a configuration or an error, with version_info, last_updated and
// error_state. match filters by configuration name (nil for all). Safe for concurrent use.
func (c *Client) EcdsConfigDump(match func(string) bool) *adminv3.EcdsConfigDump {
	out := &adminv3.EcdsConfigDump{}
	for _, st := range c.ecds.states() {
		if (match != nil && !match(st.name)) || (st.raw == nil && st.failure == nil) {
			continue
		}
		d := &adminv3.EcdsConfigDump_EcdsFilterConfig{VersionInfo: st.version, EcdsFilter: st.raw, ErrorState: st.failure.state()}
		if st.raw != nil {
			d.LastUpdated = timestamppb.New(st.updated)
		}
		out.EcdsFilters = append(out.EcdsFilters, d)
	}
	return out
}
