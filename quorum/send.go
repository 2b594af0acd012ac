package quorum

import (
	"context"
	"fmt"
	"sync"

	"github.com/redlock-proxy/redlock-proxy/quorum/scripts"
)

// sendNode sends script s to master i. With the slotted layout a call
// whose keys live in several hash slots runs as one call per slot
// (scripts.Split), on every master alike, single servers too, so that
// each resource's fence comes from its own slot's sequence (see
// docs/design/cluster.md). The parts are all sent at once, in ascending slot order,
// before sendNode returns: whatever the engine sends to that master
// afterwards (a rollback, a release) follows every part on its
// connection, as it follows an unsplit call. done gets the combined
// answer (Script.Combine) once every part answered, or the first error.
func (e *Engine) sendNode(i int, s *scripts.Script, keys, args []string, done func(any, error)) {
	if !e.opts.Slotted || oneSlot(keys) {
		e.nodes[i].Send(s.Name, keys, args, done)
		return
	}
	parts, err := s.Split(keys, args, KeySlot, retag)
	if err != nil {
		done(nil, fmt.Errorf("quorum: %s over several hash slots: %w", s.Name, err))
		return
	}
	if len(parts) == 1 {
		e.nodes[i].Send(s.Name, parts[0].Keys, parts[0].Args, done)
		return
	}
	items := 0
	for _, p := range parts {
		items += len(p.Items)
	}
	var (
		mu       sync.Mutex
		answers  = make([]any, len(parts))
		left     = len(parts)
		firstErr error
	)
	for k, p := range parts {
		e.nodes[i].Send(s.Name, p.Keys, p.Args, func(v any, err error) {
			mu.Lock()
			answers[k] = v
			if err != nil && firstErr == nil {
				firstErr = err
			}
			left--
			last := left == 0
			mu.Unlock()
			if !last {
				return
			}
			if firstErr != nil {
				done(nil, firstErr)
				return
			}
			done(s.Combine(parts, items, answers))
		})
	}
}

// oneSlot reports whether keys all live in one hash slot (or there are
// fewer than two).
func oneSlot(keys []string) bool {
	if len(keys) < 2 {
		return true
	}
	first := KeySlot(keys[0])
	for _, k := range keys[1:] {
		if KeySlot(k) != first {
			return false
		}
	}
	return true
}

// evalNode is sendNode, waiting for the answer or ctx's end (the node's
// own Eval when nothing is split).
func (e *Engine) evalNode(ctx context.Context, i int, s *scripts.Script, keys, args []string) (any, error) {
	if !e.opts.Slotted || oneSlot(keys) {
		return e.nodes[i].Eval(ctx, s.Name, keys, args)
	}
	type result struct {
		v   any
		err error
	}
	ch := make(chan result, 1)
	e.sendNode(i, s, keys, args, func(v any, err error) { ch <- result{v, err} })
	select {
	case r := <-ch:
		return r.v, r.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}
