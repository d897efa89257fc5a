// Package aftersyscall turns fault-around off for the executable's read-only mappings
// (pagewise.Enable, which also drops the pages fault-around brought in before) from its init,
// which Go's init order runs right after package syscall's: before all but the first 16 of the
// 353 package inits.
//
// Why an init, and why this early: the runtime's start-up alone leaves about 8 MB of the binary
// resident through fault-around, and the inits up to where package exepages could run it 3 MB
// more; every init after this one (the protobuf runtime's and the generated Envoy and xDS
// packages' among them) maps only the pages it reads. Go runs a ready package whose import path
// sorts first, and this package imports only pagewise, which imports only syscall and sync; so
// it runs as soon as syscall has. cmd/legate imports it for its init alone;
// TestInitDropsRunBetweenTheGroups (cmd/legate) holds the place. Where userfaultfd is not
// available, the pages come in as before and exepages' Checkpoint drops still bound them.
package aftersyscall

import "github.com/legateproxy/legate/internal/exepages/pagewise"

func init() { _ = pagewise.Enable() }
