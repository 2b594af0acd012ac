package quorum

import (
	"sync"
	"sync/atomic"
)

// maxIdleWorkers bounds the goroutines a pool keeps waiting for work.
const maxIdleWorkers = 512

// workers runs functions on reused goroutines. Every master request runs on
// its own goroutine so that a slow master delays nobody else; starting a
// fresh goroutine for each of them, and growing its stack through the Redis
// client's call chain every time, cost about a tenth of the proxy's CPU
// under load. An idle worker keeps its grown stack for the next request.
// The engine keeps one pool per master, so that handing work over does not
// contend on one channel.
type workers struct {
	work chan func()
	stop chan struct{}
	once sync.Once
	idle atomic.Int32
}

func newWorkers() *workers {
	return &workers{work: make(chan func()), stop: make(chan struct{})}
}

// run runs f on an idle worker, or on a new one if none is idle. It never
// blocks.
func (w *workers) run(f func()) {
	select {
	case w.work <- f:
	default:
		go w.loop(f)
	}
}

func (w *workers) loop(f func()) {
	for {
		f()
		if w.idle.Add(1) > maxIdleWorkers {
			w.idle.Add(-1)
			return
		}
		select {
		case f = <-w.work:
			w.idle.Add(-1)
		case <-w.stop:
			return
		}
	}
}

// close makes idle workers exit.
func (w *workers) close() { w.once.Do(func() { close(w.stop) }) }
