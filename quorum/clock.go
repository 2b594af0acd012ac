package quorum

import "time"

// Clock is the engine's time. The engine reads every instant and arms
// every timer through it, so that a test (or a simulation) can drive time
// itself with Options.Clock; the default is the system clock. Contexts
// that bound a call to a master are the caller's and run on real time.
type Clock interface {
	// Now is the current instant.
	Now() time.Time
	// NewTimer is a timer whose channel receives once d has passed.
	NewTimer(d time.Duration) Timer
	// AfterFunc runs f on its own goroutine once d has passed.
	AfterFunc(d time.Duration, f func()) Timer
}

// Timer is a Clock's timer, as time.Timer: C is nil for AfterFunc's.
type Timer interface {
	C() <-chan time.Time
	Stop() bool
	Reset(d time.Duration) bool
}

// systemClock is the default Clock: package time.
type systemClock struct{}

func (systemClock) Now() time.Time { return time.Now() }

func (systemClock) NewTimer(d time.Duration) Timer { return sysTimer{time.NewTimer(d)} }

func (systemClock) AfterFunc(d time.Duration, f func()) Timer {
	return sysTimer{time.AfterFunc(d, f)}
}

type sysTimer struct{ t *time.Timer }

func (t sysTimer) C() <-chan time.Time        { return t.t.C }
func (t sysTimer) Stop() bool                 { return t.t.Stop() }
func (t sysTimer) Reset(d time.Duration) bool { return t.t.Reset(d) }

// now is the engine's clock's current instant.
func (e *Engine) now() time.Time { return e.clock.Now() }

// since is the time elapsed since t on the engine's clock.
func (e *Engine) since(t time.Time) time.Duration { return e.clock.Now().Sub(t) }

// until is the time left until t on the engine's clock.
func (e *Engine) until(t time.Time) time.Duration { return t.Sub(e.clock.Now()) }
