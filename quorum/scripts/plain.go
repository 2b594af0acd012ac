package scripts

import (
	"errors"
	"strconv"
	"strings"
)

// A plain form (see the package doc) is not atomic: other clients'
// commands may run between its commands. Entering and leaving Lua is most
// of what a short script costs a master (a cold EVALSHA of three commands
// costs it about five times the commands), so the commonest call, a plain
// lock's acquire of one resource, is sent as three commands in one write
// (lockAcquirePlain). The commands of one form run in order, on one
// connection; the engine's unit tests and the simulation run the plain
// forms on their embedded masters too.

// Step is one write of a script's plain form: its commands, and what to
// make of their replies.
type Step struct {
	// Commands are sent together, in order, on one connection.
	Commands [][]string
	// Then reads the replies, one per command (a Redis error reply is an
	// error value), and says what comes next.
	Then func(replies []any) Outcome
}

// Outcome is what a Step's replies lead to: the script's reply (or
// error), another step sent next on the same connection, or the script's
// Lua form run on the same connection with the same keys and arguments,
// whose reply is then the script's.
type Outcome struct {
	Reply any
	Err   error
	Next  *Step
	Lua   bool
}

// Plain returns the plain form of a call of s, or nil when s has none for
// these keys and arguments (they are then sent as the script). keys and
// args must fit the descriptor (Check).
func (s *Script) Plain(keys, args []string) *Step {
	if s.plain == nil {
		return nil
	}
	return s.plain(keys, args)
}

// plainForm sets s's plain form and returns s (for the descriptors'
// table).
func (s *Script) plainForm(f func(keys, args []string) *Step) *Script {
	s.plain = f
	return s
}

// errReply is a reply that is not what the command answers.
var errReply = errors.New("scripts: unexpected reply")

// lockAcquirePlain is lock_acquire for one resource: a plain lock's
// acquire, the call every uncontended RLOCK makes. Its commands, in this
// order:
//
//  1. SET lock token NX PX ttl GET: takes the key when it is free; else
//     answers what it holds.
//  2. INCR seq: the try's fence on this master, c = seq + 1. It runs
//     whether the key was taken or not (the sequence only has to grow);
//     the proposal is not applied here (see below).
//  3. PTTL lease: whether the lease mark already lives as long as the
//     grant.
//
// A key that was free is granted with fence c: {1, c, c}. A key that
// holds another value is refused: {0, c}. A key that holds the token
// already (a TOKEN retry, a try after a rollback that did not reach this
// master) is handed to the Lua form, which keeps the longer ttl and
// grants it atomically. That Lua form is a second request: it runs after
// whatever was sent on the connection meanwhile. If that was the try's
// own rollback (the master answered after the engine's master timeout
// and the try failed), the key is taken again for the token and lives out
// its ttl: on that one master it refuses other tokens until it expires,
// as any key left by a try that failed does. Only a key that held
// the token already can take that path (a fresh random token never
// meets itself). A grant whose lease mark would expire before the
// grant's key writes the mark first (SET NX PX and PEXPIRE GT of
// ttl + ttl/8: it is created, or its expiry pushed out, never pulled in)
// and answers only then, so that no grant is counted before the mark
// covers it (docs/design/restarts.md); with a stream of grants that is
// once per eighth of their ttl, as in the Lua form.
//
// Why answering c is what the fence argument needs
// (docs/design/fencing.md): INCR runs after the SET on the same connection,
// so a grant's c is above every fence this master held before its key was
// taken, as the Lua form's; and if the key had expired before INCR ran,
// more than the ttl would have passed on this master since the try was
// sent, and the try's validity would be spent: it is not granted. What the
// Lua form adds, raising the sequence to the proposal, only helps a master
// that missed grants catch up; here the fence write-back does that
// (lock_fence, sent to every counted master that answered below the
// grant's fence).
//
// Only where the proposal is not needed: a per-slot sequence (the slotted
// layout, whose keys carry a hash tag) starts empty on a master that
// served the layout without slots, and only the proposal lifts its fences
// above those issued before (quorum's learnUnslotted), so such calls run
// the Lua form.
func lockAcquirePlain(keys, args []string) *Step {
	if len(keys) != 5 {
		return nil
	}
	lock, seq, lease := keys[0], keys[3], keys[4]
	if strings.IndexByte(seq, '{') >= 0 {
		return nil
	}
	token, ttl := args[0], args[1]
	ms, err := strconv.ParseInt(ttl, 10, 64)
	if err != nil || ms <= 0 {
		return nil
	}
	return &Step{
		Commands: [][]string{
			{"SET", lock, token, "NX", "PX", ttl, "GET"},
			{"INCR", seq},
			{"PTTL", lease},
		},
		Then: func(r []any) Outcome {
			for _, v := range r {
				if err, ok := v.(error); ok {
					return Outcome{Err: err}
				}
			}
			c, ok1 := r[1].(int64)
			left, ok2 := r[2].(int64)
			if !ok1 || !ok2 {
				return Outcome{Err: errReply}
			}
			switch old := r[0].(type) {
			case nil:
			case string:
				if old == token {
					return Outcome{Lua: true}
				}
				return Outcome{Reply: []any{int64(0), c}}
			default:
				return Outcome{Err: errReply}
			}
			granted := []any{int64(1), c, c}
			if left >= ms {
				return Outcome{Reply: granted}
			}
			px := strconv.FormatInt(ms+ms/8, 10)
			return Outcome{Next: &Step{
				Commands: [][]string{
					{"SET", lease, "1", "NX", "PX", px},
					{"PEXPIRE", lease, px, "GT"},
				},
				Then: func(r []any) Outcome {
					for _, v := range r {
						if err, ok := v.(error); ok {
							return Outcome{Err: err}
						}
					}
					return Outcome{Reply: granted}
				},
			}}
		},
	}
}
