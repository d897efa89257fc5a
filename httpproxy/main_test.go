package httpproxy

import (
	"os"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	if os.Getenv("LEGATE_IDLE_CLIENTS_ADDR") != "" {
		os.Exit(m.Run()) // the client process of BenchmarkIdleConnMemory
	}
	goleak.VerifyTestMain(m,
		// The pools' HTTP/2 transports and http.Transport keep-alive readers end after the
		// test's cleanups close them, but asynchronously.
		goleak.IgnoreTopFunction("internal/poll.runtime_pollWait"),
	)
}
