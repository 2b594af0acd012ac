package commands

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"

	"github.com/redlock-proxy/redlock-proxy/proxy"
	"github.com/redlock-proxy/redlock-proxy/quorum"
)

var (
	errEmptyElection = proxy.Errorf("election name must not be empty")
	errValueLen      = proxy.Errorf("value must be at most %d bytes", quorum.MaxElectValue)
	errObserveRESP2  = proxy.Errorf("RELECT OBSERVE needs RESP3 (HELLO 3); RESP2 clients use RELECT WAITCHANGE")
	errTooManyObs    = proxy.Errorf("too many observed elections")
)

func electionName(a *proxy.Args) (string, error) { return nonEmpty(a, errEmptyElection) }

func electValue(a *proxy.Args) (string, error) {
	v, err := a.String()
	if err != nil {
		return "", err
	}
	if len(v) > quorum.MaxElectValue {
		return "", errValueLen
	}
	return v, nil
}

// campaignCall reads "election ttl value [WAIT wait] [AUTOEXTEND]".
func campaignCall(lim Limits) func(args [][]byte) (acquireCall, error) {
	return func(args [][]byte) (acquireCall, error) {
		a := proxy.NewArgs(args)
		var c acquireCall
		c.req.Primitive = quorum.Election
		name, err := electionName(a)
		if err != nil {
			return c, err
		}
		c.req.Resources = []string{name}
		if c.req.TTL, err = ttl(a, "relect", lim); err != nil {
			return c, err
		}
		v, err := electValue(a)
		if err != nil {
			return c, err
		}
		c.req.Options = quorum.ElectionOptions{Value: v}
		seen := map[string]bool{}
		for a.More() {
			opt := a.Option()
			if seen[opt] {
				return c, proxy.ErrSyntax
			}
			seen[opt] = true
			switch opt {
			case "WAIT":
				if c.req.Wait, err = wait(a, lim); err != nil {
					return c, err
				}
			case "AUTOEXTEND":
				c.auto = true
			default:
				return c, proxy.ErrSyntax
			}
		}
		return c, nil
	}
}

// leaderReply is LEADER's reply: [value, term, ttl_ms], or nil when
// nobody leads.
func leaderReply(info *quorum.Info) any {
	if info == nil || !info.Held {
		return nil
	}
	return []any{info.Value, int64(info.Fence), info.TTL.Milliseconds()}
}

// term is the election's term as WAITCHANGE compares it: 0 when nobody
// leads.
func term(info *quorum.Info) uint64 {
	if info == nil || !info.Held {
		return 0
	}
	return info.Fence
}

// electCommands is RELECT, whose subcommands are an election's commands
// (docs/PROTOCOL.md, "Leader election"). A campaign is an acquire (with
// AUTOEXTEND, kept by the keeper), a resignation a release; observers are
// per connection (observers).
func electCommands(eng Engine, lim Limits, k *keeper) []*proxy.Command {
	obs := &observers{eng: eng, max: max(lim.MaxAutoExtend, 1)}
	subs := map[string]struct {
		arity int // arguments after the subcommand; negative: at least
		h     proxy.Handler
	}{
		"CAMPAIGN": {-3, acquireHandler(eng, k, campaignCall(lim), lockReply)},
		"PROCLAIM": {3, func(ctx context.Context, _ *proxy.Session, args [][]byte) (any, error) {
			a := proxy.NewArgs(args)
			l, err := electionLease(a)
			if err != nil {
				return nil, err
			}
			v, err := electValue(a)
			if err != nil {
				return nil, err
			}
			ok, err := eng.Elections.Proclaim(ctx, l.Resources[0], l.Token, v)
			if err != nil {
				return nil, err
			}
			return boolInt(ok), nil
		}},
		"RESIGN": {2, releaseHandler(eng, k, electionLease)},
		"LEADER": {1, func(ctx context.Context, _ *proxy.Session, args [][]byte) (any, error) {
			name, err := electionName(proxy.NewArgs(args))
			if err != nil {
				return nil, err
			}
			info, err := eng.Info(ctx, quorum.Election, name)
			if err != nil {
				return nil, err
			}
			return leaderReply(info), nil
		}},
		"OBSERVE": {1, func(_ context.Context, sess *proxy.Session, args [][]byte) (any, error) {
			name, err := electionName(proxy.NewArgs(args))
			if err != nil {
				return nil, err
			}
			if sess == nil || sess.Proto() != 3 {
				return nil, errObserveRESP2
			}
			if err := obs.observe(sess, name); err != nil {
				return nil, err
			}
			return proxy.OK, nil
		}},
		"UNOBSERVE": {1, func(_ context.Context, sess *proxy.Session, args [][]byte) (any, error) {
			name, err := electionName(proxy.NewArgs(args))
			if err != nil {
				return nil, err
			}
			return boolInt(obs.unobserve(sess, name)), nil
		}},
		"WAITCHANGE": {4, func(ctx context.Context, _ *proxy.Session, args [][]byte) (any, error) {
			a := proxy.NewArgs(args)
			name, err := electionName(a)
			if err != nil {
				return nil, err
			}
			given, err := a.Int()
			if err != nil {
				return nil, err
			}
			if given < 0 {
				return nil, proxy.ErrNotInteger
			}
			if a.Option() != "WAIT" {
				return nil, proxy.ErrSyntax
			}
			d, err := wait(a, lim)
			if err != nil {
				return nil, err
			}
			wctx, cancel := context.WithTimeout(ctx, d)
			defer cancel()
			var last *quorum.Info
			var lastErr error
			werr := eng.Elections.Watch(wctx, name, func(info *quorum.Info, err error) bool {
				last, lastErr = info, err
				return err == nil && term(info) != uint64(given)
			})
			switch {
			case werr == nil, ctx.Err() == nil && errors.Is(werr, context.DeadlineExceeded) && last != nil:
				return leaderReply(last), nil
			case ctx.Err() == nil && errors.Is(werr, context.DeadlineExceeded) && lastErr != nil:
				return nil, lastErr
			case ctx.Err() == nil && errors.Is(werr, context.DeadlineExceeded):
				// The wait ended before the first read did.
				info, err := eng.Info(ctx, quorum.Election, name)
				if err != nil {
					return nil, err
				}
				return leaderReply(info), nil
			}
			return nil, werr
		}},
	}
	blocks := func(args [][]byte) bool {
		if len(args) < 2 {
			return false
		}
		sub := strings.ToUpper(string(args[1]))
		return sub == "WAITCHANGE" || sub == "CAMPAIGN"
	}
	return []*proxy.Command{{
		// One Result for every subcommand: a null reply (no campaign won,
		// nobody leads) reads as not granted, any other as granted.
		Name: "relect", Result: proxy.ResultNull, Arity: -3, Flags: proxy.FlagWrite | proxy.FlagMayBlock, FirstKey: 2, LastKey: 2, Step: 1,
		Blocks: blocks,
		Handler: func(ctx context.Context, sess *proxy.Session, args [][]byte) (any, error) {
			sub := strings.ToUpper(string(args[0]))
			s, ok := subs[sub]
			if !ok {
				return nil, proxy.Errorf("unknown subcommand '%s'. Try RELECT CAMPAIGN, PROCLAIM, RESIGN, LEADER, OBSERVE, UNOBSERVE or WAITCHANGE.", args[0][:min(len(args[0]), 64)])
			}
			if n := len(args) - 1; (s.arity >= 0 && n != s.arity) || (s.arity < 0 && n < -s.arity) {
				return nil, proxy.WrongArity("relect|" + strings.ToLower(sub))
			}
			return s.h(ctx, sess, args[1:])
		},
		Doc: proxy.Doc{
			Summary: "Leader election: CAMPAIGN election ttl value [WAIT wait] [AUTOEXTEND] -> [token, validity, term]; PROCLAIM election token value; RESIGN election token; LEADER election -> [value, term, ttl_ms]; OBSERVE/UNOBSERVE election (RESP3 pushes); WAITCHANGE election term WAIT wait.",
			Args: []proxy.ArgDoc{{Name: "subcommand", Type: "oneof", Args: []proxy.ArgDoc{
				{Name: "campaign", Type: "block", Args: []proxy.ArgDoc{{Name: "campaign", Type: "pure-token", Token: "CAMPAIGN"}, {Name: "election", Type: "key"}, {Name: "ttl", Type: "integer"}, {Name: "value", Type: "string"},
					{Name: "wait", Type: "integer", Token: "WAIT", Optional: true}, {Name: "autoextend", Type: "pure-token", Token: "AUTOEXTEND", Optional: true}}},
				{Name: "proclaim", Type: "block", Args: []proxy.ArgDoc{{Name: "proclaim", Type: "pure-token", Token: "PROCLAIM"}, {Name: "election", Type: "key"}, {Name: "token", Type: "string"}, {Name: "value", Type: "string"}}},
				{Name: "resign", Type: "block", Args: []proxy.ArgDoc{{Name: "resign", Type: "pure-token", Token: "RESIGN"}, {Name: "election", Type: "key"}, {Name: "token", Type: "string"}}},
				{Name: "leader", Type: "block", Args: []proxy.ArgDoc{{Name: "leader", Type: "pure-token", Token: "LEADER"}, {Name: "election", Type: "key"}}},
				{Name: "observe", Type: "block", Args: []proxy.ArgDoc{{Name: "observe", Type: "pure-token", Token: "OBSERVE"}, {Name: "election", Type: "key"}}},
				{Name: "unobserve", Type: "block", Args: []proxy.ArgDoc{{Name: "unobserve", Type: "pure-token", Token: "UNOBSERVE"}, {Name: "election", Type: "key"}}},
				{Name: "waitchange", Type: "block", Args: []proxy.ArgDoc{{Name: "waitchange", Type: "pure-token", Token: "WAITCHANGE"}, {Name: "election", Type: "key"}, {Name: "term", Type: "integer"}, {Name: "wait", Type: "integer", Token: "WAIT"}}},
			}}},
		},
	}}
}

// observers are the elections each connection observes (RELECT
// OBSERVE): one goroutine per connection and election, following the
// election with Engine.WatchElection and pushing what changed, until
// UNOBSERVE or the connection closes.
type observers struct {
	eng Engine
	max int
}

// connObs is one connection's observations, by election.
type connObs struct {
	mu     sync.Mutex
	closed bool
	by     map[string]context.CancelFunc
}

func (o *observers) of(sess *proxy.Session) *connObs {
	return sess.Value(o, func() any {
		co := &connObs{by: map[string]context.CancelFunc{}}
		sess.OnClose(func() {
			co.mu.Lock()
			defer co.mu.Unlock()
			co.closed = true
			for _, cancel := range co.by {
				cancel()
			}
			co.by = nil
		})
		return co
	}).(*connObs)
}

// observe starts following election for sess, unless it does already.
func (o *observers) observe(sess *proxy.Session, election string) error {
	co := o.of(sess)
	co.mu.Lock()
	defer co.mu.Unlock()
	if co.closed {
		return nil
	}
	if _, ok := co.by[election]; ok {
		return nil
	}
	if len(co.by) >= o.max {
		return errTooManyObs
	}
	ctx, cancel := context.WithCancel(context.Background())
	co.by[election] = cancel
	p := &pusher{push: sess.Push, election: election}
	go func() {
		_ = o.eng.Elections.Watch(ctx, election, func(info *quorum.Info, err error) bool {
			if err == nil {
				p.see(info)
			}
			return false
		})
	}()
	return nil
}

// unobserve stops following election for sess; false if it did not.
func (o *observers) unobserve(sess *proxy.Session, election string) bool {
	v, ok := sess.Lookup(o)
	if !ok {
		return false
	}
	co := v.(*connObs)
	co.mu.Lock()
	defer co.mu.Unlock()
	cancel, ok := co.by[election]
	if ok {
		cancel()
		delete(co.by, election)
	}
	return ok
}

// pusher turns the reads of one observation into pushes, so that the
// connection never sees a term go back (docs/design/election.md): a
// leader is pushed only with a term above the last one pushed, or the
// same term (not reported ended) with another value;
// "none" only for the last term pushed, once (before the leader of a
// newer term if no read saw the last one end). The first read is always
// pushed (the state when the observation began: "none <election> 0" when
// nobody leads).
type pusher struct {
	push     func(elems ...string) bool
	election string
	started  bool
	term     uint64
	value    string
	ended    bool
}

func (p *pusher) see(info *quorum.Info) {
	if info.Held {
		if p.started && (info.Fence < p.term || info.Fence == p.term && (p.ended || info.Value == p.value)) {
			return
		}
		if p.started && !p.ended && p.term != 0 && info.Fence > p.term {
			// A newer term: the last one ended, though no read saw it
			// end (a lapse the next campaign followed at once).
			p.push("none", p.election, strconv.FormatUint(p.term, 10))
		}
		p.started, p.term, p.value, p.ended = true, info.Fence, info.Value, false
		p.push("leader", p.election, info.Value, strconv.FormatUint(info.Fence, 10))
		return
	}
	if p.started && p.ended {
		return
	}
	p.started, p.ended = true, true
	p.push("none", p.election, strconv.FormatUint(p.term, 10))
}

// electionLease reads "election token" into the leadership they name.
func electionLease(a *proxy.Args) (*quorum.Lease, error) {
	name, err := electionName(a)
	if err != nil {
		return nil, err
	}
	tok, err := token(a)
	if err != nil {
		return nil, err
	}
	return &quorum.Lease{Primitive: quorum.Election, Resources: []string{name}, Token: tok}, nil
}
