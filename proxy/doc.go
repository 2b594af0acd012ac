// Package proxy is the RESP server of redlock-proxy: it accepts client
// connections (on github.com/tidwall/redcon, one goroutine per
// connection), answers the connection and server commands that ordinary
// Redis clients send while connecting (PING, HELLO 2|3, AUTH, CLIENT,
// SELECT, COMMAND, INFO, ...), and dispatches everything else through one
// command table.
//
// It knows RESP and nothing of Redlock: lock commands are registered by
// package commands as table entries with handlers that return values.
//
// Guarantees:
//   - A panic in a handler answers "-ERR internal error" to that command
//     only; the connection and every other client carry on.
//   - Replies are encoded for the connection's protocol: RESP2 until the
//     client sends HELLO 3, RESP3 after (null is "_", maps are maps).
//   - A command flagged FlagMayBlock has its context cancelled when its
//     client hangs up or the server shuts down; bytes the client pipelined
//     meanwhile are kept for the next commands.
//   - Malformed RESP answers "-ERR Protocol error: ..." and closes that
//     connection only.
//
// Not yet: authentication (every connection is the default user),
// input-size limits enforced before buffering, TLS.
package proxy
