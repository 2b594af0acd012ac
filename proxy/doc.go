// Package proxy is the RESP server of redlock-proxy: it accepts client
// connections (one goroutine per connection, optionally TLS), reads
// commands through a bounded RESP reader, authenticates clients, answers the connection and server commands that ordinary
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
//   - Pipelined commands whose table entry allows it (Command.Concurrent:
//     the lock commands that do not wait) start at once, each on a
//     goroutine of its own, beside the connection's commands still running,
//     unless one of those names the same resource; at most 16 per
//     connection and 32 in all (maxRunning, maxParallel). Replies go out in order. Any other
//     command first waits for them and writes their replies, and replies
//     are written before a command that is not FlagFast starts. A reply
//     whose value decays (a grant's validity) is Late: computed when it is
//     written, not when its handler returned, so that it never waits in a
//     buffer.
//   - A command flagged FlagMayBlock (and, if it has Blocks, whose
//     arguments may ask to wait) has its context cancelled when its client
//     hangs up or the server shuts down; bytes the client pipelined
//     meanwhile are kept for the next commands.
//   - MULTI / EXEC / DISCARD as Redis serves them (WATCH is refused):
//     inside MULTI a command is checked (unknown, NOAUTH, arity, NOPERM,
//     FlagNoMulti, at most Limits.MaxArgs commands and MaxCommandBytes
//     bytes queued) and answered +QUEUED, or its error, after which EXEC
//     answers EXECABORT and runs nothing; queued commands never start
//     beside others. EXEC runs them in order with the connection watched:
//     a client that hangs up (or a shutdown) stops it, and every Late reply
//     of the transaction is computed together just before the EXEC reply
//     is written, so a grant whose client left is given back. A
//     transaction is not atomic: each command keeps only its own
//     guarantees.
//   - Malformed RESP, an argument over Limits.MaxArgBytes, a command with
//     more than Limits.MaxArgs elements or over Limits.MaxCommandBytes, and
//     an inline line over 64 KB answer "-ERR Protocol error: ..." and close
//     that connection only. Lengths are checked when their header arrives,
//     before the bytes they announce: no length a client claims is
//     allocated, and a connection never buffers more than one command
//     within the limits (plus 64 KB a blocking command's watcher may read
//     ahead). Before authentication the limits are Redis's: 10 arguments of
//     16 KB.
//   - An idle connection holds a 512-byte read array and no other buffer:
//     commands that do not fit borrow a pooled buffer, replies are written
//     from one, and both go back once nothing is buffered.
//   - When authentication is configured, only AUTH, HELLO, QUIT and PING are
//     served before it; a command naming a resource outside the
//     user's patterns is refused with NOPERM before its handler runs.
//   - State a package keeps per connection is a value of its Session
//     (Session.Value, under a key of that package's own), not a map keyed
//     by the session. Session.OnClose functions run once the connection
//     has ended, however it ended, in the order they were registered,
//     after its commands returned (those still running are cancelled and
//     waited for); a panic in one is logged and the others still run.
//   - A command must arrive whole within RequestTimeout of its first
//     bytes (slowloris clients are closed), and replies must be taken
//     within it (clients that never read are closed); IdleTimeout, if
//     set, closes silent connections.
//
// Why not github.com/tidwall/redcon, which the first versions used: its
// reader buffers whatever a client sends (a bulk claiming 1 GB is read into
// memory as it arrives), rescans the whole buffer after every read and recurses once per
// read of an incomplete command, and every connection holds a 4 KB bufio
// reader, a 4 KB parse buffer and a write buffer for its whole life.
package proxy
