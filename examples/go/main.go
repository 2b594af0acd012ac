// Command example uses redlock-proxy from Go with go-redis: one short
// example per family. Run against a proxy: go run . [port] (default 6380).
// Every step checks what the proxy answers and exits 1 if it is not as
// documented.
package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

func main() {
	port := "6380"
	if len(os.Args) > 1 {
		port = os.Args[1]
	}
	// MaxRetries -1: go-redis would otherwise resend a timed-out RLOCK (up
	// to 3 times), each a new grant. ReadTimeout above any WAIT.
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:" + port, MaxRetries: -1, ReadTimeout: 15 * time.Second})
	defer rdb.Close()
	ctx := context.Background()
	steps := []struct {
		name string
		run  func(context.Context, *redis.Client) error
	}{
		{"lock, fence, extend, release", lockFenceExtendRelease},
		{"WAIT: block until the holder releases", waitForALock},
		{"RMULTILOCK: several resources, all or nothing", multi},
		{"RFAIRLOCK: waiters granted in arrival order", fair},
		{"RSEMACQUIRE: at most 2 at once", semaphore},
		{"AUTOEXTEND: kept alive while this connection is open", autoextend},
		{"RRLOCK: readers share, a writer waits for them", readWrite},
		{"RLATCH: wait until 3 workers arrived", latch},
	}
	for _, s := range steps {
		fmt.Println(s.name)
		if err := s.run(ctx, rdb); err != nil {
			fmt.Fprintln(os.Stderr, "FAILED:", err)
			os.Exit(1)
		}
	}
	fmt.Println("go: all examples passed")
}

func newToken() string {
	b := make([]byte, 16)
	rand.Read(b)
	return hex.EncodeToString(b)
}

func lockFenceExtendRelease(ctx context.Context, rdb *redis.Client) error {
	token := newToken() // always pass TOKEN: a retry is then idempotent
	v, err := rdb.Do(ctx, "RLOCK", "invoice:42", 10000, "TOKEN", token).Slice()
	switch {
	case errors.Is(err, redis.Nil):
		fmt.Println("  held by someone else") // a quorum said it is taken
		return nil
	case err != nil && strings.HasPrefix(err.Error(), "NOQUORUM"):
		return fmt.Errorf("no quorum, nothing is held, retry later: %w", err)
	case err != nil:
		return err
	}
	fmt.Printf("  write to invoice:42 with fence %d (the store refuses older fences)\n", v[2])
	validity, err := rdb.Do(ctx, "REXTEND", "invoice:42", token, 20000).Int64()
	if err != nil || validity < 19000 {
		return fmt.Errorf("REXTEND: %d %v", validity, err)
	}
	return expect(rdb.Do(ctx, "RUNLOCK", "invoice:42", token), int64(1))
}

func waitForALock(ctx context.Context, rdb *redis.Client) error {
	v, err := rdb.Do(ctx, "RLOCK", "report", 5000).Slice()
	if err != nil {
		return err
	}
	go func() {
		time.Sleep(200 * time.Millisecond)
		rdb.Do(ctx, "RUNLOCK", "report", v[0])
	}()
	w, err := rdb.Do(ctx, "RLOCK", "report", 5000, "WAIT", 3000).Slice()
	if err != nil {
		return fmt.Errorf("not granted within WAIT: %w", err)
	}
	return expect(rdb.Do(ctx, "RUNLOCK", "report", w[0]), int64(1))
}

func multi(ctx context.Context, rdb *redis.Client) error {
	v, err := rdb.Do(ctx, "RMULTILOCK", 10000, 2, "acct:1", "acct:2").Slice()
	if err != nil {
		return err
	}
	return expect(rdb.Do(ctx, "RMULTIUNLOCK", v[0], "acct:1", "acct:2"), int64(1))
}

func fair(ctx context.Context, rdb *redis.Client) error {
	v, err := rdb.Do(ctx, "RFAIRLOCK", "queue", 10000).Slice()
	if err != nil {
		return err
	}
	return expect(rdb.Do(ctx, "RUNLOCK", "queue", v[0]), int64(1))
}

func semaphore(ctx context.Context, rdb *redis.Client) error {
	var tokens []any
	for range 2 {
		v, err := rdb.Do(ctx, "RSEMACQUIRE", "api", 2, 10000).Slice()
		if err != nil {
			return err
		}
		tokens = append(tokens, v[0])
	}
	if err := rdb.Do(ctx, "RSEMACQUIRE", "api", 2, 10000).Err(); !errors.Is(err, redis.Nil) {
		return fmt.Errorf("a third permit of 2: %v", err)
	}
	for _, t := range tokens {
		if err := expect(rdb.Do(ctx, "RSEMRELEASE", "api", t), int64(1)); err != nil {
			return err
		}
	}
	return nil
}

func autoextend(ctx context.Context, rdb *redis.Client) error {
	conn := rdb.Conn() // one dedicated connection of the pool
	defer conn.Close()
	v, err := conn.Do(ctx, "RLOCK", "nightly", 1000, "AUTOEXTEND").Slice()
	if err != nil {
		return err
	}
	time.Sleep(1500 * time.Millisecond) // longer than the ttl: still held
	info, err := conn.Do(ctx, "RLOCKINFO", "nightly", v[0]).Result()
	if err != nil {
		return err
	}
	if m, ok := info.(map[any]any); !ok || m["autoextend"] != int64(1) {
		return fmt.Errorf("RLOCKINFO: %v", info)
	}
	return expect(conn.Do(ctx, "RUNLOCK", "nightly", v[0]), int64(1))
}

func readWrite(ctx context.Context, rdb *redis.Client) error {
	var readers []any
	for range 2 {
		v, err := rdb.Do(ctx, "RRLOCK", "config", 10000).Slice()
		if err != nil {
			return err
		}
		readers = append(readers, v[0])
	}
	if err := rdb.Do(ctx, "RLOCK", "config", 1000).Err(); !errors.Is(err, redis.Nil) {
		return fmt.Errorf("a writer beside readers: %v", err)
	}
	for _, t := range readers {
		if err := expect(rdb.Do(ctx, "RRUNLOCK", "config", t), int64(1)); err != nil {
			return err
		}
	}
	return nil
}

func latch(ctx context.Context, rdb *redis.Client) error {
	if err := expect(rdb.Do(ctx, "RLATCH", "job:7:go", 3, 10000), int64(1)); err != nil {
		return err
	}
	for _, w := range []string{"a", "b", "c", "a"} { // "a" twice counts once
		if err := rdb.Do(ctx, "RLATCHDOWN", "job:7:go", w).Err(); err != nil {
			return err
		}
	}
	return expect(rdb.Do(ctx, "RLATCHWAIT", "job:7:go", 1000), int64(1))
}

func expect(cmd *redis.Cmd, want any) error {
	v, err := cmd.Result()
	if err != nil || v != want {
		return fmt.Errorf("%v: %v %v, want %v", cmd.Args(), v, err, want)
	}
	return nil
}
