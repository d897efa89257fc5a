// Package clock is the one time source of Legate's components (DESIGN.md rule 8): the server
// builds one Clock and passes it down through constructors. Real is the system clock;
// clocktest.Fake, imported only by tests, moves when a test advances it, for deterministic tests
// of timing rules (health-check intervals, jitter, timeouts, drains, flushes) without sleeping.
//
// Concurrency: Real is safe for concurrent use; its timer callbacks run on their own goroutines,
// as time.AfterFunc does.
package clock
