package http1

// FoldName is a field name, in lower case, that names off the wire are compared with,
// ignoring ASCII case, a word at a time: a byte's case bit (0x20) is set before the
// comparison only where the name has a letter, so that just a letter's two cases match it
// (whatever the other bytes are: a name need not have been checked to be a token). Comparing
// byte by byte, or a canonical spelling first and then byte by byte, was about 70
// instructions a name, five names an upstream response. The zero value matches nothing.
// It is read only once made, safe for concurrent use.
type FoldName struct {
	n    int       // the name's length (0: unset)
	want [4]uint64 // the name's words, as foldWords loads them
	fold [4]uint64 // the case bit of each letter of want
}

// maxFoldName is the longest name a FoldName holds: four words, overlapping at the end.
const maxFoldName = 32

// NewFoldName returns the FoldName of lower, a name in lower case of 1 to 32 bytes.
func NewFoldName(lower string) FoldName {
	if len(lower) == 0 || len(lower) > maxFoldName {
		panic("http1.NewFoldName: " + lower + ": want 1 to 32 bytes")
	}
	var fold [maxFoldName]byte
	for i := range len(lower) {
		if c := lower[i]; 'a' <= c && c <= 'z' {
			fold[i] = 0x20
		} else if 'A' <= c && c <= 'Z' {
			panic("http1.NewFoldName: " + lower + ": not in lower case")
		}
	}
	f := FoldName{n: len(lower)}
	f.want = foldWords(lower)
	f.fold = foldWords(string(fold[:len(lower)]))
	return f
}

// Equal reports whether name is f's name in any ASCII case.
func (f *FoldName) Equal(name []byte) bool {
	return len(name) == f.n && f.n != 0 && equalWords(f, name)
}

// equalWords is Equal for a name of f's length, not 0.
func equalWords[T text](f *FoldName, name T) bool {
	n := len(name)
	// The words as foldWords loads them, each compared as soon as it is loaded.
	switch {
	case n >= 8:
		k := 0
		for ; k*8+8 < n; k++ {
			if load64(name[k*8:])|f.fold[k] != f.want[k] {
				return false
			}
		}
		return load64(name[n-8:])|f.fold[k] == f.want[k]
	case n >= 4:
		return (uint64(load32(name))|uint64(load32(name[n-4:]))<<32)|f.fold[0] == f.want[0]
	case n >= 2:
		w := uint64(name[0]) | uint64(name[1])<<8 | uint64(name[n-2])<<16 | uint64(name[n-1])<<24
		return w|f.fold[0] == f.want[0]
	}
	return uint64(name[0])|f.fold[0] == f.want[0]
}

// foldWords loads b (1 to 32 bytes) as Equal does: the eight-byte words from its start and a
// last one ending with it (overlapping the one before), or, for fewer than eight bytes, one
// word of its first and last four or two bytes (overlapping), or of its one byte. Two names
// of one length are equal exactly when their words are.
func foldWords(b string) (w [4]uint64) {
	n := len(b)
	switch {
	case n >= 8:
		for k := 0; k*8 < n; k++ {
			w[k] = load64(b[min(k*8, n-8):])
		}
	case n >= 4:
		w[0] = uint64(load32(b)) | uint64(load32(b[n-4:]))<<32
	case n >= 2:
		w[0] = uint64(b[0]) | uint64(b[1])<<8 | uint64(b[n-2])<<16 | uint64(b[n-1])<<24
	default:
		w[0] = uint64(b[0])
	}
	return w
}

// load32 reads b's first four bytes as a little-endian word.
func load32[T text](b T) uint32 {
	_ = b[3]
	return uint32(b[0]) | uint32(b[1])<<8 | uint32(b[2])<<16 | uint32(b[3])<<24
}
