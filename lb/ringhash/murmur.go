package ringhash

import "encoding/binary"

// StdHashSeed is the seed libstdc++'s std::hash<std::string> passes to its 64-bit MurmurHash2,
// which Envoy's MURMUR_HASH_2 ring reproduces.
const StdHashSeed = 0xc70f6907

// MurmurHash2 is the 64-bit MurmurHash2 variant of libstdc++'s _Hash_bytes (std::hash on
// 64-bit platforms): 8-byte little-endian blocks, the tail loaded little-endian as one word.
func MurmurHash2(key []byte, seed uint64) uint64 {
	const mul = 0xc6a4a7935bd1e995
	n := len(key)
	h := seed ^ (uint64(n) * mul)
	aligned := n &^ 7
	for p := 0; p < aligned; p += 8 {
		d := shiftMix(binary.LittleEndian.Uint64(key[p:])*mul) * mul
		h ^= d
		h *= mul
	}
	if tail := key[aligned:]; len(tail) > 0 {
		var d uint64
		for i := len(tail) - 1; i >= 0; i-- {
			d = d<<8 | uint64(tail[i])
		}
		h ^= d
		h *= mul
	}
	h = shiftMix(h) * mul
	return shiftMix(h)
}

func shiftMix(v uint64) uint64 { return v ^ (v >> 47) }
