// Package clock is the one time source of Legate's components (STYLE.md rule 8): the server
// builds one Clock and passes it down through constructors. Real is the system clock;
// clocktest.Fake, imported only by tests, moves when a test advances it, for deterministic tests
// of timing rules (health-check intervals, jitter, timeouts, drains, flushes) without sleeping.
//
// Production code does not call time.Now, time.AfterFunc, time.NewTicker and the like directly;
// the uses that stay (socket deadlines, the request path's re-armed timers, waits on the kernel)
// say why in a comment, and TestNoDirectTimeCalls holds them to the list in allowedDirect.
//
// Concurrency: Real is safe for concurrent use; its timer callbacks run on their own goroutines,
// as time.AfterFunc does.
package clock
