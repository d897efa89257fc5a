// Package beforeenvoy drops the executable's resident pages (exepages.Checkpoint) from its init,
// right before the inits of the generated Envoy and xDS protobuf packages (github.com/cncf,
// github.com/envoyproxy: about 130 packages, one or more fault-around windows of code, types and
// descriptors each).
//
// Those packages wait at least for net/mail (the validation code generated with them imports
// it). Importing mime/multipart, which net/mail's other imports have all run by, makes this
// package ready, and run, just before net/mail: after the standard library's network group and
// before the first Envoy or xDS package (init trace of the binary: inits 159 to 161 of 348).
// See package afterwkt for why inits; TestInitDropsRunBetweenTheGroups (cmd/legate) holds the
// place.
package beforeenvoy

import (
	_ "mime/multipart"

	"github.com/legateproxy/legate/internal/exepages"
)

func init() { exepages.Checkpoint() }
