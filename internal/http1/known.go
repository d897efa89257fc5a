package http1

// Known says which of the field names that a proxy treats apart from the others a name is:
// the fields that frame a message (which the codecs read), the hop-by-hop ones and those the
// downstream codec writes itself, those Envoy's connection manager and router may replace,
// and the request fields the downstream codec reads (Host, Expect). The codecs find it for
// each field as they cut its line (CutField), so that the framing fields are found by it and
// the connection manager writes a response without looking at the names again; a known name
// needs no check of its characters either (CutField), which is why the two names nearly
// every request and response carry beyond those, Content-Type and User-Agent, are known too.
// The zero value, Unknown, is every other name.
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
	KnownHost                   // host
	KnownExpect                 // expect
	KnownContentType            // content-type
	KnownUserAgent              // user-agent
	NumKnown                    // the number of Known values, Unknown included
)

// Each known name has a bit of a uint32 in the connection manager's sets of names
// (httpproxy's directPlan): this fails to compile once there are more.
var _ [32 - NumKnown]struct{}

// knownNames spell the known names in lower case, by Known.
var knownNames = [NumKnown]string{
	KnownConnection: "connection", KnownContentLength: "content-length",
	KnownTransferEncoding: "transfer-encoding", KnownDate: "date", KnownKeepAlive: "keep-alive",
	KnownProxyConnection: "proxy-connection", KnownTE: "te", KnownTrailer: "trailer",
	KnownUpgrade: "upgrade", KnownServer: "server", KnownRequestID: "x-request-id",
	KnownAttemptCount: "x-envoy-attempt-count", KnownServiceTime: "x-envoy-upstream-service-time",
	KnownHost: "host", KnownExpect: "expect", KnownContentType: "content-type", KnownUserAgent: "user-agent",
}

// String returns the name in lower case ("" for Unknown).
func (k Known) String() string {
	if k >= NumKnown {
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
func KnownName[T text](name T) Known {
	n := len(name)
	if n == 0 {
		return Unknown
	}
	slot := knownSlot(name[0], n)
	if int(knownLens[slot]) != n || !equalWords(&knownSlots[slot].name, name) {
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
	for k := Known(1); k < NumKnown; k++ {
		name := knownNames[k]
		e := &t[knownSlot(name[0], len(name))]
		if e.known != Unknown {
			panic("http1: known name " + name + " shares a slot with " + e.known.String())
		}
		*e = knownEntry{name: NewFoldName(name), known: k}
	}
	return t
}()

// nameWord is one eight-byte word of a known name as CutField compares it: a word x loaded
// from the name's start (little-endian) is the name's when x&mask|fold == want. mask keeps
// the name's bytes (the last word's bytes past the name are the colon and what follows);
// fold, as in FoldName, is the case bit of each letter; want is the name in lower case.
type nameWord struct{ mask, fold, want uint64 }

// knownWords are the known names' words, by slot as in knownSlots; the words after a name's
// last have a mask of 0.
var knownWords = func() (t [numSlots][maxFoldName / 8]nameWord) {
	for k := Known(1); k < NumKnown; k++ {
		name := knownNames[k]
		e := &t[knownSlot(name[0], len(name))]
		for i := 0; i < len(name); i++ {
			w, shift := &e[i/8], 8*(i%8)
			w.mask |= 0xff << shift
			w.want |= uint64(name[i]) << shift
			if 'a' <= name[i] && name[i] <= 'z' {
				w.fold |= 0x20 << shift
			}
		}
	}
	return t
}()
