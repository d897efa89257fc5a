//go:build linux

package logging

import "syscall"

// threadID is %t: the OS thread the logging goroutine runs on, as Envoy
// prints its thread id.
func threadID() int { return syscall.Gettid() }
