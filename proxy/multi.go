package proxy

import (
	"context"
	"runtime/debug"
	"time"
)

// Transactions: MULTI, EXEC, DISCARD, WATCH, UNWATCH, as Redis serves them
// but for WATCH.
//
// Inside MULTI every command but those flagged FlagTx (MULTI, EXEC,
// DISCARD, WATCH, QUIT, RESET) is checked as dispatch checks a command
// (unknown, NOAUTH, arity, NOPERM, FlagNoMulti, the queue's bound) and
// answered +QUEUED, or answered its error, which makes EXEC answer
// EXECABORT and run nothing. EXEC runs the queue in order, on the
// connection's goroutine (never beside other commands), with the
// connection watched as a blocking command's is: a client that hangs up
// cancels what is running, nothing after it runs, and every grant the
// transaction made (a Late reply) is given back when its value is
// computed, which happens for all of them together just before the EXEC
// reply is written.

// tx is a connection's open transaction: the commands queued, and whether
// one was refused. Owned by the connection's goroutine.
type tx struct {
	cmds    []queued
	bytes   int  // the queued arguments' bytes
	aborted bool // a command was refused: EXEC answers EXECABORT
}

// queued is one command waiting for EXEC; args includes the name.
type queued struct {
	cmd  *Command
	args [][]byte
}

var (
	errExecAbort = &Error{Code: "EXECABORT", Msg: "Transaction discarded because of previous errors."}
	errNoMulti   = Errorf("Command not allowed inside a transaction")
	// errTxCut answers the queued commands that did not run because the
	// transaction was cut short: the client left (and reads nothing) or
	// the server is shutting down.
	errTxCut = Errorf("command not run: the transaction was cut short (the client left or the server is shutting down)")
	// ErrWatch is WATCH's answer outside MULTI.
	ErrWatch = Errorf("WATCH is not supported by redlock-proxy: lock keys change on a quorum of masters, not on one (see docs/PROTOCOL.md, Transactions)")
)

// txBuiltins are MULTI, EXEC, DISCARD, WATCH and UNWATCH.
func (s *Server) txBuiltins() []*Command {
	tr := "transactions"
	return []*Command{
		{Name: "multi", Arity: 1, Flags: FlagTx | FlagFast, Handler: multi,
			Doc: Doc{Summary: "Starts a transaction: later commands are checked and queued until EXEC.", Since: "1.2.0", Group: tr}},
		{Name: "exec", Arity: 1, Flags: FlagTx, Handler: s.exec,
			Doc: Doc{Summary: "Runs the queued commands in order and answers their replies. Not atomic across masters: each command keeps its own quorum guarantees.", Since: "1.2.0", Group: tr}},
		{Name: "discard", Arity: 1, Flags: FlagTx | FlagFast, Handler: discard,
			Doc: Doc{Summary: "Discards the queued commands of a transaction.", Since: "2.0.0", Group: tr}},
		{Name: "watch", Arity: -2, Flags: FlagTx | FlagFast, FirstKey: 1, LastKey: -1, Step: 1, Handler: watch,
			Doc: Doc{Summary: "Refused: lock keys cannot be watched across masters.", Since: "2.2.0", Group: tr,
				Args: []ArgDoc{{Name: "key", Type: "key", Multiple: true}}}},
		{Name: "unwatch", Arity: 1, Flags: FlagFast, Handler: unwatch,
			Doc: Doc{Summary: "Forgets watched keys (there are none): +OK.", Since: "2.2.0", Group: tr}},
	}
}

func multi(_ context.Context, sess *Session, _ [][]byte) (any, error) {
	if sess.tx != nil {
		return nil, Errorf("MULTI calls can not be nested")
	}
	sess.tx = &tx{}
	sess.setMulti(0)
	return OK, nil
}

func discard(_ context.Context, sess *Session, _ [][]byte) (any, error) {
	if sess.tx == nil {
		return nil, Errorf("DISCARD without MULTI")
	}
	sess.endTx()
	return OK, nil
}

func watch(_ context.Context, sess *Session, _ [][]byte) (any, error) {
	if sess.tx != nil {
		return nil, Errorf("WATCH inside MULTI is not allowed")
	}
	return nil, ErrWatch
}

func unwatch(context.Context, *Session, [][]byte) (any, error) { return OK, nil }

// queue answers a command sent inside MULTI: +QUEUED, or its error, which
// aborts the transaction. rec.cmd passed dispatch's checks.
func (s *Server) queue(sess *Session, rec *record, args [][]byte) (any, error) {
	t, cmd := sess.tx, rec.cmd
	if cmd.Flags&FlagNoMulti != 0 {
		rec.rejected = true
		t.abort()
		sess.setMulti(0)
		return nil, errNoMulti
	}
	rec.queued = true
	s.totalCmd.Add(-1) // counted when EXEC runs it, as Redis counts it
	if t.aborted {
		// Nothing will run: keep nothing, answer as Redis does.
		return SimpleString("QUEUED"), nil
	}
	lim := &s.limits
	n := 0
	for _, a := range args {
		n += len(a)
	}
	if len(t.cmds) >= lim.MaxArgs || t.bytes+n > lim.MaxCommandBytes {
		s.totalCmd.Add(1)
		rec.queued, rec.rejected = false, true
		t.abort()
		sess.setMulti(0)
		return nil, Errorf("transaction too long: MULTI queues at most %d commands (limits.max_args) and %d bytes of arguments (limits.max_command_bytes)", lim.MaxArgs, lim.MaxCommandBytes)
	}
	t.cmds = append(t.cmds, queued{cmd: cmd, args: cloneArgs(args)})
	t.bytes += n
	sess.setMulti(len(t.cmds))
	return SimpleString("QUEUED"), nil
}

// abort marks the transaction refused and drops what it queued.
func (t *tx) abort() {
	t.aborted = true
	t.cmds, t.bytes = nil, 0
}

// exec is EXEC: it runs the queued commands in order, on a context that
// ends when the client hangs up or the server shuts down (nothing more
// runs then), and computes every Late reply together just before the
// reply is written, while that context still tells whether the client
// is there: a grant whose client left, or whose validity lapsed while the
// later commands ran, is given back as a single command's is.
func (s *Server) exec(ctx context.Context, sess *Session, _ [][]byte) (any, error) {
	t := sess.tx
	if t == nil {
		return nil, Errorf("EXEC without MULTI")
	}
	sess.endTx()
	if t.aborted {
		return nil, errExecAbort
	}
	replies := make([]any, len(t.cmds))
	if len(t.cmds) == 0 {
		return replies, nil
	}
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stopShutdown := context.AfterFunc(s.base, cancel)
	defer stopShutdown()
	// Nothing reads the connection while EXEC runs: watch it, as for a
	// blocking command.
	stop := sess.cc.watch(cancel)
	defer stop()
	recs := make([]record, len(t.cmds))
	took := make([]time.Duration, len(t.cmds))
	for i, q := range t.cmds {
		recs[i] = record{cmd: q.cmd, name: q.cmd.Name, t0: time.Now()}
		if cctx.Err() != nil {
			replies[i], recs[i].rejected = errTxCut, true
			continue
		}
		replies[i] = s.execOne(cctx, sess, q, &recs[i])
		took[i] = time.Since(recs[i].t0)
	}
	for i, r := range replies {
		if l, ok := r.(Late); ok {
			replies[i] = l.value(s)
		}
		// Recorded with its own run's duration, not the transaction's.
		recs[i].t0 = time.Now().Add(-took[i])
		s.done(sess, &recs[i], replies[i])
	}
	return replies, nil
}

// execOne runs one queued command for EXEC and returns its reply, a Late
// one left as it is, or its mapped error; exec records it once the reply
// is final. It checks again what dispatch checked at queue time (an AUTH
// in the transaction may have changed the user), and marks the connection
// blocked while a command that may wait runs (EXEC watches it already).
func (s *Server) execOne(ctx context.Context, sess *Session, q queued, rec *record) (reply any) {
	s.totalCmd.Add(1)
	defer func() {
		if r := recover(); r != nil {
			s.log.Error("panic in command", "command", q.cmd.Name, "panic", r, "stack", string(debug.Stack()))
			reply = Errorf("internal error")
		}
	}()
	sess.mu.Lock()
	sess.lastCmd = q.cmd.Name
	sess.mu.Unlock()
	err := s.admit(sess, q.cmd, q.args)
	if err != nil {
		rec.rejected = true
		return s.mapError(err)
	}
	if q.cmd.Flags&FlagMayBlock != 0 && (q.cmd.Blocks == nil || q.cmd.Blocks(q.args)) {
		s.blocked.Add(1)
		defer s.blocked.Add(-1)
		keys := q.cmd.KeysOf(q.args)
		s.wait(sess, keys, 1)
		defer s.wait(sess, keys, -1)
	}
	reply, err = q.cmd.Handler(ctx, sess, q.args[1:])
	// Tracked with the CLIENT CACHING of the whole transaction (cleared
	// after EXEC).
	reply = s.tracked(sess, q.cmd, q.args, reply, err)
	if err != nil {
		return s.mapError(err)
	}
	return reply
}
