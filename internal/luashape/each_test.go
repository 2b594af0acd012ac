package luashape

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/redlock-proxy/redlock-proxy/internal/redistest"
)

// eachAcquire takes every key, each with its own value, all or none
// (the shape of redlock-universal's batch acquire, our own wording):
// KEYS[i] gets ARGV[i], with the ttl in the last ARGV.
const eachAcquire = `
for i = 1, #KEYS do
  if redis.call('exists', KEYS[i]) == 1 then
    return {0, i, KEYS[i]}
  end
end
local px = tonumber(ARGV[#ARGV])
for i = 1, #KEYS do
  redis.call('set', KEYS[i], ARGV[i], 'PX', px)
end
return {1, #KEYS}`

// TestAcquireEach runs the acquire of several keys with their own values
// on one real Redis and through its shape over the fake quorum: all free,
// then each key held by another; the replies must match, and the quorum
// must hold every key with its value, or none of this client's.
func TestAcquireEach(t *testing.T) {
	s, err := Recognise([]byte(eachAcquire))
	if err != nil || s.Kind != Acquire || s.keyValues != 1 {
		t.Fatalf("shape %v, %v; want an acquire of each key with its own value", s, err)
	}
	srv := redistest.Start(t)
	rc := dialRESP(t, srv.Addr)
	keys := []string{"{b}a", "{b}b", "{b}c"}
	argv := []string{"va", "vb", "vc", "10000"}
	for taken := 0; taken <= len(keys); taken++ {
		t.Run(fmt.Sprintf("taken=%d", taken), func(t *testing.T) {
			rc.do(t, "FLUSHALL")
			fake := newFake()
			if taken > 0 {
				k := keys[taken-1]
				rc.do(t, "SET", k, other, "PX", "10000")
				fake.kv[k] = fakeKey{val: other, exp: time.Now().Add(10 * time.Second)}
			}
			want := rc.do(t, append([]string{"EVAL", eachAcquire, "3"}, append(slices.Clone(keys), argv...)...)...)
			got, err := s.Run(context.Background(), fake, keys, argv)
			if err != nil || fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("reply %v, %v; one Redis %v", got, err, want)
			}
			for i, k := range keys {
				v, ok := fake.held(k)
				switch {
				case taken == 0 && (!ok || v.val != argv[i]):
					t.Errorf("%s: %v %v, want %s", k, v.val, ok, argv[i])
				case taken > 0 && i+1 != taken && ok:
					t.Errorf("%s held (%s) after a refused acquire", k, v.val)
				}
			}
		})
	}
}
