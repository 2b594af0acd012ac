package commands

import (
	"context"
	"time"

	"github.com/redlock-proxy/redlock-proxy/quorum"
)

// Engine is what the commands need of the quorum engine, in the parts the
// engine gives them: the lease verbs every primitive has, the operators'
// verbs, and the election's and the semaphore's own verbs. Handlers
// depend on these interfaces, not on the engine type, so that their
// replies and errors are tested without masters.
type Engine struct {
	Leases
	Operator   Operator
	Elections  Elections
	Semaphores Semaphores
}

// Leases are the verbs over one lease value (quorum.Engine's).
type Leases interface {
	Acquire(ctx context.Context, req quorum.Request) (*quorum.Lease, error)
	Release(ctx context.Context, l *quorum.Lease) (held bool, err error)
	Extend(ctx context.Context, l *quorum.Lease, ttl time.Duration) (time.Duration, error)
	Abandon(ctx context.Context, l *quorum.Lease)
	Info(ctx context.Context, p quorum.Primitive, name string) (*quorum.Info, error)
	Latch(ctx context.Context, req quorum.LatchRequest) (int, error)
}

// Operator is the operators' verbs (quorum.Operator).
type Operator interface {
	Status() quorum.Status
	EndQuarantine(ctx context.Context, master, by string) (quorum.NodeStatus, error)
	Break(ctx context.Context, resource, by string) (bool, error)
	Delete(ctx context.Context, resources []string) (int, error)
	List(ctx context.Context, cursor uint64, count int, match func(name string) bool) (uint64, []quorum.ListEntry, error)
	Waiters(ctx context.Context, p quorum.Primitive, name, token string) (n, place int, err error)
}

// Elections is the election's own verbs (quorum.Elections).
type Elections interface {
	Proclaim(ctx context.Context, election, token, value string) (bool, error)
	Watch(ctx context.Context, election string, f func(*quorum.Info, error) bool) error
}

// Semaphores is the semaphore's own verb (quorum.Semaphores).
type Semaphores interface {
	Set(ctx context.Context, name string, limit int, keep time.Duration) error
}

// FromQuorum is the commands' view of a quorum engine.
func FromQuorum(e *quorum.Engine) Engine {
	return Engine{Leases: e, Operator: e.Operator(), Elections: e.Elections(), Semaphores: e.Semaphores()}
}
