package main

import (
	"bytes"
	"os/exec"
	"strings"
	"testing"
)

func TestExitCode(t *testing.T) {
	tests := []struct {
		name   string
		script string
		want   int
	}{
		{name: "success", script: "exit 0", want: 0},
		{name: "failure code", script: "exit 5", want: 5},
		{name: "killed by a signal", script: "kill -9 $$", want: 128 + 9},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := exitCode(exec.Command("/bin/sh", "-c", tc.script).Run()); got != tc.want {
				t.Errorf("exitCode(sh -c %q) = %d; want %d", tc.script, got, tc.want)
			}
		})
	}
}

func TestRunPassesEpochAndExitCode(t *testing.T) {
	var out, errOut bytes.Buffer
	code := run([]string{"--", "/bin/sh", "-c", `echo "epoch $RESTART_EPOCH args $1 $2"; exit 7`, "sh"}, &out, &errOut)
	if code != 7 {
		t.Errorf("run() = %d; want the child's 7\n%s", code, errOut.String())
	}
	if got := out.String(); got != "epoch 0 args --restart-epoch 0\n" {
		t.Errorf("child output %q; want the epoch in the environment and the arguments", got)
	}
	if !strings.Contains(errOut.String(), "epoch 0 (pid ") || !strings.Contains(errOut.String(), "exited with code 7") {
		t.Errorf("restarter log lacks the child's exit:\n%s", errOut.String())
	}
}

func TestRunUsage(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := run(nil, &out, &errOut); code != 2 || !strings.Contains(errOut.String(), "usage: legate-restarter") {
		t.Errorf("run(no command) = %d, %q; want 2 and the usage", code, errOut.String())
	}
}
