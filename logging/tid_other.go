//go:build !linux

package logging

import "os"

// threadID is %t. Without a portable thread id the process id stands in.
func threadID() int { return os.Getpid() }
