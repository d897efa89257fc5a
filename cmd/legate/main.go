package main

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/legateproxy/legate/admin"
	"github.com/legateproxy/legate/bootstrap"
	"github.com/legateproxy/legate/config"
	"github.com/legateproxy/legate/extensions"
	"github.com/legateproxy/legate/internal/exepages"
	"github.com/legateproxy/legate/logging"
	"github.com/legateproxy/legate/options"
	"github.com/legateproxy/legate/server"
)

//go:embed default.yaml
var defaultConfig string

func main() {
	// Every package's init has run by now and left most of the binary's read-only pages
	// resident (internal/exepages says why and what dropping them means): drop them before the
	// configuration is decoded, so that the pages decoding touches do not add to them.
	// Start-up drops them twice more, after decoding and once LIVE. A failure (no /proc) only
	// leaves the pages resident.
	_, _ = exepages.Release()
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
	loaded, err := bootstrap.Load(src)
	if err != nil {
		fmt.Fprintf(stderr, "legate: invalid configuration: %v\n", err)
		return 1
	}
	boot, err := config.FromBootstrap(loaded.Bootstrap, config.Limits{MaxObjNameLen: opts.MaxObjNameLen, Extensions: ext})
	if err != nil {
		fmt.Fprintf(stderr, "legate: invalid configuration: %s: %v\n", configName, err)
		return 1
	}
	_, _ = exepages.Release()
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
	srv.OnLive(func() { _, _ = exepages.Release() })
	if err := srv.Run(context.Background()); err != nil {
		fmt.Fprintf(stderr, "legate: %v\n", err)
		return 1
	}
	return 0
}
