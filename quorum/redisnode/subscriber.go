package redisnode

import (
	"context"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/redis/rueidis"
)

// topic is one subscription: a channel, or a pattern (PSUBSCRIBE).
type topic struct {
	name    string
	pattern bool
}

// subscriber keeps one dedicated subscribe-mode connection to the master in
// line with the set of channels and patterns wanted. The wanted set can change from any
// goroutine at any time; one loop applies the difference, so that the last
// change wins whatever order the calls came in.
type subscriber struct {
	n    *Node
	mu   sync.Mutex
	wish map[topic]bool // wanted channels and patterns
	have map[topic]bool // confirmed by the master on the current connection
	seen chan struct{}  // closed and replaced whenever have changes
	kick chan struct{}
	done chan struct{}
}

func newSubscriber(n *Node) *subscriber {
	s := &subscriber{
		n:    n,
		wish: map[topic]bool{},
		have: map[topic]bool{},
		seen: make(chan struct{}),
		kick: make(chan struct{}, 1),
		done: make(chan struct{}),
	}
	go s.loop()
	return s
}

func (s *subscriber) close() { <-s.done }

func (s *subscriber) want(ch topic, on bool) {
	s.mu.Lock()
	if on {
		s.wish[ch] = true
	} else {
		delete(s.wish, ch)
	}
	s.mu.Unlock()
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

func (s *subscriber) subscribed(ctx context.Context, ch topic) error {
	for {
		s.mu.Lock()
		ok, seen := s.have[ch], s.seen
		s.mu.Unlock()
		if ok {
			return nil
		}
		select {
		case <-seen:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func (s *subscriber) setHave(chs []topic, on bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, ch := range chs {
		if on {
			s.have[ch] = true
		} else {
			delete(s.have, ch)
		}
	}
	close(s.seen)
	s.seen = make(chan struct{})
}

// diff returns what to subscribe and unsubscribe to reach the wanted set.
func (s *subscriber) diff() (add, drop []topic) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for ch := range s.wish {
		if !s.have[ch] {
			add = append(add, ch)
		}
	}
	for ch := range s.have {
		if !s.wish[ch] {
			drop = append(drop, ch)
		}
	}
	order := func(a, b topic) int {
		if a.pattern != b.pattern {
			if a.pattern {
				return 1
			}
			return -1
		}
		return strings.Compare(a.name, b.name)
	}
	slices.SortFunc(add, order)
	slices.SortFunc(drop, order)
	return add, drop
}

func (s *subscriber) loop() {
	defer close(s.done)
	ctx := s.n.ctx
	for ctx.Err() == nil {
		s.session(ctx)
		s.mu.Lock()
		clear(s.have)
		s.mu.Unlock()
		select {
		case <-ctx.Done():
		case <-time.After(s.n.opts.RedialInterval):
		}
	}
}

// session runs one dedicated connection until it breaks or ctx ends.
func (s *subscriber) session(ctx context.Context) {
	cp := s.n.sc.Load()
	if cp == nil {
		return
	}
	d, release := (*cp).Dedicate()
	defer release()
	lost := d.SetPubSubHooks(rueidis.PubSubHooks{
		OnMessage: func(m rueidis.PubSubMessage) {
			switch {
			case m.Pattern != "" && s.n.opts.NotifyPattern != nil:
				s.n.opts.NotifyPattern(m.Pattern, m.Channel, m.Message)
			case s.n.opts.Notify != nil:
				s.n.opts.Notify(m.Channel, m.Message)
			}
		},
	})
	for {
		add, drop := s.diff()
		for _, part := range split(add) {
			cctx, cancel := context.WithTimeout(ctx, time.Second)
			cmd := d.B().Subscribe().Channel(names(part)...).Build()
			if part[0].pattern {
				cmd = d.B().Psubscribe().Pattern(names(part)...).Build()
			}
			err := d.Do(cctx, cmd).Error()
			cancel()
			if err != nil {
				s.n.log.Debug("subscribe failed", "err", err)
				return
			}
			s.setHave(part, true)
		}
		for _, part := range split(drop) {
			cctx, cancel := context.WithTimeout(ctx, time.Second)
			cmd := d.B().Unsubscribe().Channel(names(part)...).Build()
			if part[0].pattern {
				cmd = d.B().Punsubscribe().Pattern(names(part)...).Build()
			}
			err := d.Do(cctx, cmd).Error()
			cancel()
			if err != nil {
				return
			}
			s.setHave(part, false)
		}
		select {
		case <-s.kick:
		case <-lost:
			return
		case <-ctx.Done():
			return
		}
	}
}

// split cuts a sorted list of topics into its channels and its patterns
// (each part non-empty), the arguments of one SUBSCRIBE and one PSUBSCRIBE.
func split(ts []topic) [][]topic {
	i := 0
	for i < len(ts) && !ts[i].pattern {
		i++
	}
	var out [][]topic
	if i > 0 {
		out = append(out, ts[:i])
	}
	if i < len(ts) {
		out = append(out, ts[i:])
	}
	return out
}

func names(ts []topic) []string {
	out := make([]string, len(ts))
	for i, t := range ts {
		out[i] = t.name
	}
	return out
}
