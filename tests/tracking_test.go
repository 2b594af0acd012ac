package tests

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/redis/rueidis"
)

// TestRueidisDoCacheDropin: rueidis with its default options (client-side
// caching on: CLIENT TRACKING ON OPTIN in its handshake; DoCache sends
// CLIENT CACHING YES, MULTI, PTTL, GET, EXEC) through a drop-in proxy on
// real masters. DoCache of a lock key's GET answers the holder (from the
// cache the second time), the release of the lock through the other proxy
// invalidates it, and the next DoCache answers nil, then the next holder.
func TestRueidisDoCacheDropin(t *testing.T) {
	busy(t)
	_, pa, pb := dropinProxies(t)
	ctx := context.Background()
	invalidated := make(chan []string, 16)
	c, err := rueidis.NewClient(rueidis.ClientOption{
		InitAddress: []string{pa.Addr},
		// Only to see when the invalidation came; caching is rueidis's
		// default.
		OnInvalidations: func(ms []rueidis.RedisMessage) {
			var keys []string
			for _, m := range ms {
				k, _ := m.ToString()
				keys = append(keys, k)
			}
			invalidated <- keys
		},
	})
	if err != nil {
		t.Fatalf("rueidis with default options cannot connect: %v", err)
	}
	t.Cleanup(c.Close)
	b := pb.Client()
	const key = "cache:lock"
	get := func() (string, bool) {
		t.Helper()
		r := c.DoCache(ctx, c.B().Get().Key(key).Cache(), time.Minute)
		v, err := r.ToString()
		if rueidis.IsRedisNil(err) {
			return "<nil>", r.IsCacheHit()
		}
		if err != nil {
			t.Fatalf("DoCache GET %s: %v", key, err)
		}
		return v, r.IsCacheHit()
	}
	if err := b.Do(ctx, "SET", key, "holder-1", "NX", "PX", "30000").Err(); err != nil {
		t.Fatal(err)
	}
	read := time.Now()
	if v, hit := get(); v != "holder-1" || hit {
		t.Fatalf("first DoCache = %q (cache hit %v), want holder-1 from the proxy", v, hit)
	}
	if v, hit := get(); v != "holder-1" || !hit {
		t.Fatalf("second DoCache = %q (cache hit %v), want holder-1 from the cache", v, hit)
	}
	// Released through the other proxy: the masters announce it, and
	// proxy A invalidates the key. The proxy also invalidates every read
	// 1 s after it (trackMaxAge, for expiries): the invalidation must come
	// before that, or it was not the release's.
	if n, err := b.Del(ctx, key).Result(); err != nil || n != 1 {
		t.Fatalf("DEL through proxy B = %d, %v", n, err)
	}
	select {
	case keys := <-invalidated:
		if !slices.Contains(keys, key) {
			t.Fatalf("invalidated %q, want %s", keys, key)
		}
		if d := time.Since(read); d >= time.Second {
			t.Fatalf("invalidated %v after the read: the 1 s bound, not the release", d)
		}
	case <-time.After(time.Second):
		t.Fatal("no invalidation within 1 s of the release through proxy B")
	}
	if v, hit := get(); v != "<nil>" || hit {
		t.Fatalf("DoCache after the release = %q (cache hit %v), want nil from the proxy", v, hit)
	}
	// A nil is not kept: its invalidation follows the reply at once, so
	// the next holder is seen. (rueidis hands the reply to the caller
	// before it reads the push behind it: a read issued meanwhile could
	// still hit the nil, so the test waits for the push, as the contract
	// promises it, before reading again.)
	select {
	case keys := <-invalidated:
		if !slices.Contains(keys, key) {
			t.Fatalf("invalidated %q after the nil read, want %s", keys, key)
		}
	case <-time.After(time.Second):
		t.Fatal("no invalidation right after the nil read")
	}
	if err := b.Do(ctx, "SET", key, "holder-2", "NX", "PX", "30000").Err(); err != nil {
		t.Fatal(err)
	}
	if v, _ := get(); v != "holder-2" {
		t.Fatalf("DoCache after a new acquire through proxy B = %q, want holder-2", v)
	}
}
