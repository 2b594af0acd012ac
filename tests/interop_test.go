package tests

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/go-redsync/redsync/v4"
	"github.com/go-redsync/redsync/v4/redis/goredis/v9"
	"github.com/redis/go-redis/v9"

	redsyncredis "github.com/go-redsync/redsync/v4/redis"
)

// TestGoRedsyncInterop: with key_prefix "" the proxy's locks and
// go-redsync's on the same masters are the same keys, so users of either
// exclude each other and can move to the proxy one service at a time.
func TestGoRedsyncInterop(t *testing.T) {
	busy(t)
	cl := newCluster(t, 5)
	p := startProxy(t, defaults(cl.addrs()))
	c := p.Client()
	pools := make([]redsyncredis.Pool, len(cl.servers))
	for i, s := range cl.servers {
		rc := redis.NewClient(&redis.Options{Addr: s.Addr})
		t.Cleanup(func() { rc.Close() })
		pools[i] = goredis.NewPool(rc)
	}
	rs := redsync.New(pools...)
	ctx := context.Background()

	// A go-redsync holder excludes proxy users.
	m := rs.NewMutex("inventory", redsync.WithExpiry(10*time.Second), redsync.WithTries(1))
	if err := m.LockContext(ctx); err != nil {
		t.Fatalf("redsync lock: %v", err)
	}
	if _, ok := rlock(t, c, "inventory", 10000); ok {
		t.Fatal("proxy granted a lock go-redsync holds")
	}
	// Same layout: the redsync value is a token the proxy understands.
	if v := do(t, c, "REXTEND", "inventory", m.Value(), 20000); v == nil {
		t.Fatal("REXTEND with go-redsync's value failed")
	}
	if ok, err := m.UnlockContext(ctx); !ok || err != nil {
		t.Fatalf("redsync unlock: %v %v", ok, err)
	}

	// A proxy holder excludes go-redsync users.
	g, ok := rlock(t, c, "inventory", 10000)
	if !ok {
		t.Fatal("proxy lock refused after go-redsync released")
	}
	m2 := rs.NewMutex("inventory", redsync.WithExpiry(10*time.Second), redsync.WithTries(1))
	var taken *redsync.ErrTaken
	if err := m2.LockContext(ctx); err == nil || !(errors.As(err, &taken) || errors.Is(err, redsync.ErrFailed)) {
		t.Fatalf("go-redsync locked a resource the proxy holds: %v", err)
	}
	if v := do(t, c, "RUNLOCK", "inventory", g.token); v != int64(1) {
		t.Fatalf("RUNLOCK = %v", v)
	}
	if err := m2.LockContext(ctx); err != nil {
		t.Fatalf("go-redsync lock after the proxy released: %v", err)
	}
	m2.UnlockContext(ctx)
}
