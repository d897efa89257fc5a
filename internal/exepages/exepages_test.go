package exepages

import (
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/legateproxy/legate/internal/exepages/pagewise"
)

func TestParseMaps(t *testing.T) {
	text := `00400000-013ef000 r-xp 00000000 fe:00 10145253                           /tmp/legate
013ef000-02855000 r--p 00fef000 fe:00 10145253                           /tmp/legate
02855000-02985000 rw-p 02455000 fe:00 10145253                           /tmp/legate
02985000-049dc000 rw-p 00000000 00:00 0 
7f8ab14e1000-7f8ab14e3000 r-xp 00000000 00:00 0                          [vdso]
7f8ab1500000-7f8ab1501000 r--p 00000000 103:02 77                        /opt/a b (deleted)
`
	got, err := parseMaps(text)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 6 {
		t.Fatalf("got %d mappings, want 6", len(got))
	}
	want := Mapping{Start: 0x2855000, End: 0x2985000, Perms: "rw-p", Major: 0xfe, Minor: 0, Inode: 10145253, Path: "/tmp/legate"}
	if got[2] != want {
		t.Errorf("mapping 2 = %+v, want %+v", got[2], want)
	}
	if !got[2].Writable() || got[0].Writable() || got[1].Writable() {
		t.Errorf("Writable: .data must be writable, text and rodata not")
	}
	if m := got[5]; m.Major != 0x103 || m.Minor != 2 || m.Inode != 77 || m.Path != "/opt/a b (deleted)" {
		t.Errorf("mapping 5 = %+v", m)
	}
	if _, err := parseMaps("zz-01 r--p 0 fe:00 1 /x\n"); err == nil {
		t.Error("a malformed address parsed")
	}
	if _, err := parseMaps("00-01 r--p 0 fe00 1 /x\n"); err == nil {
		t.Error("a malformed device parsed")
	}
}

// TestReadOnlyIsTheExecutablesReadOnlyMappings holds the only thing Release may advise: the
// test binary's own mappings that the process cannot write, never its .data.
func TestReadOnlyIsTheExecutablesReadOnlyMappings(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	exe, err = filepath.EvalSymlinks(exe)
	if err != nil {
		t.Fatal(err)
	}
	sel, err := ReadOnly()
	if err != nil {
		t.Fatal(err)
	}
	if len(sel) < 2 {
		t.Fatalf("selected %d mappings, want the text and the read-only data at least: %+v", len(sel), sel)
	}
	for _, m := range sel {
		if m.Writable() || m.Path != exe {
			t.Errorf("selected %+v; want only non-writable mappings of %s", m, exe)
		}
	}
	b, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		t.Fatal(err)
	}
	all, err := parseMaps(string(b))
	if err != nil {
		t.Fatal(err)
	}
	writable := 0
	for _, m := range all {
		if m.Path == exe && m.Writable() {
			writable++
		}
	}
	if writable == 0 {
		t.Fatal("the executable has no writable mapping to leave alone; the test proves nothing")
	}
}

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
	sel, err := ReadOnly()
	if err != nil {
		t.Fatal(err)
	}
	starts := map[string]bool{}
	for _, m := range sel {
		starts[strconv.FormatUint(m.Start, 16)] = true
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
