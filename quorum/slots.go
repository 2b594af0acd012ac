package quorum

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redlock-proxy/redlock-proxy/quorum/scripts"
)

// Slots is the number of hash slots of a Redis Cluster.
const Slots = 16384

// KeySlot is the Redis Cluster hash slot of key: CRC16 (XMODEM) of its
// hash tag (the part between the first "{" and the first "}" after it,
// when that is not empty) or of the whole key, modulo 16384.
func KeySlot(key string) int {
	if i := strings.IndexByte(key, '{'); i >= 0 {
		if j := strings.IndexByte(key[i+1:], '}'); j > 0 {
			key = key[i+1 : i+1+j]
		}
	}
	return int(crc16(key) % Slots)
}

// crc16 is CRC-16/XMODEM (polynomial 0x1021, initial value 0), the one
// Redis Cluster uses, a byte at a time from a table.
func crc16(s string) uint16 {
	t := crcTable()
	var crc uint16
	for i := 0; i < len(s); i++ {
		crc = crc<<8 ^ t[byte(crc>>8)^s[i]]
	}
	return crc
}

// crcTable is crc16's table: the CRC of each byte. Computed once, then
// only read.
var crcTable = sync.OnceValue(func() *[256]uint16 {
	var t [256]uint16
	for b := range t {
		crc := uint16(b) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
		t[b] = crc
	}
	return &t
})

// slotTags holds, for each slot, the shortest string (base 36, then the
// lowest) whose CRC16 falls in that slot: "{" + SlotTag(s) + "}" in a key
// puts it in slot s. Computed once, then only read.
var slotTags = sync.OnceValue(func() []string {
	tags := make([]string, Slots)
	left := Slots
	for n := 0; left > 0; n++ {
		t := strconv.FormatInt(int64(n), 36)
		if s := crc16(t) % Slots; tags[s] == "" {
			tags[s] = t
			left--
		}
	}
	return tags
})

// SlotTag is a short hash tag of slot s: a key containing "{SlotTag(s)}"
// (and no "{" before it) lives in slot s.
func SlotTag(s int) string { return slotTags()[s] }

// meta names one of the proxy's keys: rest under the meta prefix. With
// the slotted layout (Options.Slotted) it also carries the hash tag of
// anchor's slot, so that every key named for one anchor lives in one
// slot. A resource's keys are anchored to its lock key (resMeta), those
// of semaphores, latches and elections to their release channel.
func (e *Engine) meta(anchor, rest string) string {
	if !e.opts.Slotted {
		return e.opts.MetaPrefix + rest
	}
	return e.opts.MetaPrefix + "{" + SlotTag(KeySlot(anchor)) + "}" + rest
}

// resMeta is meta anchored to resource's lock key.
func (e *Engine) resMeta(resource, rest string) string {
	return e.meta(e.opts.KeyPrefix+resource, rest)
}

// slotMeta is meta for the keys of slot s (the slotted layout's
// master-wide keys).
func (e *Engine) slotMeta(s int, rest string) string {
	return e.opts.MetaPrefix + "{" + SlotTag(s) + "}" + rest
}

// unslot strips the hash tag meta put after the meta prefix, so that rest
// reads as with single-server masters.
func (e *Engine) unslot(rest string) string {
	if !e.opts.Slotted || !strings.HasPrefix(rest, "{") {
		return rest
	}
	if j := strings.IndexByte(rest, '}'); j > 0 {
		return rest[j+1:]
	}
	return rest
}

// retag gives a key of the slotted layout that carries a hash tag (the
// master-wide keys, one per slot) the tag of slot.
func retag(key string, slot int) string {
	i := strings.IndexByte(key, '{')
	if i < 0 {
		return key
	}
	j := strings.IndexByte(key[i+1:], '}')
	if j <= 0 {
		return key
	}
	return key[:i+1] + SlotTag(slot) + key[i+1+j:]
}

// learnUnslotted raises this engine's fence proposals above the sequences
// the single-server masters kept under the layout without slots (one per
// master), if any: a deployment that turned to the slotted layout (its
// first cluster master) then issues no fence below one issued before,
// although the per-slot sequences start empty. It asks every single
// server once at start (four master timeouts), and those that did not
// answer again in the background until each has, logging an error every
// minute meanwhile: until then a fence from this proxy may fall below one
// issued under the old layout. Cluster masters never held that layout.
func (e *Engine) learnUnslotted() {
	keys := []string{e.opts.MetaPrefix + "fence-hwm", e.opts.MetaPrefix + "fence-floor"}
	ask := func(pending []int) []int {
		ctx, cancel := context.WithTimeout(context.Background(), 4*e.opts.MasterTimeout)
		defer cancel()
		var mu sync.Mutex
		var left []int
		var wg sync.WaitGroup
		for _, i := range pending {
			wg.Go(func() {
				v, err := e.nodes[i].Eval(ctx, scripts.FenceHighwater.Name, keys, nil)
				n, ok := v.(int64)
				if err != nil || !ok {
					mu.Lock()
					left = append(left, i)
					mu.Unlock()
					return
				}
				if n > 0 {
					e.fences.learn(uint64(n))
				}
			})
		}
		wg.Wait()
		return left
	}
	var pending []int
	for i, n := range e.nodes {
		if _, ok := n.(ShardedNode); !ok {
			pending = append(pending, i)
		}
	}
	if pending = ask(pending); len(pending) == 0 {
		return
	}
	e.goBackground(func() {
		t := e.clock.NewTimer(e.opts.HealthInterval)
		defer t.Stop()
		var warned time.Time
		for len(pending) > 0 {
			if e.since(warned) > time.Minute {
				warned = e.now()
				addrs := make([]string, len(pending))
				for k, i := range pending {
					addrs[k] = e.nodes[i].Addr()
				}
				e.log.Error("the fence sequences of the layout without slots cannot be read on some masters yet: until they answer, a fence may fall below one issued before the switch to cluster masters' layout",
					"masters", addrs)
			}
			select {
			case <-e.life.Done():
				return
			case <-t.C():
				t.Reset(e.opts.HealthInterval)
			}
			pending = ask(pending)
		}
	})
}
