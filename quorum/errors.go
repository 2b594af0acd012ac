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

// ErrNotQuarantined reports an EndQuarantine for a master whose votes
// count already.
var ErrNotQuarantined = errors.New("quorum: master is not quarantined")

// ErrNoSuchMaster reports a master named by neither its index nor its
// address.
var ErrNoSuchMaster = errors.New("quorum: no such master")

// ErrNoLatch reports that a latch does not exist (or expired) on enough
// masters that no quorum can have it.
var ErrNoLatch = errors.New("quorum: no such latch")

// ErrBadCursor is the error for a listing cursor that Operator.List did not
// give.
var ErrBadCursor = fmt.Errorf("%w: invalid cursor", ErrBadRequest)

// ErrListClusters is List's error when a master is a Redis Cluster: a
// listing pages through one server's keyspace (see docs/design/cluster.md).
var ErrListClusters = errors.New("quorum: RLOCKLIST does not list cluster masters")

// ErrShardNotVoting is wrapped by the error a ShardedNode returns for a
// request it did not run on one of its shards: the shard is quarantined
// (restarted, failed over), or the request's slot is moving. It counts as
// a missing vote, but says nothing of the node's other shards: the node's
// health does not count it as a failure.
var ErrShardNotVoting = errors.New("quorum: shard not voting")

// ErrNoSemLimit is the answer to a semaphore request that gives no limit
// (SemaphoreOptions.Limit 0) when no limit is stored on a quorum of masters: the
// semaphore is not in use and Semaphores().Set never set it (or its keep ran out),
// or a Semaphores().Set is under way or failed and the masters disagree.
var ErrNoSemLimit = errors.New("quorum: no limit stored for the semaphore on a quorum of masters")

// errSkippedDown answers for a fresh request not sent to a master that is down.
var errSkippedDown = errors.New("not sent: the master is down")

// errReleasedFirst answers for a request of a flight that was not sent
// because a release with its token came first.
var errReleasedFirst = errors.New("not sent: released first")

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

// ErrOlderProxy refuses to start an engine while a proxy of an older
// version (fence keys per resource and a lagging bound per master) grants
// on the same masters: its grants after this version's could carry lower
// fences (docs/design/fencing.md, "Upgrading from a proxy with fence
// keys").
var ErrOlderProxy = errors.New("quorum: an older redlock-proxy (per-resource fence keys) is granting on these masters: stop every older proxy before starting this version (CHANGELOG.md, upgrade notes)")
