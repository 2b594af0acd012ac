package relay

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/alicebob/miniredis/v2/proto"
	"github.com/alicebob/miniredis/v2/server"

	"github.com/redlock-proxy/redlock-proxy/quorum"
	"github.com/redlock-proxy/redlock-proxy/quorum/scripts"
)

// testTimeout is the master timeout of the bus's tests (quorum's unit
// tests use the same).
const testTimeout = 50 * time.Millisecond

var errDown = errors.New("fake: connection refused")

// fakeNode is a master for the bus's tests: an embedded miniredis that
// runs the real scripts (bus_publish's PUBLISH reaches the fake's own
// subscriptions, matched as Redis matches channels and patterns), and a
// switch that makes every request fail (setDown). Requests land at once,
// in the order they are made (Send's before it returns, as on one
// connection); the messages of the fake's subscriptions are handed to
// notify in the order the master sent them, from a goroutine of their own,
// never under mu.
type fakeNode struct {
	addr string
	m    *miniredis.Miniredis
	sub  *miniredis.Subscriber

	mu    sync.Mutex
	peer  *server.Peer
	out   bytes.Buffer
	subs  map[string]bool
	psubs map[string]bool
	down  bool
}

var _ quorum.Node = (*fakeNode)(nil)

// newFake starts a fake master for the test, closed when it ends; notify
// gets every message of its subscriptions.
func newFake(t testing.TB, addr string, notify func(channel, message string)) *fakeNode {
	t.Helper()
	m := miniredis.NewMiniRedis()
	if err := m.Start(); err != nil {
		t.Fatal(err)
	}
	f := &fakeNode{addr: addr, m: m, subs: map[string]bool{}, psubs: map[string]bool{}}
	f.peer = server.NewPeer(bufio.NewWriter(&f.out))
	f.sub = m.NewSubscriber()
	// The messages go through an unbounded queue, so that the master never
	// waits for the receiver: a script publishes while mu is held, and the
	// bus subscribes (taking mu) while it holds the lock that Notify takes.
	var (
		qmu    sync.Mutex
		queue  [][2]string
		signal = make(chan struct{}, 1)
		wg     sync.WaitGroup
	)
	push := func(ch, msg string) {
		qmu.Lock()
		queue = append(queue, [2]string{ch, msg})
		qmu.Unlock()
		select {
		case signal <- struct{}{}:
		default:
		}
	}
	msgs, pmsgs := f.sub.Messages(), f.sub.Pmessages()
	wg.Add(2)
	go func() {
		defer wg.Done()
		for msg := range msgs {
			push(msg.Channel, msg.Message)
		}
	}()
	go func() {
		defer wg.Done()
		for msg := range pmsgs {
			push(msg.Channel, msg.Message)
		}
	}()
	go func() { wg.Wait(); close(signal) }()
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range signal {
			for {
				qmu.Lock()
				if len(queue) == 0 {
					qmu.Unlock()
					break
				}
				m := queue[0]
				queue = queue[1:]
				qmu.Unlock()
				if notify != nil {
					notify(m[0], m[1])
				}
			}
		}
	}()
	t.Cleanup(func() {
		f.sub.Close()
		<-done
		m.Close()
	})
	return f
}

func (f *fakeNode) setDown(b bool) { f.mu.Lock(); f.down = b; f.mu.Unlock() }

func (f *fakeNode) Addr() string { return f.addr }

func (f *fakeNode) Identity() quorum.Identity {
	return quorum.Identity{RunID: f.addr + "-run-1", Conn: 1}
}

// Eval runs the real script on the embedded master.
func (f *fakeNode) Eval(ctx context.Context, name string, keys, args []string) (any, error) {
	s := scripts.ByName(name)
	if s == nil {
		return nil, fmt.Errorf("fake: no script %q", name)
	}
	if err := s.Check(keys, args); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.down {
		return nil, errDown
	}
	cmd := append([]string{"EVAL", s.Source(), strconv.Itoa(len(keys))}, keys...)
	cmd = append(cmd, args...)
	f.out.Reset()
	f.m.Server().Dispatch(f.peer, cmd)
	f.peer.Flush()
	v, err := proto.Parse(f.out.String())
	if err != nil {
		return nil, err
	}
	if e, ok := v.(error); ok {
		return nil, e
	}
	return v, nil
}

// Send runs the request before it returns (it has reached the master, as
// a request issued on one connection would before a later one) and
// answers from another goroutine.
func (f *fakeNode) Send(name string, keys, args []string, done func(v any, err error)) {
	v, err := f.Eval(context.Background(), name, keys, args)
	go done(v, err)
}

func (f *fakeNode) Exists(ctx context.Context, keys ...string) (int64, error) {
	if err := f.Ping(ctx); err != nil {
		return 0, err
	}
	return 0, nil
}

func (f *fakeNode) Ping(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.down {
		return errDown
	}
	return nil
}

func (f *fakeNode) Subscribe(ch string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.subs[ch] = true
	f.sub.Subscribe(ch)
}

func (f *fakeNode) Unsubscribe(ch string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.subs, ch)
	f.sub.Unsubscribe(ch)
}

func (f *fakeNode) PSubscribe(p string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.psubs[p] = true
	f.sub.Psubscribe(p)
}

func (f *fakeNode) PUnsubscribe(p string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.psubs, p)
	f.sub.Punsubscribe(p)
}

// Subscribed answers at once: the embedded master subscribes when asked.
func (f *fakeNode) Subscribed(ctx context.Context, ch string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.down {
		return errDown
	}
	return nil
}

func (f *fakeNode) PSubscribed(ctx context.Context, p string) error { return f.Subscribed(ctx, p) }
