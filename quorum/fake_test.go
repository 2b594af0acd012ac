package quorum

import (
	"context"
	"errors"
	"sync"
	"time"
)

var errDown = errors.New("fake: connection refused")

// fakeNode is an in-memory master for unit tests. Down makes every request
// fail at once. A positive delay makes requests land late, in FIFO order
// (like commands pipelined on one connection): the caller may time out, yet
// the request still takes effect afterwards.
type fakeNode struct {
	addr   string
	notify func(string)

	mu        sync.Mutex
	runID     string
	conn      uint64
	data      map[string]fakeVal
	subs      map[string]bool
	down      bool
	delay     time.Duration
	sendDelay time.Duration // before a request is sent (see do)
	queue     []lateOp
	queued    sync.WaitGroup
}

type fakeVal struct {
	v   string
	exp time.Time // zero: no expiry
}

func newFake(addr string, notify func(string)) *fakeNode {
	return &fakeNode{addr: addr, notify: notify, runID: addr + "-run-1", conn: 1, data: map[string]fakeVal{}, subs: map[string]bool{}}
}

// restart loses every key and comes back with a new run_id, as a master
// without persistence does; the proxy meets it on a new connection.
func (f *fakeNode) restart() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.data = map[string]fakeVal{}
	f.conn++
	f.runID = f.addr + "-run-" + uitoa(f.conn)
}

func (f *fakeNode) Identity() Identity {
	f.mu.Lock()
	defer f.mu.Unlock()
	return Identity{RunID: f.runID, Conn: f.conn}
}

func (f *fakeNode) HighWater(ctx context.Context, k Keys) (uint64, error) {
	return do(ctx, f, func() uint64 { return max(f.counter(k.Floor), f.counter(k.HighWater)) })
}

func (f *fakeNode) RaiseFloor(ctx context.Context, k Keys, v uint64) error {
	_, err := do(ctx, f, func() bool {
		for _, key := range []string{k.Floor, k.HighWater} {
			if v > f.counter(key) {
				f.data[key] = fakeVal{v: uitoa(v)}
			}
		}
		return true
	})
	return err
}

func (f *fakeNode) setDown(b bool) { f.mu.Lock(); f.down = b; f.mu.Unlock() }
func (f *fakeNode) setSendDelay(d time.Duration) {
	f.mu.Lock()
	f.sendDelay = d
	f.mu.Unlock()
}

func (f *fakeNode) setDelay(d time.Duration) {
	f.mu.Lock()
	f.delay = d
	f.mu.Unlock()
}

// drain waits until every late request has landed.
func (f *fakeNode) drain() { f.queued.Wait() }

// get returns a live value; callers hold mu.
func (f *fakeNode) get(k string) (string, bool) {
	v, ok := f.data[k]
	if !ok {
		return "", false
	}
	if !v.exp.IsZero() && time.Now().After(v.exp) {
		delete(f.data, k)
		return "", false
	}
	return v.v, true
}

// value reads a key from outside (tests).
func (f *fakeNode) value(k string) (string, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.get(k)
}

func (f *fakeNode) set(k, v string, ttl time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var exp time.Time
	if ttl > 0 {
		exp = time.Now().Add(ttl)
	}
	f.data[k] = fakeVal{v: v, exp: exp}
}

// do runs op atomically, now or late. Late requests are applied by one
// worker per node, in the order they were sent.
//
// Like rueidis, a request whose context ended before it could be sent is
// not sent; sendDelay models the client-side wait before sending (a busy
// scheduler, a full pipeline).
func do[T any](ctx context.Context, f *fakeNode, op func() T) (T, error) {
	var zero T
	f.mu.Lock()
	wait := f.sendDelay
	f.mu.Unlock()
	if wait > 0 {
		time.Sleep(wait)
	}
	if err := ctx.Err(); err != nil {
		return zero, err
	}
	f.mu.Lock()
	if f.down {
		f.mu.Unlock()
		return zero, errDown
	}
	if f.delay == 0 {
		v := op()
		f.mu.Unlock()
		return v, nil
	}
	out := make(chan T, 1)
	f.queued.Add(1)
	f.queue = append(f.queue, lateOp{due: time.Now().Add(f.delay), run: func() { out <- op() }})
	if len(f.queue) == 1 {
		go f.work()
	}
	f.mu.Unlock()
	select {
	case v := <-out:
		return v, nil
	case <-ctx.Done():
		return zero, ctx.Err()
	}
}

type lateOp struct {
	due time.Time
	run func() // called with mu held
}

// work applies queued requests in order until the queue is empty.
func (f *fakeNode) work() {
	for {
		f.mu.Lock()
		if len(f.queue) == 0 {
			f.mu.Unlock()
			return
		}
		next := f.queue[0]
		f.mu.Unlock()
		time.Sleep(time.Until(next.due))
		f.mu.Lock()
		next.run()
		f.queue = f.queue[1:]
		f.mu.Unlock()
		f.queued.Done()
	}
}

func (f *fakeNode) Addr() string { return f.addr }

func (f *fakeNode) Acquire(ctx context.Context, k Keys, token string, ttl time.Duration) (AcquireReply, error) {
	return do(ctx, f, func() AcquireReply {
		for _, l := range k.Locks {
			if v, ok := f.get(l); ok && v != token {
				return AcquireReply{}
			}
		}
		r := AcquireReply{OK: true, Fences: make([]uint64, len(k.Locks))}
		floor := f.counter(k.Floor)
		for i, l := range k.Locks {
			f.data[l] = fakeVal{v: token, exp: time.Now().Add(ttl)}
			c := max(f.counter(k.Fences[i]), floor) + 1
			f.data[k.Fences[i]] = fakeVal{v: uitoa(c)}
			if c > f.counter(k.HighWater) {
				f.data[k.HighWater] = fakeVal{v: uitoa(c)}
			}
			r.Fences[i] = c
		}
		return r
	})
}

func (f *fakeNode) counter(key string) uint64 {
	v, _ := f.get(key)
	var n uint64
	for _, c := range v {
		n = n*10 + uint64(c-'0')
	}
	return n
}

func (f *fakeNode) SetFences(ctx context.Context, k Keys, token string, fences []uint64) (bool, error) {
	return do(ctx, f, func() bool {
		for _, l := range k.Locks {
			if v, ok := f.get(l); !ok || v != token {
				return false
			}
		}
		for i, fk := range k.Fences {
			if fences[i] > f.counter(fk) {
				f.data[fk] = fakeVal{v: uitoa(fences[i])}
			}
			if fences[i] > f.counter(k.HighWater) {
				f.data[k.HighWater] = fakeVal{v: uitoa(fences[i])}
			}
		}
		return true
	})
}

func uitoa(n uint64) string {
	if n == 0 {
		return "0"
	}
	var b []byte
	for n > 0 {
		b = append([]byte{byte('0' + n%10)}, b...)
		n /= 10
	}
	return string(b)
}

func (f *fakeNode) Release(ctx context.Context, k Keys, token string) (int, error) {
	var notify []string
	n, err := do(ctx, f, func() int {
		c := 0
		for i, l := range k.Locks {
			if v, ok := f.get(l); ok && v == token {
				delete(f.data, l)
				c++
				if i < len(k.Channels) && f.subs[k.Channels[i]] {
					notify = append(notify, k.Channels[i])
				}
			}
		}
		return c
	})
	if err == nil && f.notify != nil {
		for _, ch := range notify {
			f.notify(ch)
		}
	}
	return n, err
}

func (f *fakeNode) Extend(ctx context.Context, k Keys, token string, ttl time.Duration) (int, error) {
	return do(ctx, f, func() int {
		c := 0
		for _, l := range k.Locks {
			if v, ok := f.get(l); ok && v == token {
				f.data[l] = fakeVal{v: token, exp: time.Now().Add(ttl)}
				c++
			}
		}
		return c
	})
}

func (f *fakeNode) Ping(ctx context.Context) error {
	_, err := do(ctx, f, func() struct{} { return struct{}{} })
	return err
}

func (f *fakeNode) Subscribe(ch string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.subs[ch] = true
}

func (f *fakeNode) Unsubscribe(ch string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.subs, ch)
}

func (f *fakeNode) Subscribed(ctx context.Context, ch string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.down {
		return errDown
	}
	return nil
}
