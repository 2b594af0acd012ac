package quorum

import (
	"context"
	"time"
)

// Keys names everything one operation touches on a master. Locks, Fences and
// Channels are parallel slices: entry i of each belongs to the same resource.
// Locks are in canonical (sorted) order.
type Keys struct {
	// Locks are the lock keys, <key_prefix><resource>, holding the token.
	Locks []string
	// Fences are the per-resource fence counters under the meta prefix.
	Fences []string
	// Channels are the pub/sub channels a release publishes on, so that
	// waiters on any proxy wake up.
	Channels []string
	// Floor is the master's fence floor: every fence counter on that
	// master reads as at least the floor. It is raised when a master that
	// lost its data rejoins.
	Floor string
	// HighWater is the highest fence ever written back to that master.
	HighWater string
}

// Identity is who answers on a master's current connection.
type Identity struct {
	// RunID is the master's run_id (INFO server); "" if it did not say.
	RunID string
	// Conn changes with every new connection to the master.
	Conn uint64
}

// AcquireReply is one master's answer to an acquire.
type AcquireReply struct {
	// OK is true when the master now holds every lock key with the token.
	OK bool
	// Fences are the master's fence counters after the acquire raised each
	// to max(counter, floor)+1, parallel to Keys.Locks; set only when OK.
	Fences []uint64
}

// Node is one Redis master as the engine sees it. Every method must be
// atomic on the master and idempotent, and must honour ctx's deadline.
// Implementations must be safe for concurrent use.
type Node interface {
	// Addr identifies the master in logs and INFO.
	Addr() string
	// Acquire sets every lock key to token with the ttl if each is absent or
	// already holds token, and in the same atomic step raises each fence
	// counter to max(counter, floor)+1 (and the high-water mark with it);
	// otherwise it changes nothing and returns OK false.
	Acquire(ctx context.Context, k Keys, token string, ttl time.Duration) (AcquireReply, error)
	// SetFences raises each fence counter to at least fences[i], only if
	// every lock key still holds token. It reports whether it did.
	SetFences(ctx context.Context, k Keys, token string, fences []uint64) (bool, error)
	// Release deletes each lock key that holds token, publishes on the
	// matching channel for each (if Keys.Channels is not empty), and returns
	// how many it deleted.
	Release(ctx context.Context, k Keys, token string) (int, error)
	// Extend resets the ttl of each lock key that holds token and returns
	// how many it extended.
	Extend(ctx context.Context, k Keys, token string, ttl time.Duration) (int, error)
	// Ping checks that the master answers.
	Ping(ctx context.Context) error
	// Identity returns the run_id seen on the current connection. It must
	// be updated when a new connection is made, before any request is sent
	// on it, so that a restarted master is noticed before its first answer
	// is counted.
	Identity() Identity
	// HighWater returns max(high-water mark, floor) of the master.
	HighWater(ctx context.Context, k Keys) (uint64, error)
	// RaiseFloor raises the master's floor and high-water mark to at least
	// v.
	RaiseFloor(ctx context.Context, k Keys, v uint64) error
	// Subscribe asks for release notifications on channel; it does not
	// wait. Messages are delivered to the Notifier the node was built with.
	Subscribe(channel string)
	// Unsubscribe withdraws a Subscribe; it does not wait.
	Unsubscribe(channel string)
	// Subscribed waits until every channel asked for is subscribed, or ctx
	// is done.
	Subscribed(ctx context.Context, channel string) error
}
