package quorum

import (
	"context"
	"time"
)

// ShardedNode is a Node made of shards that each serve some hash slots (a
// Redis Cluster; the engine then uses the slotted layout, see
// Options.Slotted). It keeps a shard that may have lost data (restarted,
// failed over) out of the vote itself: the shard's requests fail until its
// quarantine is over and its slots' fence floors were raised with the
// function the engine gives AttachFloors (see docs/design/cluster.md).
type ShardedNode interface {
	Node
	// AttachFloors gives the node the engine's function that raises the
	// fence floors of some slots on it from the other masters. The node
	// calls it from its own goroutine; the floor writes it makes are the
	// only requests a shard out of the vote must run. The function calls
	// raised (from its own goroutines) for each slot whose floor it
	// wrote, also when it then fails for another slot: a raise cut short
	// keeps what it did.
	AttachFloors(raise func(ctx context.Context, slots []int, raised func(slot int)) error)
	// Shards reports the shards serving slots now.
	Shards() []ShardStatus
	// EndQuarantine ends the quarantine of every slot out of the vote now
	// (an operator's word, see Engine.EndQuarantine): each votes again
	// once its fence floor is raised. It returns how many slots it ended.
	EndQuarantine() int
}

// ShardStatus is one shard of a cluster master, for INFO and metrics.
type ShardStatus struct {
	// Addr is the shard's address.
	Addr string
	// Slots is how many hash slots it serves.
	Slots int
	// Up is set while its connection is up.
	Up bool
	// Voting is unset while some of its slots are quarantined (it
	// restarted or failed over) or their fence floors are not raised yet.
	Voting bool
	// Out is how many of its slots do not vote.
	Out int
	// QuarantineLeft is how long its quarantine still lasts.
	QuarantineLeft time.Duration
	// Restarts and Failovers count the run_id changes and the failovers
	// (slots taken over while not a master) seen since the proxy started.
	Restarts, Failovers int
	// Why says why it does not vote ("" while it does).
	Why string
}

// Identity is who answers on a master's current connection.
type Identity struct {
	// RunID is the master's run_id (INFO server); "" if it did not say.
	RunID string
	// Conn changes with every new connection to the master: 0 until
	// the first one is made, which is 1 (the engine learns a master's
	// first run_id from a Conn it has not seen).
	Conn uint64
}

// Node is one Redis master as the engine sees it. Implementations must be
// safe for concurrent use and must honour ctx's deadline.
//
// A Node knows nothing of locks: every operation of every primitive is a
// named script (quorum/scripts/<name>.lua) that Eval runs
// atomically on the master.
type Node interface {
	// Addr identifies the master in logs and INFO.
	Addr() string
	// Eval runs the script called name with keys and args and returns its
	// reply as plain Go values: int64 for an integer, string for a
	// string, nil for a nil, []any for an array of these. A script error
	// is an error.
	Eval(ctx context.Context, name string, keys, args []string) (any, error)
	// Send is Eval without waiting: it issues the request (requests to one
	// master reach it in the order Send was called) and returns; done is
	// called once with the reply, from another goroutine or, if the
	// request could not be issued, on the caller's. done must not block.
	// Send has no deadline: the caller bounds its wait itself.
	Send(name string, keys, args []string, done func(v any, err error))
	// Ping checks that the master answers.
	Ping(ctx context.Context) error
	// Exists is Redis's EXISTS sent as a plain command, not a script: how
	// many of keys the master holds. The health loop's periodic probes use
	// it, so that they add nothing to a master's script statistics.
	Exists(ctx context.Context, keys ...string) (int64, error)
	// Identity returns the run_id seen on the current connection. It must
	// be updated when a new connection is made, before any request is sent
	// on it, so that a restarted master is noticed before its first answer
	// is counted.
	Identity() Identity
	// Subscribe asks for release notifications on channel; it does not
	// wait. Messages are delivered to the Notifier the node was built with.
	Subscribe(channel string)
	// Unsubscribe withdraws a Subscribe; it does not wait.
	Unsubscribe(channel string)
	// Subscribed waits until every channel asked for is subscribed, or ctx
	// is done.
	Subscribed(ctx context.Context, channel string) error
	// PSubscribe is Subscribe for a pattern (Redis's glob): the Notifier
	// gets each matching message with the channel it was published on.
	// It does not wait.
	PSubscribe(pattern string)
	// PUnsubscribe withdraws a PSubscribe; it does not wait.
	PUnsubscribe(pattern string)
	// PSubscribed waits until pattern is subscribed, or ctx is done.
	PSubscribed(ctx context.Context, pattern string) error
}
