package http1

// Known says which of the response field names that a proxy treats apart from the others a
// name is: the fields that frame a message (which the upstream codec reads), the hop-by-hop
// ones and those the downstream codec writes itself, and those Envoy's connection manager
// and router may replace. The upstream codec finds it for each field as it parses the head
// (KnownName), so that the framing fields are found by it and the connection manager writes
// a response without looking at the names again. The zero value, Unknown, is every other
// name.
type Known uint8

// The known names.
const (
	Unknown               Known = iota
	KnownConnection             // connection
	KnownContentLength          // content-length
	KnownTransferEncoding       // transfer-encoding
	KnownDate                   // date
	KnownKeepAlive              // keep-alive
	KnownProxyConnection        // proxy-connection
	KnownTE                     // te
	KnownTrailer                // trailer
	KnownUpgrade                // upgrade
	KnownServer                 // server
	KnownRequestID              // x-request-id
	KnownAttemptCount           // x-envoy-attempt-count
	KnownServiceTime            // x-envoy-upstream-service-time
	numKnown
)

// knownNames spell the known names in lower case, by Known.
var knownNames = [numKnown]string{
	KnownConnection: "connection", KnownContentLength: "content-length",
	KnownTransferEncoding: "transfer-encoding", KnownDate: "date", KnownKeepAlive: "keep-alive",
	KnownProxyConnection: "proxy-connection", KnownTE: "te", KnownTrailer: "trailer",
	KnownUpgrade: "upgrade", KnownServer: "server", KnownRequestID: "x-request-id",
	KnownAttemptCount: "x-envoy-attempt-count", KnownServiceTime: "x-envoy-upstream-service-time",
}

// String returns the name in lower case ("" for Unknown).
func (k Known) String() string {
	if k >= numKnown {
		return ""
	}
	return knownNames[k]
}

// KnownName returns which known name name is, in any ASCII case. The name's first byte and
// length pick its slot in knownSlots, which holds at most the one known name of that letter
// and length: most names, whose length is not their slot's, are Unknown after one
// comparison, and the others are compared a word at a time (FoldName). A switch on the
// length and then a comparison byte by byte, as the upstream codec found the framing names,
// was about 35 instructions a field; the connection manager's second look at each name
// (the slots with a comparison a word at a time), about 60 more.
func KnownName(name []byte) Known {
	n := len(name)
	if n == 0 {
		return Unknown
	}
	slot := knownSlot(name[0], n)
	if int(knownLens[slot]) != n || !knownSlots[slot].name.equalWords(name) {
		return Unknown
	}
	return knownSlots[slot].known
}

// knownSlot is the slot in knownSlots of a name's first byte and length: no two known
// names share one (building knownSlots panics otherwise).
func knownSlot(first byte, n int) int { return (int(first|0x20) + n) & (numSlots - 1) }

// numSlots is the size of knownSlots, a power of two.
const numSlots = 64

// knownEntry is one slot of knownSlots: the zero value, an empty slot, matches nothing.
type knownEntry struct {
	name  FoldName
	known Known
}

// knownLens are the lengths of the names in knownSlots, by slot (0 for an empty one): a byte
// apiece, they take a few cache lines where knownSlots takes 80 bytes a slot.
var knownLens = func() (t [numSlots]uint8) {
	for i := range knownSlots {
		t[i] = uint8(knownSlots[i].name.n)
	}
	return t
}()

// knownSlots are the known names, each in its slot.
var knownSlots = func() (t [numSlots]knownEntry) {
	for k := Known(1); k < numKnown; k++ {
		name := knownNames[k]
		e := &t[knownSlot(name[0], len(name))]
		if e.known != Unknown {
			panic("http1: known name " + name + " shares a slot with " + e.known.String())
		}
		*e = knownEntry{name: NewFoldName(name), known: k}
	}
	return t
}()
