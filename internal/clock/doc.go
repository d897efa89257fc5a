// Package clock is the time source Legate's control-plane components take in their constructors
// (DESIGN.md rule 3): the real clock for production, and Fake for deterministic tests of timing
// rules (health-check intervals, jitter, timeouts) without sleeping.
//
// Concurrency: both implementations are safe for concurrent use. Real timer callbacks run on their
// own goroutines, as time.AfterFunc does. Fake runs due callbacks synchronously inside Advance, on
// the caller's goroutine, in deadline order, with no lock held.
package clock
