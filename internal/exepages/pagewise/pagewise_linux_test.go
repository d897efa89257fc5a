package pagewise

import (
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestEnableTurnsFaultAroundOff reads one byte in 64 KiB windows of the test binary's
// read-only mappings whose pages were dropped, and counts the window's pages the read mapped:
// the whole cached window with the kernel's fault-around, the one page read after
// Enable.
func TestEnableTurnsFaultAroundOff(t *testing.T) {
	if On() {
		t.Skip("Enable ran earlier in this process (-count): there is no before to compare")
	}
	ranges, err := readOnly()
	if err != nil {
		t.Fatal(err)
	}
	mem, err := os.Open("/proc/self/mem")
	if err != nil {
		t.Fatal(err)
	}
	defer mem.Close()
	pagemap, err := os.Open("/proc/self/pagemap")
	if err != nil {
		t.Fatal(err)
	}
	defer pagemap.Close()
	const window = 64 << 10
	page := uint64(os.Getpagesize())
	// mapped returns, for windows spread over the mappings, how many of a window's pages are
	// mapped after reading one byte in its middle, the window having been read whole first (so
	// that every page of it is in the page cache) and then dropped. Code the test runs meanwhile
	// may map a page of some window, so callers look at the smallest and largest counts.
	mapped := func() (least, most int) {
		least = window
		for _, r := range ranges {
			for w := (r[0] + window - 1) &^ (window - 1); w+window <= r[1]; w += 16 * window {
				buf := make([]byte, window)
				if _, err := mem.ReadAt(buf, int64(w)); err != nil {
					t.Fatalf("read %x: %v", w, err)
				}
				if _, _, e := syscall.Syscall(syscall.SYS_MADVISE, uintptr(w), window, syscall.MADV_DONTNEED); e != 0 {
					t.Fatal(e)
				}
				if _, err := mem.ReadAt(buf[:1], int64(w+window/2)); err != nil {
					t.Fatal(err)
				}
				entries := make([]byte, window/page*8)
				if _, err := pagemap.ReadAt(entries, int64(w/page*8)); err != nil {
					t.Fatal(err)
				}
				n := 0
				for i := 0; i < len(entries); i += 8 {
					if binary.LittleEndian.Uint64(entries[i:])>>63 == 1 { // present
						n++
					}
				}
				least, most = min(least, n), max(most, n)
			}
		}
		return least, most
	}
	least0, most0 := mapped()
	if most0 <= 1 {
		t.Skipf("one read maps at most %d page of a window: this kernel does not fault around", most0)
	}
	if err := Enable(); err != nil {
		t.Skipf("userfaultfd is not available here: %v", err)
	}
	if !On() {
		t.Error("On() is false after Enable succeeded")
	}
	least, most := mapped()
	if least != 1 {
		t.Errorf("after Enable one read maps %d to %d pages of a 64 KiB window; want 1", least, most)
	}
	t.Logf("pages of a window one read maps: %d to %d before Enable, %d to %d after", least0, most0, least, most)
}

func TestParseReadOnly(t *testing.T) {
	text := []byte(`00400000-013ef000 r-xp 00000000 fe:00 10145253                           /tmp/legate
013ef000-02855000 r--p 00fef000 fe:00 10145253                           /tmp/legate
02855000-02985000 rw-p 02455000 fe:00 10145253                           /tmp/legate
02985000-049dc000 rw-p 00000000 00:00 0 
7f8ab14e1000-7f8ab14e3000 r-xp 00000000 00:00 0                          [vdso]
7f8ab1500000-7f8ab1501000 r--p 00000000 103:02 10145253                  /opt/same inode, other device
7f8ab1600000-7f8ab1601000 r--p 00000000 fe:00 10145254                   /opt/other inode
zz-01 r--p 0 fe:00 10145253 /tmp/legate
`)
	got := parseReadOnly(text, 0xfe, 0, 10145253)
	want := [][2]uint64{{0x400000, 0x13ef000}, {0x13ef000, 0x2855000}}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Errorf("parseReadOnly = %x, want %x (the file's text and read-only data, never its .data)", got, want)
	}
	if got := parseReadOnly(text, 0x103, 2, 10145253); len(got) != 1 || got[0] != [2]uint64{0x7f8ab1500000, 0x7f8ab1501000} {
		t.Errorf("device 103:02: %x", got)
	}
}

// TestReadOnlyIsTheExecutablesReadOnlyMappings holds the only thing exepages.Release may advise:
// the test binary's own mappings that the process cannot write, never its .data.
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
		t.Fatalf("selected %d mappings, want the text and the read-only data at least: %x", len(sel), sel)
	}
	b, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		t.Fatal(err)
	}
	// Each maps line: range, perms, offset, device, inode, path.
	byRange := map[string][]string{}
	writable := 0
	for line := range strings.Lines(string(b)) {
		f := strings.Fields(line)
		if len(f) < 6 {
			continue
		}
		byRange[f[0]] = f
		if f[5] == exe && f[1][1] == 'w' {
			writable++
		}
	}
	for _, r := range sel {
		f := byRange[fmt.Sprintf("%08x-%08x", r[0], r[1])]
		if f == nil || f[1][1] == 'w' || f[5] != exe {
			t.Errorf("selected %x-%x (%q); want only non-writable mappings of %s", r[0], r[1], f, exe)
		}
	}
	if writable == 0 {
		t.Fatal("the executable has no writable mapping to leave alone; the test proves nothing")
	}
}
