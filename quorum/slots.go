package quorum

import (
	"strconv"
	"strings"
	"sync"
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
// Redis Cluster uses.
func crc16(s string) uint16 {
	var crc uint16
	for i := 0; i < len(s); i++ {
		crc ^= uint16(s[i]) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return crc
}

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
