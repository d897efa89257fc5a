package listener

import (
	"os"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	if os.Getenv(dialerEnv) != "" {
		os.Exit(runDialer())
	}
	goleak.VerifyTestMain(m)
}
