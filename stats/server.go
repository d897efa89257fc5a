package stats

// ServerStats is Envoy's ALL_SERVER_STATS plus the compilation-settings gauge
// and the main thread's watchdog counters: every server.* stat, with Envoy's
// names and gauge import modes. The server registers it once:
//
//	store.Register("server.", &srv)
//
// Worker watchdogs are registered per worker as WatchdogStats under
// "server.worker_<N>.", and the guard-dog totals under "main_thread." and
// "workers.". The server refreshes the gauges before every flush
// (Store.BeforeFlush).
type ServerStats struct {
	DebugAssertionFailures Counter `stat:"debug_assertion_failures"`
	EnvoyBugFailures       Counter `stat:"envoy_bug_failures"`
	EnvoyNotifications     Counter `stat:"envoy_notifications"`
	DynamicUnknownFields   Counter `stat:"dynamic_unknown_fields"`
	StaticUnknownFields    Counter `stat:"static_unknown_fields"`
	WIPProtos              Counter `stat:"wip_protos"`
	DroppedStatFlushes     Counter `stat:"dropped_stat_flushes"`

	Concurrency                          Gauge `stat:"concurrency,never_import"`
	DaysUntilFirstCertExpiring           Gauge `stat:"days_until_first_cert_expiring,never_import"`
	SecondsUntilFirstOCSPResponseExpires Gauge `stat:"seconds_until_first_ocsp_response_expiring,never_import"`
	HotRestartEpoch                      Gauge `stat:"hot_restart_epoch,never_import"`
	HotRestartGeneration                 Gauge `stat:"hot_restart_generation,accumulate"`
	Live                                 Gauge `stat:"live,never_import"`
	MemoryAllocated                      Gauge `stat:"memory_allocated,accumulate"`
	MemoryHeapSize                       Gauge `stat:"memory_heap_size,accumulate"`
	MemoryPhysicalSize                   Gauge `stat:"memory_physical_size,accumulate"`
	ParentConnections                    Gauge `stat:"parent_connections,accumulate"`
	State                                Gauge `stat:"state,never_import"`
	StatsRecentLookups                   Gauge `stat:"stats_recent_lookups,never_import"`
	TotalConnections                     Gauge `stat:"total_connections,accumulate"`
	Uptime                               Gauge `stat:"uptime,accumulate"`
	Version                              Gauge `stat:"version,never_import"`

	InitializationTimeMs Histogram `stat:"initialization_time_ms,unit=ms"`

	// CompilationSettings is server.compilation_settings.*.
	CompilationSettings struct {
		FIPSMode Gauge `stat:"fips_mode,never_import"`
	} `stat:"compilation_settings."`

	// MainThread is server.main_thread.watchdog_*.
	MainThread WatchdogStats `stat:"main_thread."`
}

// WatchdogStats are one guard-dog watched thread's counters
// (server.main_thread., server.worker_<N>.) or the guard-dog totals
// (main_thread., workers.).
type WatchdogStats struct {
	WatchdogMiss     Counter `stat:"watchdog_miss"`
	WatchdogMegaMiss Counter `stat:"watchdog_mega_miss"`
}

// DispatcherStats are the event-loop histograms created with
// enable_dispatcher_stats, under "server.dispatcher." for the main thread and
// "listener_manager.worker_<N>.dispatcher." for workers.
type DispatcherStats struct {
	LoopDurationUs Histogram `stat:"loop_duration_us,unit=us"`
	PollDelayUs    Histogram `stat:"poll_delay_us,unit=us"`
}
