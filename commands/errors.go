package commands

import (
	"context"
	"errors"
	"fmt"

	"github.com/redlock-proxy/redlock-proxy/proxy"
	"github.com/redlock-proxy/redlock-proxy/quorum"
)

// Argument errors of the lock commands that Redis has no wording for.
var (
	errEmptyResource = proxy.Errorf("resource name must not be empty")
	errTokenLen      = proxy.Errorf("token must be 1 to %d bytes", MaxTokenLen)
	errWaitNegative  = proxy.Errorf("timeout is negative")
	// A re-entrant hold is counted for its token, and kept alive by the
	// holder (a kept lease would stop at the first RUNLOCK).
	errReentrantToken = proxy.Errorf("REENTRANT needs TOKEN")
	errReentrantAuto  = proxy.Errorf("REENTRANT and AUTOEXTEND cannot be combined")
	errTooManyHolds   = proxy.Errorf("too many re-entrant holds of the lock")
)

// MapError is the single table from engine errors to RESP errors. The proxy
// calls it for every error a handler returns that is not already a
// *proxy.Error. It returns nil for an error it does not know.
func MapError(err error) *proxy.Error {
	var qe *quorum.QuorumError
	var le *quorum.LimitError
	var lce *quorum.LatchCountError
	var ce *quorum.CountError
	switch {
	case errors.As(err, &ce):
		return proxy.Errorf("count must be 1 to the limit (the semaphore's limit is %d)", ce.Limit)
	case errors.Is(err, quorum.ErrNoSemLimit):
		return proxy.Errorf("no limit stored for the semaphore on a quorum of masters: give one, or set it with RSEMSET")
	case errors.As(err, &le):
		return proxy.Errorf("semaphore '%s' has limit %d", le.Name, le.Limit)
	case errors.As(err, &lce):
		return proxy.Errorf("latch '%s' has count %d", lce.Name, lce.Count)
	case errors.Is(err, quorum.ErrTooManyHolds):
		return errTooManyHolds
	case errors.Is(err, quorum.ErrBadCursor):
		return errBadCursor
	case errors.Is(err, quorum.ErrNoLatch):
		return errNoLatch
	case errors.Is(err, quorum.ErrListClusters):
		return proxy.Errorf("RLOCKLIST does not list cluster masters (docs/PROTOCOL.md, Cluster masters)")
	case errors.Is(err, quorum.ErrNotQuarantined):
		return proxy.Errorf("master is not quarantined (RQUARANTINE LIST shows each master)")
	case errors.Is(err, quorum.ErrNoSuchMaster):
		return proxy.Errorf("no such master: give its index in masters (from 0) or its addr, as RQUARANTINE LIST shows them")
	case errors.As(err, &qe):
		return &proxy.Error{Code: "NOQUORUM", Msg: fmt.Sprintf("%d of %d masters answered, %d needed%s", qe.Got, qe.Total, qe.Need, qe.Why())}
	case errors.Is(err, quorum.ErrReservedResource):
		return proxy.Errorf("resource name is reserved")
	case errors.Is(err, quorum.ErrBadRequest):
		return proxy.ErrSyntax
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		// A waiting client that hung up reads nothing; the one left to
		// read this is a client whose wait the shutdown cut short.
		return proxy.Errorf("wait canceled: server shutting down")
	}
	return nil
}
