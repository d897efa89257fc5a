package listener

import (
	"strconv"
	"strings"

	"github.com/legateproxy/legate/stats"
)

// managerStats are the listener_manager.* stats.
type managerStats struct {
	ListenerAdded          stats.Counter `stat:"listener_added"`
	ListenerCreateFailure  stats.Counter `stat:"listener_create_failure"`
	ListenerCreateSuccess  stats.Counter `stat:"listener_create_success"`
	ListenerInPlaceUpdated stats.Counter `stat:"listener_in_place_updated"`
	ListenerModified       stats.Counter `stat:"listener_modified"`
	ListenerRemoved        stats.Counter `stat:"listener_removed"`
	ListenerStopped        stats.Counter `stat:"listener_stopped"`
	// ListenerStoppedSkipped is Legate's: the LDS listeners skipped because
	// their traffic direction is stopped (Envoy skips them with a debug log).
	ListenerStoppedSkipped    stats.Counter `stat:"listener_stopped_skipped"`
	TotalFilterChainsDraining stats.Gauge   `stat:"total_filter_chains_draining,accumulate"`
	TotalListenersActive      stats.Gauge   `stat:"total_listeners_active,never_import"`
	TotalListenersDraining    stats.Gauge   `stat:"total_listeners_draining,never_import"`
	TotalListenersWarming     stats.Gauge   `stat:"total_listeners_warming,never_import"`
	WorkersStarted            stats.Gauge   `stat:"workers_started,never_import"`
}

// listenerStats are the listener.<address|stat_prefix>.* stats. Listeners with the same stat
// prefix (an updated listener and the version it replaces) share one set, as Envoy's stats of
// the same name are one stat.
type listenerStats struct {
	DownstreamCxDestroy                       stats.Counter   `stat:"downstream_cx_destroy"`
	DownstreamCxOverflow                      stats.Counter   `stat:"downstream_cx_overflow"`
	DownstreamCxTotal                         stats.Counter   `stat:"downstream_cx_total"`
	DownstreamCxTransportSocketConnectTimeout stats.Counter   `stat:"downstream_cx_transport_socket_connect_timeout"`
	DownstreamCxOverloadReject                stats.Counter   `stat:"downstream_cx_overload_reject"`
	DownstreamGlobalCxOverflow                stats.Counter   `stat:"downstream_global_cx_overflow"`
	DownstreamPreCxTimeout                    stats.Counter   `stat:"downstream_pre_cx_timeout"`
	DownstreamListenerFilterRemoteClose       stats.Counter   `stat:"downstream_listener_filter_remote_close"`
	DownstreamListenerFilterError             stats.Counter   `stat:"downstream_listener_filter_error"`
	NoFilterChainMatch                        stats.Counter   `stat:"no_filter_chain_match"`
	DownstreamCxActive                        stats.Gauge     `stat:"downstream_cx_active,accumulate"`
	DownstreamPreCxActive                     stats.Gauge     `stat:"downstream_pre_cx_active,accumulate"`
	DownstreamCxLengthMs                      stats.Histogram `stat:"downstream_cx_length_ms,unit=ms"`
	ConnectionsAcceptedPerSocketEvent         stats.Histogram `stat:"connections_accepted_per_socket_event"`
}

// workerStats are listener.<address>.worker_<N>.*: the connections handed to one worker.
type workerStats struct {
	DownstreamCxTotal  stats.Counter `stat:"downstream_cx_total"`
	DownstreamCxActive stats.Gauge   `stat:"downstream_cx_active,accumulate"`
}

// sharedStats is one registered listenerStats with the workers' stats and a reference count.
type sharedStats struct {
	prefix  string
	s       listenerStats
	workers []workerStats
	udp     *udpListenerStats // nil but for UDP listeners
	regs    []*stats.Registration
	refs    int
}

func newSharedStats(store *stats.Store, prefix string, workers int) *sharedStats {
	sh := &sharedStats{prefix: prefix, workers: make([]workerStats, workers)}
	sh.regs = append(sh.regs, store.Register(prefix, &sh.s))
	for i := range sh.workers {
		sh.regs = append(sh.regs, store.Register(prefix+"worker_"+strconv.Itoa(i)+".", &sh.workers[i]))
	}
	return sh
}

func (sh *sharedStats) unregister() {
	for _, r := range sh.regs {
		r.Unregister()
	}
}

// statPrefix returns "listener.<stat_prefix or address>." with Envoy's sanitising of ':' to
// '_' (so "[::1]:80" becomes "[__1]_80").
func statPrefix(statPrefix, address string) string {
	name := statPrefix
	if name == "" {
		name = address
	}
	return "listener." + strings.ReplaceAll(name, ":", "_") + "."
}
