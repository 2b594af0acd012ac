package quorum

import (
	"encoding/hex"
	randv2 "math/rand/v2"
	"sync"
)

// entropy is where an engine's random draws come from: tokens, owner
// nonces, retry jitter, a semaphore's first slot. Unseeded (the zero
// value, the only one outside tests), tokens are NewToken's crypto/rand
// bits and the rest math/rand/v2's. The simulation seeds it from its run's
// seed (Options.seed), so that a run's tokens and jitters, and therefore
// its whole history, are the same at every replay of the seed.
type entropy struct {
	mu sync.Mutex
	r  *randv2.Rand // nil: unseeded
}

// newEntropy returns a source seeded with seed, or an unseeded one for 0.
func newEntropy(seed uint64) *entropy {
	if seed == 0 {
		return &entropy{}
	}
	return &entropy{r: randv2.New(randv2.NewPCG(seed, seed^0x2545f4914f6cdd1d))}
}

// token is a fresh 128-bit token, hex-encoded.
func (x *entropy) token() string {
	if x == nil || x.r == nil {
		return NewToken()
	}
	var b [16]byte
	x.mu.Lock()
	for i := 0; i < len(b); i += 8 {
		v := x.r.Uint64()
		for j := range 8 {
			b[i+j] = byte(v >> (8 * j))
		}
	}
	x.mu.Unlock()
	return hex.EncodeToString(b[:])
}

// int64N is a draw in [0, n), n > 0.
func (x *entropy) int64N(n int64) int64 {
	if x == nil || x.r == nil {
		return randv2.Int64N(n)
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.r.Int64N(n)
}
