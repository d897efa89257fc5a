package main

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"os"
	goruntime "runtime"
	"time"

	"github.com/legateproxy/legate/admin"
	"github.com/legateproxy/legate/bootstrap"
	"github.com/legateproxy/legate/config"
	"github.com/legateproxy/legate/extensions"
	"github.com/legateproxy/legate/internal/exepages"
	_ "github.com/legateproxy/legate/internal/exepages/afterenvoy"
	_ "github.com/legateproxy/legate/internal/exepages/aftersyscall"
	_ "github.com/legateproxy/legate/internal/exepages/afterwkt"
	_ "github.com/legateproxy/legate/internal/exepages/beforeenvoy"
	"github.com/legateproxy/legate/logging"
	"github.com/legateproxy/legate/options"
	"github.com/legateproxy/legate/server"
)

//go:embed default.yaml
var defaultConfig string

func main() {
	// Every package's init has run by now and left many of the binary's read-only pages
	// resident (internal/exepages says why and what dropping them means; the blank-imported
	// exepages packages drop them between the inits): drop them before the configuration is
	// decoded, so that the pages decoding touches do not add to them. Each later phase of
	// start-up ends with a Checkpoint too, and once LIVE a timer keeps them under the budget.
	// A failure (no /proc) only leaves the pages resident.
	exepages.Checkpoint()
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run is main without the process exit, so tests can call it.
func run(args []string, stdout, stderr io.Writer) int {
	opts, err := options.Parse(args)
	switch {
	case errors.Is(err, options.ErrHelp):
		fmt.Fprint(stdout, options.Usage())
		return 0
	case errors.Is(err, options.ErrVersion):
		fmt.Fprintf(stdout, "legate  version: %s\n", server.VersionString())
		return 0
	case err != nil:
		fmt.Fprintf(stderr, "legate: %v\n", err)
		return 1
	}
	known := map[string]bool{}
	for _, n := range logging.ComponentNames() {
		known[n] = true
	}
	if err := opts.CheckComponents(func(n string) bool { return known[n] }); err != nil {
		fmt.Fprintf(stderr, "legate: %v\n", err)
		return 1
	}
	for _, w := range opts.Warnings {
		fmt.Fprintf(stderr, "legate: warning: %s\n", w)
	}
	if opts.HotRestartVersion {
		if opts.DisableHotRestart {
			fmt.Fprint(stdout, "disabled")
		} else {
			fmt.Fprint(stdout, server.HotRestartVersion)
		}
		return 0
	}

	opts.AdminAllowedHosts = admin.ParseAllowedHosts(os.Getenv(admin.AllowedHostsEnv))

	src := bootstrap.Source{
		Path:                     opts.ConfigPath,
		YAML:                     opts.ConfigYAML,
		AllowUnknownStaticFields: opts.AllowUnknownStaticFields,
	}
	configName := opts.ConfigPath
	if src.Path == "" && src.YAML == "" {
		src.YAML = defaultConfig
		configName = "<embedded default>"
	}
	ext, err := extensions.New()
	if err != nil {
		fmt.Fprintf(stderr, "legate: %v\n", err)
		return 1
	}
	exepages.Checkpoint()
	loaded, err := bootstrap.Load(src)
	if err != nil {
		fmt.Fprintf(stderr, "legate: invalid configuration: %v\n", err)
		return 1
	}
	exepages.Checkpoint()
	boot, err := config.FromBootstrap(loaded.Bootstrap, config.Limits{MaxObjNameLen: opts.MaxObjNameLen, Extensions: ext})
	if err != nil {
		fmt.Fprintf(stderr, "legate: invalid configuration: %s: %v\n", configName, err)
		return 1
	}
	exepages.Checkpoint()
	srv, err := server.New(opts, boot, loaded.Warnings)
	if err != nil {
		fmt.Fprintf(stderr, "legate: %v\n", err)
		return 1
	}
	switch opts.Mode {
	case options.ModeValidate:
		fmt.Fprintf(stdout, "configuration '%s' OK\n", configName)
		return 0
	case options.ModeInitOnly:
		if err := srv.InitOnly(context.Background()); err != nil {
			fmt.Fprintf(stderr, "legate: %v\n", err)
			return 1
		}
		return 0
	}
	stop := make(chan struct{})
	defer close(stop)
	srv.OnLive(func() {
		// Start-up's garbage is collected now, while nothing is served: left to the GC that
		// the first connections' allocations would start, its stack scans and type reads
		// (which fault in pc tables and type data) and its work buffers came on top of the
		// pages and buffers of the first requests, and made the resident peak.
		goruntime.GC()
		exepages.Checkpoint()
		go trimExecutable(trimPeriod, stop)
	})
	if err := srv.Run(context.Background()); err != nil {
		fmt.Fprintf(stderr, "legate: %v\n", err)
		return 1
	}
	return 0
}

// trimPeriod is how often a LIVE server checks its executable's resident pages. The first
// requests fault in about 10 MB of them within a few hundred milliseconds (first-time paths,
// stack growth of the new connections' goroutines), where serving then keeps about 5 MB: a
// period of a second let that burst reach the resident peak. A check that finds the pages under
// the budget costs one read of /proc/self/statm.
const trimPeriod = 100 * time.Millisecond

// trimExecutable keeps the executable's resident pages near what serving uses: every period it
// drops them if start-up's or a rare path's pages have pushed them over exepages.Budget.
func trimExecutable(period time.Duration, stop <-chan struct{}) {
	// The system clock, not an injected one: the ticker only paces reads of /proc, which no
	// test drives by time (allowedDirect in internal/clock).
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			exepages.Checkpoint()
		case <-stop:
			return
		}
	}
}
