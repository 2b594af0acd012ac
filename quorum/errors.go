package quorum

import (
	"errors"
	"fmt"
)

// ErrNoQuorum is matched by errors.Is on every *QuorumError.
var ErrNoQuorum = errors.New("quorum: no quorum")

// ErrReservedResource is returned for a resource whose lock key would fall
// inside the meta prefix, where fences and other proxy state live.
var ErrReservedResource = errors.New("quorum: resource name is reserved")

// ErrQuarantined is the answer of a master whose vote does not count: it
// restarted and is in quarantine, or waits for its fence floor.
var ErrQuarantined = errors.New("quorum: master quarantined after a restart")

// ErrBadRequest is wrapped by errors about a request the engine cannot run
// (no resources, a non-positive ttl, an empty token).
var ErrBadRequest = errors.New("quorum: bad request")

// ErrTooManyHolds is the refusal of a re-entrant grant whose lock counts
// Options.MaxHolds holds already on a quorum of masters.
var ErrTooManyHolds = fmt.Errorf("%w: the lock counts the most re-entrant holds already", ErrBadRequest)

// QuorumError reports that fewer than a quorum of masters answered.
type QuorumError struct {
	// Op is the operation: "lock", "unlock" or "extend".
	Op string
	// Got is how many masters answered; Need is the quorum; Total is N.
	Got, Need, Total int
	// Errs are the errors of the masters that did not answer.
	Errs []error
}

// Error implements error.
func (e *QuorumError) Error() string {
	return fmt.Sprintf("quorum: %s: %d of %d masters answered, %d needed", e.Op, e.Got, e.Total, e.Need)
}

// Unwrap lets errors.Is see ErrNoQuorum and each master's error (for
// example context.DeadlineExceeded for a master that timed out).
func (e *QuorumError) Unwrap() []error {
	return append([]error{ErrNoQuorum}, e.Errs...)
}
