package quorum

import (
	"context"
	"errors"
	"sync"
	"time"
)

// NodeState is a master's state as the engine last saw it.
type NodeState string

// The states of a master.
const (
	StateUp   NodeState = "up"
	StateDown NodeState = "down"
)

// NodeStatus is a snapshot of one master's health, for INFO and metrics.
type NodeStatus struct {
	// Addr is the master's address.
	Addr string
	// State is up after its last request succeeded, down after it failed.
	State NodeState
	// Latency is the duration of the last successful request.
	Latency time.Duration
	// LastError is the text of the last failure, "" if none yet.
	LastError string
	// LastErrorAt is when LastError happened.
	LastErrorAt time.Time
}

type nodeHealth struct {
	mu        sync.Mutex
	seen      bool
	up        bool
	latency   time.Duration
	lastErr   string
	lastErrAt time.Time
}

func (h *nodeHealth) record(d time.Duration, err error) {
	if errors.Is(err, context.Canceled) {
		return // the caller left; says nothing about the master
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.seen = true
	if err != nil {
		h.up = false
		h.lastErr = err.Error()
		h.lastErrAt = time.Now()
		return
	}
	h.up = true
	h.latency = d
}

// Status returns a snapshot of every master, in configuration order.
func (e *Engine) Status() []NodeStatus {
	out := make([]NodeStatus, len(e.nodes))
	for i, nd := range e.nodes {
		h := &e.health[i]
		h.mu.Lock()
		st := StateDown
		if h.up {
			st = StateUp
		}
		out[i] = NodeStatus{Addr: nd.Addr(), State: st, Latency: h.latency, LastError: h.lastErr, LastErrorAt: h.lastErrAt}
		h.mu.Unlock()
	}
	return out
}

// Up reports how many masters are up.
func (e *Engine) Up() int {
	n := 0
	for _, s := range e.Status() {
		if s.State == StateUp {
			n++
		}
	}
	return n
}

// healthLoop pings every master each HealthInterval, so that INFO shows a
// master's state even when no lock traffic reaches it.
func (e *Engine) healthLoop(ctx context.Context) {
	defer e.loopWG.Done()
	timeout := max(2*e.opts.MasterTimeout, 100*time.Millisecond)
	tick := time.NewTicker(e.opts.HealthInterval)
	defer tick.Stop()
	for {
		res := fanout(e, ctx, e.all(), timeout, func(ctx context.Context, nd Node) (struct{}, error) {
			return struct{}{}, nd.Ping(ctx)
		})
		for range e.nodes {
			<-res
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}
