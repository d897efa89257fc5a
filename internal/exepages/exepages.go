// Package exepages drops the process's page-table entries for its own executable's read-only
// pages (code, read-only data, the pc tables), so that the resident set holds only the pages the
// process goes on using.
//
// Why: Legate links about 130 generated protobuf packages whose init functions, with the
// runtime's type and itab set-up, touch most of the 37 MB the binary maps; the kernel then maps
// 64 KiB around each touched page (fault-around). Those pages count in the process's RSS
// (RssFile) although start-up alone reads most of them. They are clean, shared page cache: after
// Release the kernel keeps them cached (and may reclaim them, as it may any clean page), and the
// next access to one maps it again with a minor fault, no disk read. Release therefore changes
// what RSS reports, not what the machine holds in its page cache; a report of it must quote
// RssAnon and RssFile separately.
//
// Legate drops them at every phase boundary of its start-up (Checkpoint: package inits,
// decoding, building the server) and, once LIVE, from a timer, each time only if more than
// Budget of them are resident (Trim). So RSS counts the binary's pages the current phase or the
// last tick touched rather than every page touched since exec, and the peak RSS is the largest
// phase's, not the sum of all. What it costs: the pages a later phase reads again fault back in
// (minor faults, 64 KiB each), and a check that releases nothing reads /proc/self/statm.
//
// Package pagewise (Enable, from package aftersyscall's init) removes the 64 KiB: once it has
// run, a fault maps the one page read, so what a phase leaves resident is what it read.
//
// Only mappings that are of the executable (same device and inode as /proc/self/exe) and not
// writable are advised: a writable private mapping (.data) holds the process's own changes,
// which MADV_DONTNEED would throw away. The one private change a read-only mapping can hold is a
// breakpoint written into the text by a debugger or a uprobe; one set before a Release is lost
// with it, so such probes are attached once the server is LIVE.
package exepages

import (
	"fmt"
	"os"

	"github.com/legateproxy/legate/internal/exepages/pagewise"
)

// Budget is the resident size of file-backed pages above which Checkpoint drops the executable's
// while they fault in with the kernel's fault-around. Serving the rig's load keeps 4 to 6 MB of
// them in use then (text, rodata, pc tables; measured as what faults back within a second of a
// drop), so a timer's check finds them under it once the start-up's pages are gone, and
// releases again only when rare paths have added to them.
const Budget = 6 << 20

// PagewiseBudget is Budget once pagewise.Enable has turned fault-around off: a fault then maps
// only the page read, and serving keeps 1.3 MB (HTTP/1) to 2.5 MB (TLS, h2c) of the binary in
// use (RssFile less the clean .data pages, after 5 to 15 s of load), so 2 MB holds start-up's
// phases and the first requests to about that much while a check under load releases once in
// several seconds at most.
const PagewiseBudget = 2 << 20

// Checkpoint ends a phase of start-up (or a tick of a timer): it drops the executable's pages
// when more than the budget (Budget, or PagewiseBudget once pagewise.Enable has succeeded) of
// them are resident (Trim). Phases of start-up each run code and read data spread over the
// whole binary, so without a drop between them their page sets add up to most of the binary.
// Only RSS changes: the pages stay in the page cache, and the next phase faults back what it
// reads.
func Checkpoint() { _, _ = Trim(budget()) }

// budget is what Checkpoint passes to Trim.
func budget() int {
	if pagewise.On() {
		return PagewiseBudget
	}
	return Budget
}

// parseStatmShared reads the third field of /proc/PID/statm ("size resident shared text lib data
// dt", in pages) and returns it in bytes.
func parseStatmShared(b []byte) (int, error) {
	field, v, digits := 0, 0, 0
	for _, c := range b {
		switch {
		case c >= '0' && c <= '9':
			if field == 2 {
				v = v*10 + int(c-'0')
			}
			digits++
		case c == ' ' || c == '\n':
			if digits > 0 {
				if field == 2 {
					return v * os.Getpagesize(), nil
				}
				field++
			}
			digits = 0
		default:
			return 0, fmt.Errorf("statm %q: unexpected byte %q", b, c)
		}
	}
	if field == 2 && digits > 0 {
		return v * os.Getpagesize(), nil
	}
	return 0, fmt.Errorf("statm %q: fewer than three fields", b)
}
