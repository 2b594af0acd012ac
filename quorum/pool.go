package quorum

import (
	"sync"
	"time"
)

// workerIdle is how long an idle worker waits for more work before it
// exits.
const workerIdle = 2 * time.Second

// workers runs functions on reused goroutines. Every master request runs on
// its own goroutine so that a slow master delays nobody else; starting a
// fresh goroutine for each of them, and growing its stack through the Redis
// client's call chain every time, cost about a tenth of the proxy's CPU
// under load. An idle worker keeps its grown stack for the next request.
type workers struct {
	work chan func()
	stop chan struct{}
	once sync.Once
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
	t := time.NewTimer(workerIdle)
	defer t.Stop()
	for {
		f()
		t.Reset(workerIdle)
		select {
		case f = <-w.work:
		case <-t.C:
			return
		case <-w.stop:
			return
		}
	}
}

// close makes idle workers exit.
func (w *workers) close() { w.once.Do(func() { close(w.stop) }) }
