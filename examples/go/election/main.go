// Command election is a singleton job under redlock-proxy's leader
// election, with go-redis. Run against a proxy: go run ./election [port]
// (default 6380).
//
// Two workers campaign for the election "nightly-report". Only the leader
// runs the job, one step at a time; before each step it checks that it
// still leads (RELECT PROCLAIM answers 1 only to the leader; 0, or -LOST
// for an AUTOEXTEND leadership the proxy could not keep, means it lost:
// stop at once), and it passes its term to the store, which refuses older
// terms. Every step checks what the proxy answers and exits 1 if it is not
// as documented.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

const election = "nightly-report"

// store stands in for what the job writes to: it refuses an older term.
type store struct {
	mu   sync.Mutex
	term int64
}

func (s *store) write(term int64, what string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if term < s.term {
		return fmt.Errorf("refused: term %d < %d", term, s.term)
	}
	s.term = term
	fmt.Printf("  store: %s (term %d)\n", what, term)
	return nil
}

// stillLeader reports whether token still leads, advertising status.
func stillLeader(ctx context.Context, c *redis.Client, token, status string) (bool, error) {
	n, err := c.Do(ctx, "RELECT", "PROCLAIM", election, token, status).Int()
	if err != nil && strings.HasPrefix(err.Error(), "LOST ") {
		return false, nil // AUTOEXTEND could not keep it
	}
	return n == 1, err
}

// runJob runs steps steps of the singleton job while leader; it returns
// how many it ran.
func runJob(ctx context.Context, name string, c *redis.Client, token string, term int64, st *store, steps int, pause time.Duration) (int, error) {
	for step := range steps {
		time.Sleep(pause) // a long step, or a stalled process
		ok, err := stillLeader(ctx, c, token, fmt.Sprintf("%s at step %d", name, step))
		if err != nil {
			return step, err
		}
		if !ok {
			fmt.Printf("  %s: lost the leadership, stopping after %d steps\n", name, step)
			return step, nil
		}
		if err := st.write(term, fmt.Sprintf("%s step %d", name, step)); err != nil {
			return step, err
		}
	}
	return steps, nil
}

// connect opens one connection: a leader's AUTOEXTEND lives with it.
func connect(port string) *redis.Client {
	// MaxRetries -1: a resent CAMPAIGN would be a second campaign.
	return redis.NewClient(&redis.Options{Addr: "127.0.0.1:" + port, MaxRetries: -1, ReadTimeout: 15 * time.Second, PoolSize: 1, Protocol: 2})
}

func run(port string) error {
	ctx := context.Background()
	st := &store{}
	observer, a, b := connect(port), connect(port), connect(port)
	defer observer.Close()
	defer b.Close()

	// A wins; AUTOEXTEND keeps the leadership while A's connection is open.
	g, err := a.Do(ctx, "RELECT", "CAMPAIGN", election, 3000, "worker-a", "AUTOEXTEND").Slice()
	if err != nil {
		return err
	}
	tokenA, termA := g[0].(string), g[2].(int64)
	l, err := observer.Do(ctx, "RELECT", "LEADER", election).Slice()
	if err != nil || l[0] != "worker-a" || l[1] != termA {
		return fmt.Errorf("LEADER = %v, %v", l, err)
	}
	fmt.Printf("worker-a leads, term %d\n", termA)

	// B campaigns and waits; it is elected the moment A goes away.
	type grant struct {
		g   []any
		err error
	}
	bDone := make(chan grant, 1)
	go func() {
		g, err := b.Do(ctx, "RELECT", "CAMPAIGN", election, 600, "worker-b", "WAIT", 10000).Slice()
		bDone <- grant{g, err}
	}()
	time.Sleep(200 * time.Millisecond)
	if n, err := runJob(ctx, "worker-a", a, tokenA, termA, st, 3, 0); n != 3 || err != nil {
		return fmt.Errorf("worker-a ran %d steps: %v", n, err)
	}
	a.Close() // A crashes: its connection closes, the proxy resigns for it

	gb := <-bDone
	if gb.err != nil {
		return gb.err
	}
	tokenB, termB := gb.g[0].(string), gb.g[2].(int64)
	if termB <= termA {
		return fmt.Errorf("term %d after term %d", termB, termA)
	}
	fmt.Printf("worker-b leads, term %d\n", termB)

	// RESP2 clients follow changes with WAITCHANGE (RESP3 ones can use
	// RELECT OBSERVE and get pushes).
	seen, err := observer.Do(ctx, "RELECT", "WAITCHANGE", election, termA, "WAIT", 1000).Slice()
	if err != nil || seen[1] != termB {
		return fmt.Errorf("WAITCHANGE = %v, %v", seen, err)
	}

	// B has no AUTOEXTEND and a 600 ms ttl, and each step takes 350 ms (a
	// stalled process): by its second step the leadership has lapsed, and
	// the check before that step tells it so.
	if n, err := runJob(ctx, "worker-b", b, tokenB, termB, st, 3, 350*time.Millisecond); n != 1 || err != nil {
		return fmt.Errorf("worker-b ran %d steps: %v", n, err)
	}
	if err := observer.Do(ctx, "RELECT", "LEADER", election).Err(); !errors.Is(err, redis.Nil) {
		return fmt.Errorf("LEADER after the lapse: %v", err)
	}
	if st.term != termB {
		return fmt.Errorf("the store is at term %d, want %d", st.term, termB)
	}
	return nil
}

func main() {
	port := "6380"
	if len(os.Args) > 1 {
		port = os.Args[1]
	}
	if err := run(port); err != nil {
		fmt.Fprintln(os.Stderr, "FAILED:", err)
		os.Exit(1)
	}
	fmt.Println("go election: all examples passed")
}
