// Command dropin-go411 runs go-redsync v4.11.0 (the release whose delete
// script predates v4.12's) in the drop-in corpus
// (tests/dropin_corpus_test.go), with its goredis, redigo and rueidis
// pools: Lock, Extend, Unlock.
package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"dropin/loop"

	"github.com/go-redsync/redsync/v4"
	rsredis "github.com/go-redsync/redsync/v4/redis"
	rsgoredis "github.com/go-redsync/redsync/v4/redis/goredis/v9"
	rsredigo "github.com/go-redsync/redsync/v4/redis/redigo"
	rsrueidis "github.com/go-redsync/redsync/v4/redis/rueidis"
	redigo "github.com/gomodule/redigo/redis"
	"github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"
	"github.com/redis/rueidis/rueidiscompat"
)

func main() {
	loop.Main(map[string]loop.Row{
		"redsync-4.11-goredis": redsyncRow(goredisPool),
		"redsync-4.11-redigo":  redsyncRow(redigoPool),
		"redsync-4.11-rueidis": redsyncRow(rueidisPool),
	})
}

func goredisPool(addr string) (rsredis.Pool, func()) {
	c := redis.NewClient(&redis.Options{Addr: addr})
	return rsgoredis.NewPool(c), func() { c.Close() }
}

func redigoPool(addr string) (rsredis.Pool, func()) {
	p := &redigo.Pool{MaxIdle: 4, Dial: func() (redigo.Conn, error) { return redigo.Dial("tcp", addr) }}
	return rsredigo.NewPool(p), func() { p.Close() }
}

func rueidisPool(addr string) (rsredis.Pool, func()) {
	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{addr}})
	if err != nil {
		return nil, func() {}
	}
	return rsrueidis.NewPool(rueidiscompat.NewAdapter(c)), c.Close
}

func redsyncRow(pool func(addr string) (rsredis.Pool, func())) loop.Row {
	return func(ctx context.Context, addr string, w, cycles int, critical loop.Critical) error {
		p, closer := pool(addr)
		if p == nil {
			return errors.New("the rueidis client did not connect")
		}
		defer closer()
		rs := redsync.New(p)
		for i := range cycles {
			m := rs.NewMutex(loop.Resource, redsync.WithExpiry(10*time.Second), redsync.WithTries(6000),
				redsync.WithRetryDelay(5*time.Millisecond))
			if err := m.LockContext(ctx); err != nil {
				return fmt.Errorf("Lock: %w", err)
			}
			if ok, err := m.ExtendContext(ctx); !ok || err != nil {
				return fmt.Errorf("Extend: %v, %w", ok, err)
			}
			if err := critical(ctx, i); err != nil {
				return err
			}
			if ok, err := m.UnlockContext(ctx); !ok || err != nil {
				return fmt.Errorf("Unlock: %v, %w", ok, err)
			}
		}
		return nil
	}
}
