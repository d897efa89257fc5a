// Package xdstest runs go-control-plane's management server (its snapshot cache, every xDS
// gRPC service and the REST gateway) on 127.0.0.1 for tests of Legate's xDS client, in
// package tests and against the binary alike. A Server is safe for concurrent use: the
// requests it records and its control_plane identifier are guarded by a mutex, and the
// goroutine serving its port ends in Stop, which the test's cleanup calls.
package xdstest
