package scripts

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
)

// Merge says how a script's call over resources in several hash slots is
// run on a Redis Cluster, which runs a script only on keys of one slot: as
// one call per slot (Split), whose answers combine into the answer of the
// whole call (Merge). Every key a script names for one resource lives in
// that resource's slot (the engine's slotted layout), so a call splits
// along its resources.
type Merge int

// The ways a split call's answers combine.
const (
	// NoSplit: the call cannot be split; its keys must share one slot.
	NoSplit Merge = iota
	// MergeGrant: each part answers {1, sequence, fence_1, ...} or {0,
	// sequence}. The answer is {1, highest sequence, every fence in the
	// call's order} when every part granted; else {0, highest sequence},
	// or {0, highest sequence, 1} when some parts were granted (they hold
	// the call's token: the engine then rolls the try back there, as it
	// does where a try was granted).
	MergeGrant
	// MergeRelease: each part answers {count, ms left} or {count, ms left,
	// expiry on the master's clock}: the counts add up, the longest time
	// left and the latest expiry win.
	MergeRelease
	// MergeSum: each part answers an integer; they add up.
	MergeSum
	// MergeAll: each part answers 1 or 0; 1 when every part does.
	MergeAll
	// MergeEach: each part answers one value per resource; they are put
	// back in the call's order.
	MergeEach
)

// splits sets how s is split, and returns s (for the descriptors' table).
func (s *Script) splits(m Merge) *Script {
	s.Merge = m
	return s
}

// Part is one slot's share of a split call: its keys and arguments, and
// the positions of its resources among the call's.
type Part struct {
	Slot       int
	Keys, Args []string
	Items      []int
}

// ErrNoSplit is returned by Split for a call that cannot be split.
var ErrNoSplit = errors.New("scripts: the call cannot be split by hash slot")

// span is where one field's values sit in a call's keys or arguments.
type span struct {
	f          Field
	start, len int
	perItem    bool
}

// spans lays out count values over fields for n resources (optional fields
// taken in order while values remain).
func spans(fields []Field, count, n int) ([]span, bool) {
	need := 0
	for _, f := range fields {
		switch {
		case f.Rest, f.Optional:
		case f.Each:
			need += n
		default:
			need++
		}
	}
	extra := count - need
	out := make([]span, 0, len(fields))
	at := 0
	for _, f := range fields {
		size := 1
		switch {
		case f.Rest:
			size = count - at
		case f.Optional:
			if f.Each {
				size = n
			}
			if extra < size {
				size = 0
			}
			extra -= size
		case f.Each:
			size = n
		}
		if size < 0 {
			return nil, false
		}
		out = append(out, span{f: f, start: at, len: size, perItem: f.Each})
		at += size
	}
	return out, at == count
}

// Split divides a call of s into one call per hash slot, in ascending slot
// order. Its resources are the per-resource (Each) keys' positions, or,
// for a script without them, each key of a trailing Rest group; a
// resource's slot is that of its first key (slot). Per-resource keys and
// arguments go with their resource; every other key is given the part's
// slot by retag (the slotted layout's per-slot keys: lagging bound,
// sequence, lease mark); other arguments go to every part as they are. A
// call whose keys are all in one slot is one part.
func (s *Script) Split(keys, args []string, slot func(string) int, retag func(key string, slot int) string) ([]Part, error) {
	n, ok := fit(s.Keys, len(keys), -1)
	if !ok {
		return nil, s.Check(keys, args)
	}
	ks, ok1 := spans(s.Keys, len(keys), n)
	as, ok2 := spans(s.Args, len(args), n)
	if !ok1 || !ok2 {
		return nil, s.Check(keys, args)
	}
	items := n
	if n == 0 {
		// No per-resource keys: the keys of a trailing Rest group are the
		// resources.
		if len(ks) == 0 || !ks[len(ks)-1].f.Rest {
			return nil, ErrNoSplit
		}
		last := &ks[len(ks)-1]
		last.perItem = true
		items = last.len
	}
	if items == 0 {
		return nil, ErrNoSplit
	}
	first := -1
	for _, sp := range ks {
		if sp.perItem {
			first = sp.start
			break
		}
	}
	slots := make([]int, items)
	for i := range items {
		slots[i] = slot(keys[first+i])
	}
	order := make([]int, items)
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(slots[a], slots[b]) })
	var parts []Part
	for lo := 0; lo < items; {
		hi := lo
		for hi < items && slots[order[hi]] == slots[order[lo]] {
			hi++
		}
		p := Part{Slot: slots[order[lo]], Items: order[lo:hi:hi]}
		parts = append(parts, p)
		lo = hi
	}
	if len(parts) == 1 {
		// Nothing to split: the call as it is (a key outside the
		// resources' slot is the cluster's to refuse).
		parts[0].Keys, parts[0].Args = keys, args
		return parts, nil
	}
	if s.Merge == NoSplit {
		return nil, ErrNoSplit
	}
	for i := range parts {
		p := &parts[i]
		for _, sp := range ks {
			switch {
			case sp.perItem:
				for _, it := range p.Items {
					p.Keys = append(p.Keys, keys[sp.start+it])
				}
			case sp.f.Optional && sp.len > 0:
				return nil, ErrNoSplit // a key of one resource (a queue, holds)
			default:
				for _, k := range keys[sp.start : sp.start+sp.len] {
					p.Keys = append(p.Keys, retag(k, p.Slot))
				}
			}
		}
		for _, sp := range as {
			switch {
			case sp.perItem && sp.len > 0:
				for _, it := range p.Items {
					p.Args = append(p.Args, args[sp.start+it])
				}
			case sp.f.Rest && sp.len > 0:
				return nil, ErrNoSplit // trailing arguments of no one resource
			default:
				p.Args = append(p.Args, args[sp.start:sp.start+sp.len]...)
			}
		}
	}
	return parts, nil
}

// Combine merges the answers of parts (each part's answer, in the order
// of parts) into the answer of the whole call over items resources, as
// s.Merge says. For MergeGrant, answers may stop at the first refusal.
func (s *Script) Combine(parts []Part, items int, answers []any) (any, error) {
	bad := func(v any) error { return fmt.Errorf("scripts: %s: a part answered %v", s.Name, v) }
	switch s.Merge {
	case MergeGrant:
		if len(answers) != len(parts) {
			return nil, fmt.Errorf("scripts: %s: %d answers for %d parts", s.Name, len(answers), len(parts))
		}
		out := make([]any, 2+items)
		out[0] = int64(1)
		var seq int64
		refusal := int64(1)
		granted := false
		for i, v := range answers {
			arr, ok := v.([]any)
			if !ok || len(arr) < 2 {
				return nil, bad(v)
			}
			g, ok1 := arr[0].(int64)
			q, ok2 := arr[1].(int64)
			if !ok1 || !ok2 {
				return nil, bad(v)
			}
			seq = max(seq, q)
			if g != 1 {
				refusal = g
				continue
			}
			granted = true
			if len(arr) != 2+len(parts[i].Items) {
				return nil, bad(v)
			}
			for j, it := range parts[i].Items {
				out[2+it] = arr[2+j]
			}
		}
		switch {
		case refusal != 1 && granted:
			return []any{refusal, seq, int64(1)}, nil // the granted parts hold the token
		case refusal != 1:
			return []any{refusal, seq}, nil
		}
		out[1] = seq
		return out, nil
	case MergeRelease:
		var count, left, last int64
		for _, v := range answers {
			arr, ok := v.([]any)
			if !ok || len(arr) < 2 || len(arr) > 3 {
				return nil, bad(v)
			}
			c, ok1 := arr[0].(int64)
			l, ok2 := arr[1].(int64)
			if !ok1 || !ok2 || c < 0 {
				return nil, bad(v)
			}
			count, left = count+c, max(left, l)
			if len(arr) == 3 {
				a, ok := arr[2].(int64)
				if !ok {
					return nil, bad(v)
				}
				last = max(last, a)
			}
		}
		if len(answers) > 0 && len(answers[0].([]any)) == 3 {
			return []any{count, left, last}, nil
		}
		return []any{count, left}, nil
	case MergeSum, MergeAll:
		var sum int64
		all := int64(1)
		for _, v := range answers {
			c, ok := v.(int64)
			if !ok {
				return nil, bad(v)
			}
			sum += c
			if c != 1 {
				all = 0
			}
		}
		if s.Merge == MergeAll {
			return all, nil
		}
		return sum, nil
	case MergeEach:
		out := make([]any, items)
		for i, v := range answers {
			arr, ok := v.([]any)
			if !ok || len(arr) != len(parts[i].Items) {
				return nil, bad(v)
			}
			for j, it := range parts[i].Items {
				out[it] = arr[j]
			}
		}
		return out, nil
	}
	return nil, ErrNoSplit
}
