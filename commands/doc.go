// Package commands holds the lock commands of redlock-proxy, one file per
// family: it parses their arguments, calls the quorum engine and shapes the
// replies of PROTOCOL.md. It is the only package that knows both RESP and
// the engine, and it holds the single table from engine errors to RESP
// error codes (errors.go).
//
// Replies: a grant is an array; contention is the null reply, exactly like
// SET ... NX; -NOQUORUM means fewer than a quorum of masters answered, so
// the outcome is unknown and nothing is granted.
package commands
