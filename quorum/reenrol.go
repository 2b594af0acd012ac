package quorum

import (
	"errors"
	"time"
)

// errLapsed is the error of an extension that re-took masters and reached
// its quorum only after the lease's validity had ended: the re-taken
// masters may be what made the quorum, and a lease must not be given back
// to a holder whose validity ended (see "Extensions re-enrol masters").
var errLapsed = errors.New("quorum: the extension reached a quorum after the lease's validity ended")

// liveUntil is when l's validity ends, and whether the engine knows l to
// be valid at t0: l carries the validity of its grant or of its latest
// extension (Decided set) and it has not ended. Only then does an
// extension re-take masters where the lease's keys are absent.
func liveUntil(l *Lease, t0 time.Time) (time.Time, bool) {
	if l.Decided.IsZero() {
		return time.Time{}, false
	}
	end := l.Decided.Add(l.Validity)
	return end, t0.Before(end)
}

// liveFlag is the scripts' "live" argument.
func liveFlag(live bool) string {
	if live {
		return "1"
	}
	return "0"
}

// extendDeadline is how long an extension keeps asking (extendUntil); a
// re-taking one (live) also stops when the lease's validity ends.
func (e *Engine) extendDeadline(t0 time.Time, ttl time.Duration, live bool, until time.Time) time.Time {
	d := e.extendUntil(t0, ttl)
	if live && until.Before(d) {
		return until
	}
	return d
}

// lapsed is the *QuorumError of a re-taking extension (live) that reached
// its quorum at or after until, else nil.
func (e *Engine) lapsed(op string, live bool, until time.Time) error {
	if !live || time.Now().Before(until) {
		return nil
	}
	return &QuorumError{Op: op, Got: 0, Need: e.quorum, Total: len(e.nodes), Errs: []error{errLapsed}}
}

// tombstone is the key an announced release of token leaves on each
// master where it released the grant (named after the release channel),
// living as long as the grant had to: an extension does not take the
// grant again where it finds it, so that a lease released through another
// connection or proxy is not revived by the keeper that still extends it.
func tombstone(channel, token string) string { return channel + ":" + token }
