package exepages

import (
	"encoding/binary"
	"os"
	"syscall"
	"testing"
)

// TestSinglePageFaultsTurnsFaultAroundOff reads one byte in 64 KiB windows of the test binary's
// read-only mappings whose pages were dropped, and counts the window's pages the read mapped:
// the whole cached window with the kernel's fault-around, the one page read after
// SinglePageFaults; and Checkpoint's budget follows.
func TestSinglePageFaultsTurnsFaultAroundOff(t *testing.T) {
	if pagewise.Load() {
		t.Skip("SinglePageFaults ran earlier in this process (-count): there is no before to compare")
	}
	maps, err := ReadOnly()
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
		for _, m := range maps {
			for w := (m.Start + window - 1) &^ (window - 1); w+window <= m.End; w += 16 * window {
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
	if budget() != Budget {
		t.Errorf("Checkpoint's budget before SinglePageFaults: %d, want Budget", budget())
	}
	if most0 <= 1 {
		t.Skipf("one read maps at most %d page of a window: this kernel does not fault around", most0)
	}
	if err := SinglePageFaults(); err != nil {
		t.Skipf("userfaultfd is not available here: %v", err)
	}
	if budget() != PagewiseBudget {
		t.Errorf("Checkpoint's budget after SinglePageFaults: %d, want PagewiseBudget", budget())
	}
	least, most := mapped()
	if least != 1 {
		t.Errorf("after SinglePageFaults one read maps %d to %d pages of a 64 KiB window; want 1", least, most)
	}
	t.Logf("pages of a window one read maps: %d to %d before SinglePageFaults, %d to %d after", least0, most0, least, most)
}
