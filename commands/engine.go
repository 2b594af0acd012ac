package commands

import (
	"context"
	"time"

	"github.com/redlock-proxy/redlock-proxy/quorum"
)

// Engine is what the commands need of the quorum engine: its verbs over
// one lease value (see quorum.Engine). Handlers depend on this interface,
// not on the engine type, so that their replies and errors are tested
// without masters.
type Engine interface {
	Acquire(ctx context.Context, req quorum.Request) (*quorum.Lease, error)
	Release(ctx context.Context, l *quorum.Lease) (held bool, err error)
	Extend(ctx context.Context, l *quorum.Lease, ttl time.Duration) (time.Duration, error)
	Abandon(ctx context.Context, l *quorum.Lease)
	Info(ctx context.Context, p quorum.Primitive, name string) (*quorum.Info, error)
	List(ctx context.Context, cursor uint64, count int, match func(name string) bool) (uint64, []quorum.ListEntry, error)
	Waiters(ctx context.Context, p quorum.Primitive, name, token string) (n, place int, err error)
	Latch(ctx context.Context, req quorum.LatchRequest) (int, error)
	Delete(ctx context.Context, resources []string) (int, error)
	Status() quorum.Status
	EndQuarantine(ctx context.Context, master, by string) (quorum.NodeStatus, error)
	Proclaim(ctx context.Context, election, token, value string) (bool, error)
	WatchElection(ctx context.Context, election string, f func(*quorum.Info, error) bool) error
	SemSet(ctx context.Context, name string, limit int, keep time.Duration) error
	Break(ctx context.Context, resource, by string) (bool, error)
}

var _ Engine = (*quorum.Engine)(nil)
