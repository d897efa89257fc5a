// Command legate runs the Legate proxy. It takes Envoy's command line:
// `legate -c envoy.yaml` starts the way `envoy -c envoy.yaml` does. Without
// -c or --config-yaml it runs on the configuration embedded in the binary
// (default.yaml: admin on 127.0.0.1:9901).
//
// Exit codes: 0 after a clean shutdown, a successful --mode validate or
// init_only, --help or --version; 1 for a bad option, an invalid
// configuration or a failure to start.
package main
