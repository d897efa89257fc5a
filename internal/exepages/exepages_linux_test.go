package exepages

import (
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/legateproxy/legate/internal/exepages/pagewise"
)

// marker lives in the executable's writable data; Release must leave the value set at run time.
var marker = 1

func TestReleaseDropsReadOnlyPagesAndKeepsRunning(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "pong "+strconv.Itoa(marker))
	})}
	go srv.Serve(ln)
	defer srv.Close()
	get := func() string {
		c := &http.Client{Timeout: 10 * time.Second}
		resp, err := c.Get("http://" + ln.Addr().String() + "/")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	marker = 42
	if got := get(); got != "pong 42" {
		t.Fatalf("before Release: %q", got)
	}

	var before, after [1 << 20]byte
	nb := readSmaps(t, before[:])
	n, err := Release()
	na := readSmaps(t, after[:])
	if err != nil {
		t.Fatal(err)
	}
	if n == 0 {
		t.Fatal("Release advised nothing")
	}
	rb, ra := readOnlyRss(t, string(before[:nb])), readOnlyRss(t, string(after[:na]))
	if rb == 0 || ra >= rb {
		t.Errorf("resident kB of the read-only mappings: %d before Release, %d after; want fewer after", rb, ra)
	}
	t.Logf("resident kB of the executable's read-only mappings: %d before Release, %d right after", rb, ra)

	// The dropped pages fault back in: the server, the client and the writable data still work.
	for range 3 {
		if got := get(); got != "pong 42" {
			t.Fatalf("after Release: %q", got)
		}
	}
}

// readSmaps reads /proc/self/smaps into buf with bare system calls, so that little code runs
// between Release and the reading.
func readSmaps(t *testing.T, buf []byte) int {
	fd, err := syscall.Open("/proc/self/smaps", syscall.O_RDONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(fd)
	n := 0
	for n < len(buf) {
		k, err := syscall.Read(fd, buf[n:])
		if err != nil {
			t.Fatal(err)
		}
		if k == 0 {
			return n
		}
		n += k
	}
	t.Fatal("/proc/self/smaps is larger than the buffer")
	return 0
}

// readOnlyRss sums the Rss lines of the mappings ReadOnly selects.
func readOnlyRss(t *testing.T, smaps string) int {
	sel, err := pagewise.ReadOnly()
	if err != nil {
		t.Fatal(err)
	}
	starts := map[string]bool{}
	for _, r := range sel {
		starts[strconv.FormatUint(r[0], 16)] = true
	}
	total, in := 0, false
	for line := range strings.Lines(smaps) {
		f := strings.Fields(line)
		switch {
		case len(f) >= 5 && strings.Contains(f[0], "-"):
			lo, _, _ := strings.Cut(f[0], "-")
			in = starts[strings.TrimLeft(lo, "0")]
		case in && len(f) >= 2 && f[0] == "Rss:":
			kb, err := strconv.Atoi(f[1])
			if err != nil {
				t.Fatal(err)
			}
			total += kb
		}
	}
	return total
}

func TestParseStatmShared(t *testing.T) {
	page := os.Getpagesize()
	for _, c := range []struct {
		in   string
		want int
	}{
		{"6443 4869 3042 3569 0 1290 0\n", 3042 * page},
		{"1 2 3", 3 * page},
		{"10  20   0 4 0 5 0\n", 0},
	} {
		got, err := parseStatmShared([]byte(c.in))
		if err != nil || got != c.want {
			t.Errorf("parseStatmShared(%q) = %d, %v; want %d", c.in, got, err, c.want)
		}
	}
	for _, bad := range []string{"", "1 2\n", "1 2 x 4\n", "1 -2 3\n"} {
		if got, err := parseStatmShared([]byte(bad)); err == nil {
			t.Errorf("parseStatmShared(%q) = %d, want an error", bad, got)
		}
	}
}

// TestTrimReleasesOnlyOverBudget: under the budget Trim leaves the pages mapped; over it, it
// drops them as Release does.
func TestTrimReleasesOnlyOverBudget(t *testing.T) {
	floor.Store(0) // as at exec; another test's Trim may have moved it
	var before, after [1 << 20]byte
	nb := readSmaps(t, before[:])
	released, err := Trim(1 << 40)
	na := readSmaps(t, after[:])
	if err != nil || released {
		t.Fatalf("Trim(1 TiB) = %v, %v; want no release", released, err)
	}
	rb, ra := readOnlyRss(t, string(before[:nb])), readOnlyRss(t, string(after[:na]))
	if ra < rb {
		t.Errorf("resident kB of the read-only mappings: %d before Trim under budget, %d after; want no drop", rb, ra)
	}

	shared, err := residentShared()
	if err != nil || shared == 0 {
		t.Fatalf("residentShared() = %d, %v; want the executable's resident pages at least", shared, err)
	}
	nb = readSmaps(t, before[:])
	released, err = Trim(0)
	na = readSmaps(t, after[:])
	if err != nil || !released {
		t.Fatalf("Trim(0) = %v, %v; want a release", released, err)
	}
	rb, ra = readOnlyRss(t, string(before[:nb])), readOnlyRss(t, string(after[:na]))
	if rb == 0 || ra >= rb {
		t.Errorf("resident kB of the read-only mappings: %d before Trim over budget, %d after; want fewer after", rb, ra)
	}
}

// TestCheckpointBudgetFollowsPagewise: Checkpoint counts its budget in single pages (a smaller
// one) once pagewise.Enable has turned fault-around off, and in fault-around windows before.
func TestCheckpointBudgetFollowsPagewise(t *testing.T) {
	if !pagewise.On() && budget() != Budget {
		t.Errorf("budget with fault-around: %d, want Budget", budget())
	}
	if err := pagewise.Enable(); err != nil {
		t.Skipf("userfaultfd is not available here: %v", err)
	}
	if budget() != PagewiseBudget {
		t.Errorf("budget after pagewise.Enable: %d, want PagewiseBudget", budget())
	}
}
