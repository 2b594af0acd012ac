package commands

import (
	"context"

	"github.com/redlock-proxy/redlock-proxy/proxy"
	"github.com/redlock-proxy/redlock-proxy/relay"
)

// Publisher hands a message to the subscribers of a channel on every
// proxy that shares the masters, once each (SUBSCRIBE, PSUBSCRIBE and
// PUBLISH are served by package proxy; the messages travel through
// relay.Bus). It is what the PUBLISH that ends a lock script runs in
// drop-in mode: run the lock operation first, then, if the script would
// have reached its PUBLISH on one Redis, call Publish with the channel
// and message the script names (Spring's unlock: ARGV[2], KEYS[1]).
//
// Publish returns how many of this proxy's subscribers received the
// message (Redis's PUBLISH counts every subscriber; the other proxies'
// are not known). Its error is a *quorum.QuorumError (mapped to
// -NOQUORUM) when fewer than a quorum of masters took the message: this
// proxy's subscribers have it, another proxy's may not. A script whose
// lock operation succeeded should still answer as it would: its client
// waits for the reply of the release, not for the message.
type Publisher interface {
	Publish(ctx context.Context, channel, message string) (receivers int, err error)
}

var _ Publisher = (*relay.Bus)(nil)

// The bus is the proxy's Broker, and reports releases for CLIENT TRACKING.
var (
	_ proxy.Broker     = (*relay.Bus)(nil)
	_ proxy.KeyWatcher = (*relay.Bus)(nil)
)
