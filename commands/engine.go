package commands

import (
	"context"
	"time"

	"github.com/redlock-proxy/redlock-proxy/quorum"
)

// Engine is what the commands need of the quorum engine: exactly the
// methods of *quorum.Engine they call. The proxy passes the real engine;
// the tests pass a fake that scripts each answer, so that every reply and
// error of a handler is tested without masters.
type Engine interface {
	// Exclusive locks (RLOCK, RMULTILOCK, drop-in SET NX and scripts).
	Lock(ctx context.Context, req quorum.LockRequest) (*quorum.Lease, error)
	Unlock(ctx context.Context, resources []string, token string) (held bool, err error)
	Extend(ctx context.Context, resources []string, token string, ttl time.Duration) (time.Duration, error)
	ExtendOwned(ctx context.Context, resources []string, token string, ttl time.Duration) (time.Duration, error)
	Abandon(ctx context.Context, l *quorum.Lease)
	DeleteHeld(ctx context.Context, resource, value string) (held bool, err error)
	LockInfo(ctx context.Context, resource string) (*quorum.LockInfo, error)

	// Fair locks.
	FairLock(ctx context.Context, req quorum.LockRequest) (*quorum.Lease, error)
	FairAbandon(ctx context.Context, l *quorum.Lease)

	// Read locks.
	ReadLock(ctx context.Context, req quorum.LockRequest) (*quorum.Lease, error)
	ReadUnlock(ctx context.Context, resource, token string) (held bool, err error)
	ReadExtend(ctx context.Context, resource, token string, ttl time.Duration) (time.Duration, error)
	ReadAbandon(ctx context.Context, l *quorum.Lease)

	// Semaphores.
	SemAcquire(ctx context.Context, req quorum.SemRequest) (*quorum.SemLease, error)
	SemRelease(ctx context.Context, name, token string) (held bool, err error)
	SemExtend(ctx context.Context, name, token string, ttl time.Duration) (time.Duration, error)
	SemAbandon(ctx context.Context, l *quorum.SemLease)
	SemCount(ctx context.Context, name string) (int, error)

	// Latches.
	LatchCreate(ctx context.Context, name string, count int, ttl time.Duration) (created bool, err error)
	LatchDown(ctx context.Context, name, token string) (left int, err error)
	LatchWait(ctx context.Context, name string, wait time.Duration) (open bool, err error)
	LatchCount(ctx context.Context, name string) (left int, err error)

	// Masters and their quarantine (INFO masters, RQUARANTINE).
	Status() []quorum.NodeStatus
	Quorum() int
	Master(name string) (int, error)
	EndQuarantine(ctx context.Context, i int, by string) (quorum.NodeStatus, error)
}

var _ Engine = (*quorum.Engine)(nil)
