// Package loop is the worker loop shared by the Go workers of the drop-in
// corpus (tests/dropin_corpus_test.go): argument parsing, the workers, and
// the critical section on the plain counter redis-server.
package loop

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// Resource is the resource every worker locks.
const Resource = "dropin"

// Release is the release script of the distributed-locks page of the Redis
// docs.
const Release = `if redis.call("get",KEYS[1]) == ARGV[1] then
    return redis.call("del",KEYS[1])
else
    return 0
end`

// Critical runs the critical section of cycle c: a read-modify-write of the
// counter.
type Critical func(ctx context.Context, c int) error

// Row runs cycles lock -> critical -> unlock cycles of worker w, whose lock
// server is lockAddr.
type Row func(ctx context.Context, lockAddr string, w, cycles int, critical Critical) error

// Main parses ROW LOCKADDR,LOCKADDR COUNTERADDR WORKERS CYCLES, runs the
// row's workers (worker w on LOCKADDR[w % 2]), and exits 1 with "FAIL
// <reason>" on the first error.
func Main(rows map[string]Row) {
	if len(os.Args) != 6 {
		fail("usage: %s ROW LOCKADDR,LOCKADDR COUNTERADDR WORKERS CYCLES", os.Args[0])
	}
	row, ok := rows[os.Args[1]]
	if !ok {
		fail("unknown row %q", os.Args[1])
	}
	addrs := strings.Split(os.Args[2], ",")
	workers, err1 := strconv.Atoi(os.Args[4])
	cycles, err2 := strconv.Atoi(os.Args[5])
	if err1 != nil || err2 != nil {
		fail("WORKERS and CYCLES must be integers")
	}
	ctx := context.Background()
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			plain := redis.NewClient(&redis.Options{Addr: os.Args[3]})
			defer plain.Close()
			crit := func(ctx context.Context, c int) error { return critical(ctx, plain, w, c) }
			if err := row(ctx, addrs[w%len(addrs)], w, cycles, crit); err != nil {
				fail("worker %d: %v", w, err)
			}
		}()
	}
	wg.Wait()
	fmt.Println("done")
}

func fail(format string, args ...any) {
	// One line: the test reads the last line that starts with FAIL.
	fmt.Println("FAIL " + strings.Join(strings.Fields(fmt.Sprintf(format, args...)), " "))
	os.Exit(1)
}

func critical(ctx context.Context, plain *redis.Client, w, c int) error {
	n, err := plain.Incr(ctx, "inside").Result()
	if err != nil {
		return err
	}
	if err := plain.ZAddGT(ctx, "peak", redis.Z{Score: float64(n), Member: "peak"}).Err(); err != nil {
		return err
	}
	held := "held:" + strconv.Itoa(w)
	if err := plain.Set(ctx, held, c, 0).Err(); err != nil {
		return err
	}
	v, err := plain.Get(ctx, "counter").Int()
	if err != nil && err != redis.Nil {
		return err
	}
	time.Sleep(time.Millisecond)
	if err := plain.Set(ctx, "counter", v+1, 0).Err(); err != nil {
		return err
	}
	if err := plain.Del(ctx, held).Err(); err != nil {
		return err
	}
	return plain.Decr(ctx, "inside").Err()
}

// Retry calls try every 5 ms until it reports true, an error, or 30 s pass.
func Retry(ctx context.Context, what string, try func() (bool, error)) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		ok, err := try()
		if err != nil || ok {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: not acquired in 30 s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
