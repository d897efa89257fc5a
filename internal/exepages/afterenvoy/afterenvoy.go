// Package afterenvoy drops the executable's resident pages (exepages.Checkpoint) from its init,
// right after the inits of the generated Envoy protobuf packages that do not need gRPC (admin/v3
// imports the bootstrap's, and with it nearly all of them); the gRPC, net/http and Legate inits
// follow. See package afterwkt for why inits, and TestInitDropsRunBetweenTheGroups (cmd/legate).
package afterenvoy

import (
	_ "github.com/envoyproxy/go-control-plane/envoy/admin/v3"

	"github.com/legateproxy/legate/internal/exepages"
)

func init() { exepages.Checkpoint() }
