package e2e

import (
	"bufio"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestExecutablePagesReleasedWhenLive: once LIVE, Legate has dropped its mappings of the binary's
// read-only pages that start-up touched (internal/exepages), so well under the share start-up
// leaves resident (about three quarters of the race build's read-only mappings) stays mapped,
// and it goes on proxying, faulting back in what serving uses.
func TestExecutablePagesReleasedWhenLive(t *testing.T) {
	p := start(t, "-c", writeConfig(t, policyConfig(jsonBackend(t, "ok"), "", "")))
	client := &http.Client{Timeout: 10 * time.Second}
	url := "http://" + p.listenerAddr("http") + "/"
	// The release runs right after the server goes LIVE, which /ready reports first: await it.
	deadline := time.Now().Add(20 * time.Second)
	for {
		mapped, resident := readOnlyExePages(t, p.cmd.Process.Pid)
		if resident*100 < mapped*55 {
			t.Logf("read-only mappings of the binary: %d kB, %d kB resident", mapped, resident)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("read-only mappings of the binary: %d kB, %d kB resident; want under 55 %%", mapped, resident)
		}
		time.Sleep(50 * time.Millisecond)
	}
	for range 20 {
		if code, _, body := send(t, client, http.MethodGet, url, nil); code != 200 || body != "ok" {
			t.Fatalf("GET = %d %q; want 200 ok", code, body)
		}
	}
}

// readOnlyExePages sums the size and the resident set, in kB, of pid's mappings of its
// executable that the process cannot write.
func readOnlyExePages(t *testing.T, pid int) (mapped, resident int) {
	t.Helper()
	exe, err := filepath.EvalSymlinks(legateBin)
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/smaps")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	in := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		switch {
		case len(fields) >= 6 && strings.Contains(fields[0], "-"):
			in = fields[5] == exe && fields[1][1] != 'w'
			if in {
				lo, hi, _ := strings.Cut(fields[0], "-")
				a, err1 := strconv.ParseUint(lo, 16, 64)
				b, err2 := strconv.ParseUint(hi, 16, 64)
				if err1 != nil || err2 != nil {
					t.Fatalf("smaps line %q", sc.Text())
				}
				mapped += int((b - a) / 1024)
			}
		case len(fields) >= 5 && strings.Contains(fields[0], "-"):
			in = false // an anonymous mapping
		case in && fields[0] == "Rss:":
			kb, err := strconv.Atoi(fields[1])
			if err != nil {
				t.Fatal(err)
			}
			resident += kb
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if mapped == 0 {
		t.Fatalf("no read-only mapping of %s in process %d", exe, pid)
	}
	return mapped, resident
}
