package quorum

import (
	"context"
	"errors"
	"fmt"
	"math/bits"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redlock-proxy/redlock-proxy/quorum/scripts"
)

// ListEntry is one live primitive that Operator.List reports.
type ListEntry struct {
	// Name is the resource, semaphore, latch or election.
	Name string
	// Kind is Lock (a writer's lock, fair or not, or drop-in's), Read
	// (held by readers), Semaphore, Latch or Election.
	Kind Primitive
	// TTL is how long a quorum still holds it (Info's TTL); -1 for
	// semaphores and latches, whose holders each have their own.
	TTL time.Duration
	// Fence is a lock's fence or an election's term; 0 otherwise.
	Fence uint64
	// Holders is 1 for a lock or a leader, the readers of a read lock,
	// the permits held of a semaphore, and the arrivals a latch still
	// misses.
	Holders int
	// Waiters is how many calls wait for it (Operator.Waiters).
	Waiters int
}

// listCursor is a listing's place: the master it scans (index), the
// masters it scanned to the end (scanned, a bit each) and that master's
// own SCAN cursor. It packs into one integer, 0 at the start, the master's
// cursor in the high bits.
type listCursor struct {
	index   int
	scanned uint64
	master  uint64
}

func (e *Engine) cursorBits() (indexBits, shift int) {
	indexBits = bits.Len(uint(len(e.nodes) - 1))
	return indexBits, indexBits + len(e.nodes)
}

func (e *Engine) decodeCursor(c uint64) (listCursor, error) {
	ib, shift := e.cursorBits()
	lc := listCursor{index: int(c & (1<<ib - 1)), scanned: c >> ib & (1<<len(e.nodes) - 1), master: c >> shift}
	if lc.index >= len(e.nodes) || lc.scanned>>lc.index != 0 {
		return listCursor{}, ErrBadCursor
	}
	return lc, nil
}

func (e *Engine) encodeCursor(lc listCursor) (uint64, error) {
	ib, shift := e.cursorBits()
	if lc.master>>(64-shift) != 0 {
		return 0, fmt.Errorf("master %s's SCAN cursor %d does not fit a listing cursor", e.nodes[lc.index].Addr(), lc.master)
	}
	return lc.master<<shift | lc.scanned<<ib | uint64(lc.index), nil
}

// listKind tells which primitive key is the main key of, and its name; ok
// is false for the other keys (fences, queues, marks, a semaphore's
// slots...).
func (e *Engine) listKind(key string) (p Primitive, name string, ok bool) {
	rest, meta := strings.CutPrefix(key, e.opts.MetaPrefix)
	if !meta {
		name, ok = strings.CutPrefix(key, e.opts.KeyPrefix)
		return Lock, name, ok && name != ""
	}
	rest = e.unslot(rest)
	if name, ok := strings.CutPrefix(rest, "elect:"); ok && name != "" {
		return Election, name, true
	}
	for _, k := range [...]struct {
		p      Primitive
		prefix string
	}{{Semaphore, "sem:"}, {Latch, "latch:"}} {
		enc, ok := strings.CutPrefix(rest, k.prefix)
		if !ok {
			continue
		}
		// enc is "<len>:<name>" exactly; a longer key is one of its others.
		n, name, ok := strings.Cut(enc, ":")
		if l, err := strconv.Atoi(n); ok && err == nil && l > 0 && l == len(name) {
			return k.p, name, true
		}
	}
	return "", "", false
}

// List reads one page of the live primitives a quorum of masters hold
// (RLOCKLIST; see docs/design/listing.md): from cursor (0 starts),
// scanning about count keys, the entries whose name match accepts. It
// returns the cursor to go on with, 0 when the listing is complete.
//
// A listing scans masters in turn until it scanned N-quorum+1 of them to
// the end, so that it meets every primitive a quorum holds; it reports a
// primitive on the first of them that holds it. A master that is down or
// in quarantine when its turn comes is passed over. A page whose entries
// a quorum could not be asked about is a *QuorumError: repeat the cursor.
func (o Operator) List(ctx context.Context, cursor uint64, count int, match func(name string) bool) (next uint64, entries []ListEntry, err error) {
	e := o.e
	lc, err := e.decodeCursor(cursor)
	if err != nil {
		return 0, nil, err
	}
	if count <= 0 {
		return 0, nil, fmt.Errorf("%w: count must be positive", ErrBadRequest)
	}
	for _, n := range e.nodes {
		if _, ok := n.(ShardedNode); ok {
			return 0, nil, ErrListClusters
		}
	}
	need := len(e.nodes) - e.quorum + 1
	i := lc.index
	if !e.votes(i) {
		return e.listSkip(lc, need, "in quarantine")
	}
	sctx, cancel := context.WithTimeout(ctx, e.releaseTimeout())
	v, err := e.nodes[i].Eval(sctx, scripts.ListScan.Name, nil, []string{strconv.FormatUint(lc.master, 10), strconv.Itoa(count), e.opts.MetaPrefix})
	cancel()
	if err != nil {
		if ctx.Err() != nil {
			return 0, nil, ctx.Err()
		}
		return e.listSkip(lc, need, err.Error())
	}
	arr, _ := v.([]any)
	var mc uint64
	if len(arr) > 0 {
		s, _ := arr[0].(string)
		mc, err = strconv.ParseUint(s, 10, 64)
	}
	if len(arr) == 0 || err != nil {
		return e.listSkip(lc, need, fmt.Sprintf("unexpected SCAN answer %v", v))
	}
	type found struct {
		key, name string
		p         Primitive
	}
	var page []found
	for _, k := range arr[1:] {
		key, _ := k.(string)
		if p, name, ok := e.listKind(key); ok && (match == nil || match(name)) {
			page = append(page, found{key, name, p})
		}
	}
	// Report each primitive once: not here if a master scanned before
	// this one has its key (it was reported there).
	if lc.scanned != 0 && len(page) > 0 {
		keys := make([]string, len(page))
		for j, f := range page {
			keys[j] = f.key
		}
		r := e.send(ctx, &op{name: "list", script: scripts.ListPresent, keys: keys}, nil)
		t := r.count(everyAnswer, func(_ int, v any) bool { a, ok := v.([]any); return ok && len(a) == len(keys) })
		seen := make([]bool, len(page))
		for j, c := range t.counted {
			if !c || lc.scanned&(1<<j) == 0 {
				continue
			}
			for x, p := range r.ans[j].val.([]any) {
				if n, _ := p.(int64); n == 1 {
					seen[x] = true
				}
			}
		}
		kept := page[:0]
		for j, f := range page {
			if !seen[j] {
				kept = append(kept, f)
			}
		}
		page = kept
	}
	entries, err = listEntries(e, ctx, page, func(f found) (Primitive, string) { return f.p, f.name })
	if err != nil {
		return 0, nil, err
	}
	lc.master = mc
	if mc == 0 {
		lc.scanned |= 1 << i
		lc.index++
		if bits.OnesCount64(lc.scanned) >= need || lc.index == len(e.nodes) {
			return 0, entries, nil
		}
	}
	next, err = e.encodeCursor(lc)
	return next, entries, err
}

// listSkip passes over master lc.index, down or in quarantine: the
// listing goes on with the next master, as long as enough are left.
func (e *Engine) listSkip(lc listCursor, need int, why string) (uint64, []ListEntry, error) {
	left := len(e.nodes) - lc.index - 1
	if bits.OnesCount64(lc.scanned)+left < need {
		return 0, nil, &QuorumError{Op: "list", Got: bits.OnesCount64(lc.scanned) + left, Need: need, Total: len(e.nodes),
			Errs: []error{fmt.Errorf("%s: %s", e.nodes[lc.index].Addr(), why)}}
	}
	e.log.Info("listing passes over a master", "master", e.nodes[lc.index].Addr(), "why", why)
	lc.index++
	lc.master = 0
	next, err := e.encodeCursor(lc)
	return next, nil, err
}

// listEntries asks a quorum about each of page's primitives at once (at
// most 32 in flight) and keeps those a quorum holds.
func listEntries[T any](e *Engine, ctx context.Context, page []T, what func(T) (Primitive, string)) ([]ListEntry, error) {
	out := make([]ListEntry, len(page))
	keep := make([]bool, len(page))
	errs := make([]error, len(page))
	var wg sync.WaitGroup
	sem := make(chan struct{}, 32)
	for j, f := range page {
		p, name := what(f)
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			out[j], keep[j], errs[j] = e.listEntry(ctx, p, name)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	var entries []ListEntry
	for j := range out {
		if keep[j] {
			entries = append(entries, out[j])
		}
	}
	return entries, nil
}

// listEntry is one primitive's entry, and whether a quorum holds it.
func (e *Engine) listEntry(ctx context.Context, p Primitive, name string) (ListEntry, bool, error) {
	info, err := e.Info(ctx, p, name)
	switch {
	case errors.Is(err, ErrNoLatch):
		return ListEntry{}, false, nil
	case err != nil:
		return ListEntry{}, false, err
	}
	le := ListEntry{Name: name, Kind: p, TTL: -1, Fence: info.Fence}
	switch p {
	case Lock:
		if !info.Held {
			return le, false, nil
		}
		le.TTL, le.Holders = info.TTL, 1
		if info.Readers != nil {
			le.Kind, le.Holders = Read, len(info.Readers)
		}
	case Election:
		if !info.Held {
			return le, false, nil
		}
		le.TTL, le.Holders = info.TTL, 1
	case Semaphore:
		if info.Count == 0 {
			return le, false, nil
		}
		le.Holders = info.Count
	case Latch:
		le.Holders = info.Count
	}
	le.Waiters, _, err = e.Operator().Waiters(ctx, p, name, "")
	return le, err == nil, err
}
