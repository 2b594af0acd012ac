package quorum

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestElection: a campaign on 3 masters is read back by Info as a quorum
// agrees; a second campaign is refused while the first leads; only the
// leader may proclaim; a resignation empties the election; the next
// leader's term is greater; a proclamation half applied (one master of
// three) reads as no quorum rather than as either value; a watch is told
// of every change, each as a quorum agrees.
func TestElection(t *testing.T) {
	t.Parallel()
	c := buildCluster(t, 3, Options{})
	defer c.close()
	ctx := context.Background()
	campaign := func(value string) *Lease {
		t.Helper()
		l, err := c.eng.Acquire(ctx, Request{Primitive: Election, Resources: []string{"e"}, TTL: 10 * time.Second, Options: ElectionOptions{Value: value}})
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	leader := func() *Info {
		t.Helper()
		info, err := c.eng.Info(ctx, Election, "e")
		if err != nil {
			t.Fatal(err)
		}
		return info
	}

	seen := make(chan Info, 16)
	wctx, stop := context.WithCancel(ctx)
	watched := make(chan error, 1)
	go func() {
		watched <- c.eng.Elections().Watch(wctx, "e", func(info *Info, err error) bool {
			if err == nil {
				seen <- *info
			}
			return false
		})
	}()
	next := func(what string, ok func(Info) bool) {
		t.Helper()
		deadline := time.After(5 * time.Second)
		for {
			select {
			case info := <-seen:
				if ok(info) {
					return
				}
			case <-deadline:
				t.Fatalf("the watch never saw %s", what)
			}
		}
	}
	next("nobody leads", func(i Info) bool { return !i.Held })

	a := campaign("a")
	if a == nil || len(a.Fences) != 1 || a.Fences[0] == 0 {
		t.Fatalf("campaign: %+v", a)
	}
	if info := leader(); !info.Held || info.Holder != a.Token || info.Value != "a" || info.Fence != a.Fences[0] || info.TTL <= 0 {
		t.Fatalf("leader %v, want a's", info)
	}
	next("a leads", func(i Info) bool { return i.Held && i.Value == "a" && i.Fence == a.Fences[0] })
	if l := campaign("b"); l != nil {
		t.Fatalf("a second leader while a leads: %+v", l)
	}
	if ok, err := c.eng.Elections().Proclaim(ctx, "e", "not-the-leader", "x"); ok || err != nil {
		t.Fatalf("a proclamation by another token: %v, %v", ok, err)
	}
	if ok, err := c.eng.Elections().Proclaim(ctx, "e", a.Token, "a2"); !ok || err != nil {
		t.Fatalf("the leader's proclamation: %v, %v", ok, err)
	}
	next("a's new value", func(i Info) bool { return i.Held && i.Value == "a2" && i.Fence == a.Fences[0] })
	if info := leader(); info.Value != "a2" || info.Fence != a.Fences[0] {
		t.Fatalf("leader after PROCLAIM: %v", info)
	}

	// Half applied: one master of three has another value. The
	// proclamation answered once a quorum took it: it has landed
	// everywhere before the values are changed under it. (Not by
	// waiting for the engine's requests: the watch keeps sending its
	// own.)
	ls, _ := c.eng.electSet("e")
	if !eventually(5*time.Second, func() bool {
		for _, f := range c.nodes {
			if f.m.HGet(ls.advert, "value") != "a2" {
				return false
			}
		}
		return true
	}) {
		t.Fatal("the proclamation never reached every master")
	}
	c.nodes[0].m.HSet(ls.advert, "value", "half")
	c.nodes[1].m.HSet(ls.advert, "value", "other")
	var qe *QuorumError
	if info, err := c.eng.Info(ctx, Election, "e"); !errors.As(err, &qe) {
		t.Fatalf("three masters, three values: %v, %v; want no quorum", info, err)
	}
	c.nodes[0].m.HSet(ls.advert, "value", "a2")
	c.nodes[1].m.HSet(ls.advert, "value", "a2")

	if held, err := c.eng.Release(ctx, a); !held || err != nil {
		t.Fatalf("resign: %v, %v", held, err)
	}
	next("a resigned", func(i Info) bool { return !i.Held })
	if info := leader(); info.Held {
		t.Fatalf("leader after RESIGN: %v", info)
	}
	for i, f := range c.nodes {
		if f.m.Exists(ls.advert) || f.m.Exists(ls.keys[0]) {
			t.Fatalf("master %d keeps the election after the resignation", i)
		}
	}
	b := campaign("b")
	if b == nil || b.Fences[0] <= a.Fences[0] {
		t.Fatalf("the next leader %+v after term %d", b, a.Fences[0])
	}
	next("b leads", func(i Info) bool { return i.Held && i.Value == "b" && i.Fence == b.Fences[0] })
	stop()
	if err := <-watched; !errors.Is(err, context.Canceled) {
		t.Fatalf("watch ended with %v", err)
	}
}
