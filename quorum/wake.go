package quorum

import (
	"context"
	"math/rand/v2"
	"sync"
	"time"
)

// Wakeups routes release notifications from the masters to the waiters of
// this process. Nodes call Notify for every message on a release channel;
// the engine subscribes the nodes to a channel while at least one local
// waiter needs it, and unsubscribes when the last one leaves.
type Wakeups struct {
	mu      sync.Mutex
	waiters map[string]map[*watch]struct{}
}

// NewWakeups returns an empty router.
func NewWakeups() *Wakeups {
	return &Wakeups{waiters: make(map[string]map[*watch]struct{})}
}

// Notify wakes every local waiter of channel. It never blocks.
func (w *Wakeups) Notify(channel string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for wt := range w.waiters[channel] {
		select {
		case wt.c <- struct{}{}:
		default:
		}
	}
}

// watch is one waiter's interest in a set of channels.
type watch struct {
	w        *Wakeups
	channels []string
	nodes    []Node
	c        chan struct{}
}

func (w *Wakeups) watch(channels []string, nodes []Node) *watch {
	wt := &watch{w: w, channels: channels, nodes: nodes, c: make(chan struct{}, 1)}
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, ch := range channels {
		set := w.waiters[ch]
		if set == nil {
			set = make(map[*watch]struct{})
			w.waiters[ch] = set
			for _, nd := range nodes {
				nd.Subscribe(ch)
			}
		}
		set[wt] = struct{}{}
	}
	return wt
}

// ready waits, at most timeout, until the nodes confirm the subscriptions.
// Masters that do not confirm in time are not waited for: the retry timer
// still bounds the wait.
func (wt *watch) ready(ctx context.Context, timeout time.Duration) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var wg sync.WaitGroup
	for _, nd := range wt.nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for _, ch := range wt.channels {
				if nd.Subscribed(ctx, ch) != nil {
					return
				}
			}
		}()
	}
	wg.Wait()
}

// wakeJitter spreads the retries of waiters woken by the same release, so
// that the first usually completes its round before the others start
// instead of all of them splitting the masters' votes.
const wakeJitter = 2 * time.Millisecond

// sleep waits for a notification (plus up to wakeJitter), d, or ctx,
// whichever comes first.
func (wt *watch) sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-wt.c:
		t.Reset(time.Duration(rand.Int64N(int64(wakeJitter))))
		select {
		case <-t.C:
		case <-ctx.Done():
			return ctx.Err()
		}
		return nil
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (wt *watch) close() {
	w := wt.w
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, ch := range wt.channels {
		set := w.waiters[ch]
		delete(set, wt)
		if len(set) == 0 {
			delete(w.waiters, ch)
			for _, nd := range wt.nodes {
				nd.Unsubscribe(ch)
			}
		}
	}
}
