// Package config turns a decoded, protoc-gen-validate-checked Envoy bootstrap (see package
// bootstrap) into plain Go structs and checks Legate's own rules on it: the rules Envoy applies
// in C++ rather than in its proto annotations (unique names, name length limits, lb_policy
// agreeing with its lb config, ring sizes, admin address shape, …). This is the one place where
// bootstrap protos become structs; code past this package reads the structs.
//
// Concurrency: FromBootstrap is a pure function. The structs it returns are not modified
// afterwards and may be read from any goroutine.
package config
