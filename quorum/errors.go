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

// errSplitVote is a refused try that some masters granted: the acquire
// loop retries it after a short random delay (retry.go, stepSplit) and
// never returns it.
var errSplitVote = errors.New("refused by a split vote")

// errReleasedFirst answers for a request of a flight that was not sent
// because a release with its token came first.
var errReleasedFirst = errors.New("not sent: released first")

// QuorumError reports that fewer than a quorum of masters answered.
type QuorumError struct {
	// Op is the operation: "lock", "unlock" or "extend".
	Op string
	// Got is how many masters answered; Need is the quorum; Total is N.
	Got, Need, Total int
	// Yes and No split Got, when known (releases and extensions): how many
	// answered that the token held it and how many that it did not. With
	// a quorum of answers that still decide nothing, Why says so.
	Yes, No int
	// Agree is the most of the Yes that hold the same thing (a
	// semaphore's permits: its slots); 0 when they all do.
	Agree int
	// Unsure is how many of the masters not counted in Got answered "not
	// held" to a request sent again, which proves nothing (the first
	// request may have released it late).
	Unsure int
	// Errs are the errors of the masters that did not answer.
	Errs []error
}

// Error implements error.
func (e *QuorumError) Error() string {
	return fmt.Sprintf("quorum: %s: %d of %d masters answered, %d needed%s", e.Op, e.Got, e.Total, e.Need, e.Why())
}

// Why explains, when a quorum of masters answered and still decided
// nothing, how their answers split: "" otherwise (too few answered says
// it all). A release or extension is decided when Need masters answered
// that the token held it, or when too few are left to make Need (it was
// not held where it counts); answers split between the two decide
// neither while the silent masters could still tip them.
func (e *QuorumError) Why() string {
	if e.Got+e.Unsure < e.Need || e.Yes+e.No != e.Got {
		return ""
	}
	silent := fmt.Sprintf("%d did not answer", e.Total-e.Got-e.Unsure)
	if e.Unsure > 0 {
		silent = fmt.Sprintf("%d found nothing when asked again (their first request may have released it) and %s", e.Unsure, silent)
	}
	if e.Agree > 0 && e.Agree < e.Yes {
		return fmt.Sprintf(": %d held it but only %d of them the same permits, %d did not hold it, %s; %d agreeing decide it held",
			e.Yes, e.Agree, e.No, silent, e.Need)
	}
	return fmt.Sprintf(": %d held it and %d did not, %s; %d holding it decide it held, and %d not holding it that it was not",
		e.Yes, e.No, silent, e.Need, e.Total-e.Need+1)
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
