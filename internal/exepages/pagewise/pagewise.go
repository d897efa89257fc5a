// Package pagewise turns fault-around off for the executable's read-only mappings
// (exepages.SinglePageFaults) from its init, early in Go's init order, and drops the pages
// fault-around brought in before it (exepages.Release).
//
// Why an init, and why early: every package init after this one (about 330 of 348, the protobuf
// runtime's and the generated Envoy and xDS packages' among them) then maps only the pages it
// reads, one page a fault, instead of 64 KiB around each. It imports only exepages, whose own
// imports (the lower standard library) have run by init 45 or so, and Go runs a ready package
// whose import path sorts first, so it runs right after them, before the protobuf group.
// cmd/legate imports it for its init alone; TestInitDropsRunBetweenTheGroups (cmd/legate)
// holds the place. Where userfaultfd is not available, the pages come in as before and the
// Checkpoint drops still bound them.
package pagewise

import "github.com/legateproxy/legate/internal/exepages"

func init() {
	if exepages.SinglePageFaults() == nil {
		_, _ = exepages.Release()
	}
}
