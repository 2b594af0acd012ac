package redisnode

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/redis/rueidis"
)

// subscriber keeps one dedicated subscribe-mode connection to the master in
// line with the set of channels wanted. The wanted set can change from any
// goroutine at any time; one loop applies the difference, so that the last
// change wins whatever order the calls came in.
type subscriber struct {
	n    *Node
	mu   sync.Mutex
	wish map[string]bool // wanted channels
	have map[string]bool // confirmed by the master on the current connection
	seen chan struct{}   // closed and replaced whenever have changes
	kick chan struct{}
	done chan struct{}
}

func newSubscriber(n *Node) *subscriber {
	s := &subscriber{
		n:    n,
		wish: map[string]bool{},
		have: map[string]bool{},
		seen: make(chan struct{}),
		kick: make(chan struct{}, 1),
		done: make(chan struct{}),
	}
	go s.loop()
	return s
}

func (s *subscriber) close() { <-s.done }

func (s *subscriber) want(ch string, on bool) {
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

func (s *subscriber) subscribed(ctx context.Context, ch string) error {
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

func (s *subscriber) setHave(chs []string, on bool) {
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
func (s *subscriber) diff() (add, drop []string) {
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
	slices.Sort(add)
	slices.Sort(drop)
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
			if s.n.opts.Notify != nil {
				s.n.opts.Notify(m.Channel, m.Message)
			}
		},
	})
	for {
		add, drop := s.diff()
		if len(add) > 0 {
			cctx, cancel := context.WithTimeout(ctx, time.Second)
			err := d.Do(cctx, d.B().Subscribe().Channel(add...).Build()).Error()
			cancel()
			if err != nil {
				s.n.log.Debug("subscribe failed", "err", err)
				return
			}
			s.setHave(add, true)
		}
		if len(drop) > 0 {
			cctx, cancel := context.WithTimeout(ctx, time.Second)
			err := d.Do(cctx, d.B().Unsubscribe().Channel(drop...).Build()).Error()
			cancel()
			if err != nil {
				return
			}
			s.setHave(drop, false)
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
