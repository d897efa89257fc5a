// Package clocktest is the fake clock.Clock for tests. Only _test.go files import it.
//
// Concurrency: Fake is safe for concurrent use. It runs due callbacks and delivers due ticks
// synchronously inside Advance, on the caller's goroutine, in deadline order, with no lock held.
package clocktest
