package proxy

import (
	"context"
	"fmt"
	"strings"
)

// Handler runs one command. args are the arguments after the command name.
// It returns the reply value (see resp.go) or an error; it never writes to
// the connection itself. Errors are turned into RESP errors by the server's
// ErrorMapper, in one place.
type Handler func(ctx context.Context, s *Session, args [][]byte) (reply any, err error)

// Flag describes a command for dispatch and for COMMAND output.
type Flag uint

// The flags a command may have.
const (
	// FlagMayBlock: the command may wait (WAIT); while it runs, the
	// connection is watched so that a client that hangs up cancels it.
	FlagMayBlock Flag = 1 << iota
	// FlagNoAuth: allowed before authentication (AUTH, HELLO, QUIT, PING).
	FlagNoAuth
	// FlagWrite: changes state on the masters.
	FlagWrite
	// FlagFast: answers without waiting on the masters.
	FlagFast
	// FlagTx: runs at once inside MULTI instead of being queued (MULTI,
	// EXEC, DISCARD, WATCH, QUIT, RESET).
	FlagTx
	// FlagNoMulti: refused inside MULTI ("Command not allowed inside a
	// transaction"), which aborts the transaction.
	FlagNoMulti
	// FlagAdmin: only a user with Admin (or the default user with
	// Auth.DefaultAdmin) may run it; others are answered NOPERM, as
	// Redis's ACL answers a command the user may not run.
	FlagAdmin
)

func (f Flag) names() []string {
	var out []string
	for _, x := range []struct {
		f    Flag
		name string
	}{{FlagWrite, "write"}, {FlagMayBlock, "blocking"}, {FlagNoAuth, "no_auth"}, {FlagFast, "fast"}, {FlagNoMulti, "no_multi"}, {FlagAdmin, "admin"}} {
		if f&x.f != 0 {
			out = append(out, x.name)
		}
	}
	return out
}

// Command is one entry of the command table: it feeds dispatch, arity
// errors, COMMAND, COMMAND DOCS and metric labels.
type Command struct {
	// Name is the lower-case command name.
	Name string
	// Arity counts the command name; negative means "at least -Arity".
	Arity int
	// Flags, see Flag.
	Flags Flag
	// FirstKey, LastKey and Step locate resource arguments, as in COMMAND
	// (LastKey -1: the last argument). Dispatch checks each against the
	// user's resource patterns before the handler runs.
	FirstKey, LastKey, Step int
	// Keys, if set, locates the resource arguments instead of FirstKey,
	// LastKey and Step, for a command whose keys move (RMULTILOCK's
	// numkeys); COMMAND then reports movablekeys, as Redis does for EVAL.
	// It gets args with the command name and returns the resources it
	// finds; a malformed command may yield none (the handler refuses it).
	Keys func(args [][]byte) [][]byte
	// Channels, if set, locates the pub/sub channels the command names
	// (args with the command name), and whether they are patterns
	// (PSUBSCRIBE). Dispatch checks each against the user's channel
	// patterns before the handler runs.
	Channels func(args [][]byte) (names [][]byte, patterns bool)
	// Blocks, if set, tells for a FlagMayBlock command whether this
	// invocation (args with the command name) may wait: only then is the
	// connection watched for a client that hangs up, which costs a
	// goroutine and deadline changes per command. It may answer true for
	// an invocation that will not wait, never false for one that may. Nil
	// means every invocation may wait.
	Blocks func(args [][]byte) bool
	// Concurrent, if set, tells whether this invocation (args with the
	// command name) may run beside the other pipelined commands of its
	// connection: it must not wait (no WAIT), must not depend on the
	// connection's state beyond what its resources order (commands naming
	// the same resource keep their order), and a reply whose value decays
	// (a validity) must be Late. Nil means never.
	Concurrent func(args [][]byte) bool
	// Handler runs the command.
	Handler Handler
	// Result says how the command's reply counts in the result label of
	// its metrics and in INFO: see Result. The zero value is ResultOK.
	Result Result
	// Doc describes the command for COMMAND DOCS (redis-cli hints).
	Doc Doc
}

// Result tells how a command's reply reads as an outcome, for the
// result label of its metrics: "granted", "not_granted", "ok" or "error".
// An error reply is always "error".
type Result uint8

// The ways a reply reads as an outcome.
const (
	// ResultOK: any reply that is not an error is "ok" (PING, INFO,
	// RLOCKINFO, RLATCH ...): the command grants nothing.
	ResultOK Result = iota
	// ResultNull: a null reply is "not_granted", any other value
	// "granted" (acquires and extensions: RLOCK, REXTEND, SET ... NX).
	ResultNull
	// ResultZero: the integer 0 is "not_granted", any other value
	// "granted" (releases: RUNLOCK answers 1 when the token held the lock
	// up to the release, 0 when it did not; RLATCHWAIT 1 open, 0 not).
	ResultZero
)

// The values of the result label.
const (
	ResultGranted    = "granted"
	ResultNotGranted = "not_granted"
	ResultLabelOK    = "ok"
	ResultError      = "error"
)

// Labels are the result label values the command can report, in a fixed
// order, so that its counters can exist (at 0) before its first call.
func (r Result) Labels() []string {
	if r == ResultOK {
		return []string{ResultLabelOK, ResultError}
	}
	return []string{ResultGranted, ResultNotGranted, ResultError}
}

// Of reads reply (a final value, not a Late) as one of r.Labels().
func (r Result) Of(reply any) string {
	if _, ok := reply.(*Error); ok {
		return ResultError
	}
	switch r {
	case ResultNull:
		if reply == nil {
			return ResultNotGranted
		}
		return ResultGranted
	case ResultZero:
		if isZero(reply) {
			return ResultNotGranted
		}
		return ResultGranted
	}
	return ResultLabelOK
}

// isZero reports whether v is an integer 0 (or null: nothing granted).
func isZero(v any) bool {
	switch v := v.(type) {
	case nil:
		return true
	case int:
		return v == 0
	case int64:
		return v == 0
	case bool:
		return !v
	}
	return false
}

// Doc is a command's documentation, as COMMAND DOCS returns it.
type Doc struct {
	Summary string
	Since   string
	Group   string
	Args    []ArgDoc
}

// ArgDoc is one argument in COMMAND DOCS. Type is one of Redis's argument
// types: "key", "string", "integer", "pure-token", "block", "oneof".
type ArgDoc struct {
	Name     string
	Type     string
	Token    string
	Optional bool
	Multiple bool
	Args     []ArgDoc
}

// Table maps command names to commands.
type Table struct {
	byName map[string]*Command
	order  []*Command
}

// NewTable builds a table; a duplicate name is an error.
func NewTable(cmds ...*Command) (*Table, error) {
	t := &Table{byName: make(map[string]*Command, len(cmds))}
	for _, c := range cmds {
		name := strings.ToLower(c.Name)
		if _, dup := t.byName[name]; dup {
			return nil, fmt.Errorf("proxy: command %q defined twice", name)
		}
		if c.Arity == 0 || c.Handler == nil {
			return nil, fmt.Errorf("proxy: command %q needs an arity and a handler", name)
		}
		c.Name = name
		t.byName[name] = c
		t.order = append(t.order, c)
	}
	return t, nil
}

// Lookup finds a command by name, case-insensitively.
func (t *Table) Lookup(name []byte) *Command {
	// Most clients send upper or lower case; avoid allocating for those.
	if c, ok := t.byName[string(name)]; ok {
		return c
	}
	return t.byName[strings.ToLower(string(name))]
}

// Commands returns every command in the order they were added.
func (t *Table) Commands() []*Command { return t.order }

func (c *Command) arityOK(n int) bool {
	if c.Arity > 0 {
		return n == c.Arity
	}
	return n >= -c.Arity
}

// info is the command's COMMAND INFO entry (Redis 7 layout).
func (c *Command) info() []any {
	flags := make([]any, 0, 4)
	for _, f := range c.Flags.names() {
		flags = append(flags, SimpleString(f))
	}
	if c.Keys != nil {
		flags = append(flags, SimpleString("movablekeys"))
	}
	return []any{c.Name, c.Arity, flags, c.FirstKey, c.LastKey, c.Step, []any{}, []any{}, []any{}, []any{}}
}

// docs is the command's COMMAND DOCS entry.
func (c *Command) docs() Map {
	m := Map{
		{"summary", c.Doc.Summary},
		{"since", c.Doc.Since},
		{"group", c.Doc.Group},
	}
	if len(c.Doc.Args) > 0 {
		m = append(m, KV{"arguments", argDocs(c.Doc.Args)})
	}
	return m
}

func argDocs(args []ArgDoc) []any {
	out := make([]any, 0, len(args))
	for _, a := range args {
		m := Map{{"name", a.Name}, {"type", a.Type}}
		if a.Token != "" {
			m = append(m, KV{"token", a.Token})
		}
		var flags []any
		if a.Optional {
			flags = append(flags, SimpleString("optional"))
		}
		if a.Multiple {
			flags = append(flags, SimpleString("multiple"))
		}
		if len(flags) > 0 {
			m = append(m, KV{"flags", flags})
		}
		if len(a.Args) > 0 {
			m = append(m, KV{"arguments", argDocs(a.Args)})
		}
		out = append(out, m)
	}
	return out
}

// KeysOf returns the resources args name (args includes the command
// name, as key positions count it).
func (c *Command) KeysOf(args [][]byte) [][]byte {
	if c.Keys != nil {
		return c.Keys(args)
	}
	if c.FirstKey <= 0 {
		return nil
	}
	last := c.LastKey
	if last < 0 {
		last = len(args) + last
	}
	step := max(c.Step, 1)
	var out [][]byte
	for i := c.FirstKey; i <= last && i < len(args); i += step {
		out = append(out, args[i])
	}
	return out
}

// allowsChannels reports whether u may use every channel args name.
func (c *Command) allowsChannels(u *user, args [][]byte) bool {
	if c.Channels == nil || u.channels == nil {
		return true
	}
	names, patterns := c.Channels(args)
	for _, n := range names {
		if patterns && !u.allowsPattern(n) || !patterns && !u.allowsChannel(n) {
			return false
		}
	}
	return true
}

// allows reports whether u may use every resource args name (args
// includes the command name, as key positions count it).
func (c *Command) allows(u *user, args [][]byte) bool {
	if u.patterns == nil {
		return true
	}
	for _, r := range c.KeysOf(args) {
		if !u.allows(r) {
			return false
		}
	}
	return true
}
