// Package afterwkt drops the executable's resident pages (exepages.Checkpoint) from its init,
// which the import below places right after the protobuf runtime's and the well-known types'
// inits, before the rest of the standard library's.
//
// Why an init: the runtime's start-up and the 348 package inits that run before main touch
// pages in most of the binary (one or two 64 KiB fault-around windows per package at least:
// each init's code, its descriptors and types), 27 MB in all, which was Legate's peak RSS
// before main could drop them. Go runs a package's init once every package it imports has run
// its own, and among the packages that are ready, the first by import path; so a package of
// this module, whose path sorts after every github.com/cncf and github.com/envoyproxy package,
// runs as soon as what it imports has run and no smaller path is ready. Importing the last of
// the protobuf group puts this drop after it (init 104 of 348). cmd/legate imports this
// package for its init alone; TestInitDropsRunBetweenTheGroups (cmd/legate) holds the place.
package afterwkt

import (
	_ "google.golang.org/genproto/googleapis/api/annotations"

	"github.com/legateproxy/legate/internal/exepages"
)

func init() { exepages.Checkpoint() }
