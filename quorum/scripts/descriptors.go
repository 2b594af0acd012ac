package scripts

// The descriptors, one per script file. Each lists the script's KEYS and
// ARGV by the names its header binds them to; TestDescriptors checks them
// against the scripts.
var (
	// BusPublish publishes a pub/sub message for the other proxies.
	BusPublish = define("bus_publish", nil, []Field{One("channel"), One("message")})

	// ElectCampaign is an election's campaign: a lock acquire that also
	// advertises the leader's value.
	ElectCampaign = define("elect_campaign",
		append(lockKeys[:len(lockKeys):len(lockKeys)], One("advert")),
		append(lockArgs[:len(lockArgs):len(lockArgs)], One("value")))
	// ElectExtend extends a leadership and its advertisement.
	ElectExtend = define("elect_extend",
		[]Field{Each("lock"), Each("fence"), One("lease"), One("advert")},
		[]Field{One("token"), One("ttl"), One("lagms")})
	// ElectLeader reads an election's leader, term and value on a master.
	ElectLeader = define("elect_leader", []Field{One("lock"), One("advert")}, nil)
	// ElectProclaim changes the leader's advertised value.
	ElectProclaim = define("elect_proclaim",
		[]Field{One("lock"), One("advert")},
		[]Field{One("token"), One("value")})
	// ElectTerm records a leadership's term in its advertisement.
	ElectTerm = define("elect_term",
		[]Field{One("lock"), One("advert")},
		[]Field{One("token"), One("term")})
	// ElectResign releases a leadership (and rolls back a campaign).
	ElectResign = define("elect_resign",
		[]Field{Each("lock"), Each("fence"), One("lag"), One("advert")},
		[]Field{One("token"), EachOpt("channel")})

	// FairDequeue takes a waiter out of a fair lock's queue.
	FairDequeue = define("fair_dequeue",
		[]Field{One("queue"), One("deadlines"), Opt("mark")},
		[]Field{One("id"), One("channel"), One("mode")})
	// FairEnqueue queues a fair-lock waiter and answers its ticket.
	FairEnqueue = define("fair_enqueue",
		[]Field{One("queue"), One("deadlines"), One("seq")},
		[]Field{One("id"), One("proposal"), One("stale")})
	// FairTicket places a fair-lock waiter at the agreed ticket.
	FairTicket = define("fair_ticket",
		[]Field{One("queue"), One("deadlines"), One("seq")},
		[]Field{One("id"), One("ticket"), One("stale")})

	// FenceFloor raises a restarted master's fence sequence, and sets its
	// intact mark when given.
	FenceFloor = define("fence_floor", []Field{One("seq"), One("lag"), Opt("mark")}, []Field{One("floor")})
	// FenceHighwater reads a master's fence high-water mark.
	FenceHighwater = define("fence_highwater", []Field{One("seq"), One("old")}, nil)
	// LeaseLeft reads how long a master's longest grant still lives.
	LeaseLeft = define("lease_left", []Field{One("lease")}, nil)
	// TimeLeft reads how long a master's clock has until a given time.
	TimeLeft = define("time_left", nil, []Field{One("at")})

	// LatchCreate creates a count-down latch.
	LatchCreate = define("latch_create",
		[]Field{One("count"), One("arrivals")},
		[]Field{One("want"), One("ttl")})
	// LatchDown records one arrival at a latch.
	LatchDown = define("latch_down",
		[]Field{One("count"), One("arrivals")},
		[]Field{One("token"), One("channel")})
	// LatchCount reads the arrivals a latch still misses.
	LatchCount = define("latch_count", []Field{One("count"), One("arrivals")}, nil)

	// ListScan reads one page of a master's keys (RLOCKLIST).
	ListScan = define("list_scan", nil, []Field{One("cursor"), One("count"), One("meta")})
	// ListPresent reads which of some keys a master has (RLOCKLIST).
	ListPresent = define("list_present", []Field{Rest("keys")}, nil)

	// LockAcquire is the plain (and multi-resource) lock's acquire, for a
	// writer that does not wait: no fair queue, no reader, no mark.
	// One resource is sent as plain commands (lockAcquirePlain).
	LockAcquire = define("lock_acquire", lockKeys, lockArgs).splits(MergeGrant).plainForm(lockAcquirePlain)
	// LockAcquireWait is the acquire of a writer that waits: it marks the
	// resources that refuse it and lets the readers who waited go first.
	LockAcquireWait = define("lock_acquire_wait", waitKeys, waitArgs).splits(MergeGrant)
	// LockAcquireFair is a fair lock's acquire (one resource, its queue).
	LockAcquireFair = define("lock_acquire_fair",
		append(waitKeys[:len(waitKeys):len(waitKeys)], One("queue"), One("deadlines")),
		append(waitArgs[:len(waitArgs):len(waitArgs)], One("stale"), One("ticket"), One("id")))
	// LockAcquireNX is drop-in mode's exclusive acquire (SET NX's rule).
	LockAcquireNX = define("lock_acquire_nx",
		append(lockKeys[:len(lockKeys):len(lockKeys)], Each("owner")),
		[]Field{One("value"), One("ttl"), One("proposal"), One("lagms"), One("nonce")}).splits(MergeGrant)
	// LockUnacquireNX rolls back what one LockAcquireNX attempt set.
	LockUnacquireNX = define("lock_unacquire_nx",
		[]Field{Each("lock"), Each("fence"), One("lag"), Each("owner")},
		[]Field{One("value"), One("nonce")}).splits(MergeSum)
	// LockFence writes a lease's fences back while it holds.
	LockFence = define("lock_fence",
		[]Field{Each("lock"), One("seq")},
		[]Field{One("token"), Each("value")}).splits(MergeAll)
	// LockRelease releases the lock keys that hold a token.
	LockRelease = define("lock_release",
		[]Field{Each("lock"), Each("waiting"), Each("readers"), Each("holds"), Opt("queue")},
		[]Field{One("token"), EachOpt("channel")}).splits(MergeRelease)
	// LockExtend resets the ttl of the lock keys that hold a token.
	LockExtend = define("lock_extend",
		[]Field{Each("lock"), Each("fence"), Each("readers"), Each("holds"), One("lease")},
		[]Field{One("token"), One("ttl"), One("lagms")}).splits(MergeSum)
	// LockExtendOwned is LockExtend for drop-in mode's locks (owner keys).
	LockExtendOwned = define("lock_extend_owned",
		[]Field{Each("lock"), Each("fence"), One("lease"), Each("owner")},
		[]Field{One("token"), One("ttl"), One("lagms")}).splits(MergeSum)
	// LockBreak deletes a resource's lock whatever holds it (RLOCKBREAK)
	// and marks it broken.
	LockBreak = define("lock_break",
		[]Field{One("lock"), One("fence"), One("readers"), One("owner"), One("lag"), One("broken"), One("holds")},
		[]Field{One("channel"), One("life")})
	// LockReenrol is lock_acquire for an extension's re-enrolment: never
	// where a break mark lists the token.
	LockReenrol = define("lock_reenrol",
		append(lockKeys[:len(lockKeys):len(lockKeys)], Each("broken"), Opt("holds")),
		append(lockArgs[:len(lockArgs):len(lockArgs)], Rest("hold"))).splits(MergeGrant)
	// LockDelete deletes lock keys whatever they hold (drop-in DEL).
	LockDelete = define("lock_delete",
		[]Field{Each("lock"), Each("fence"), One("lag")},
		[]Field{Each("channel")}).splits(MergeEach)
	// LockDeleteExact deletes a lock key only if it holds the grant seen.
	LockDeleteExact = define("lock_delete_exact",
		[]Field{One("lock"), One("fence"), One("lag"), One("owner"), One("holds")},
		[]Field{One("value"), One("channel"), Rest("nonce")})
	// LockInfo reads what one master holds for a resource.
	LockInfo = define("lock_info", []Field{One("lock"), One("fence"), One("readers"), One("holds")}, nil)
	// LockHold takes a re-entrant hold (RLOCK ... REENTRANT).
	LockHold = define("lock_hold",
		append(lockKeys[:len(lockKeys):len(lockKeys)], One("holds")),
		append(lockArgs[:len(lockArgs):len(lockArgs)], One("hold"), One("order"), One("max")))
	// LockUnhold takes one re-entrant hold away, releasing the lock with
	// the last.
	LockUnhold = define("lock_unhold",
		[]Field{One("lock"), One("fence"), One("lag"), One("holds"), One("readers")},
		[]Field{One("token"), One("hold"), One("last"), Opt("channel")})
	// LockOwner reads a lock key's value and owner nonce.
	LockOwner = define("lock_owner", []Field{One("lock"), One("owner")}, nil)

	// RWAcquire takes a read lock.
	RWAcquire = define("rw_acquire",
		[]Field{One("lock"), One("readers"), One("mark"), One("lease"), One("rnext"), One("rafter"), One("owner")},
		[]Field{One("token"), One("ttl"), One("id"), One("life"), Opt("join")})
	// RWExtend extends a read lock.
	RWExtend = define("rw_extend",
		[]Field{One("lock"), One("readers"), One("lease")},
		[]Field{One("token"), One("ttl")})
	// RWReenrol takes a read lock again where its reader is gone (an
	// extension's re-enrolment).
	RWReenrol = define("rw_reenrol",
		[]Field{One("lock"), One("readers"), One("lease"), One("broken")},
		[]Field{One("token"), One("ttl")})
	// RWLeave takes a waiting reader out of the readers next and after.
	RWLeave = define("rw_leave",
		[]Field{One("rnext"), One("rafter"), One("lock")},
		[]Field{One("id"), One("channel")})
	// RWRelease releases a read lock.
	RWRelease = define("rw_release",
		[]Field{One("lock"), One("readers")},
		[]Field{One("token"), Opt("channel")})

	// SemAcquire takes permits of a semaphore.
	SemAcquire = define("sem_acquire",
		[]Field{One("sem"), One("record"), One("lease"), One("queue"), One("deadlines"), Opt("mark")},
		[]Field{One("token"), One("ttl"), One("limit"), One("count"), One("start"),
			One("stale"), One("ticket"), One("id"), Rest("exact")})
	// SemCount reads the holders of a semaphore's slots.
	SemCount = define("sem_count", []Field{One("sem")}, nil)
	// SemExtend resets the ttl of a token's permits.
	SemExtend = define("sem_extend",
		[]Field{One("sem"), One("record"), One("lease")},
		[]Field{One("token"), One("ttl")})
	// SemRelease releases a token's permits.
	SemRelease = define("sem_release",
		[]Field{One("sem"), One("record")},
		[]Field{One("token"), Opt("channel"), Opt("id")})
	// SemSet stores a semaphore's limit (RSEMSET).
	SemSet = define("sem_set", []Field{One("sem")},
		[]Field{One("limit"), One("keep"), One("version"), One("channel"), One("id")})

	// WaitMark counts a waiting call in or out of its resources' waiting
	// sets.
	WaitMark = define("wait_mark", []Field{Rest("waiting")}, []Field{One("id"), One("wait")}).splits(MergeAll)
	// WaitInfo reads how many calls wait for a resource, and where a fair
	// waiter stands in its queue.
	WaitInfo = define("wait_info", []Field{One("waiting"), Opt("queue"), Opt("deadlines")}, []Field{One("id")})
)

// The plain lock's layout, which its variants extend.
var (
	lockKeys = []Field{Each("lock"), Each("fence"), One("lag"), One("seq"), One("lease")}
	lockArgs = []Field{One("token"), One("ttl"), One("proposal"), One("lagms")}
	waitKeys = append(lockKeys[:len(lockKeys):len(lockKeys)], Each("mark"), Each("rnext"), Each("rafter"))
	waitArgs = append(lockArgs[:len(lockArgs):len(lockArgs)], One("markttl"), One("markid"))
)

// All returns every script's descriptor, in a fixed order.
func All() []*Script {
	return []*Script{
		BusPublish, ElectCampaign, ElectExtend, ElectLeader, ElectProclaim, ElectResign, ElectTerm,
		FairDequeue, FairEnqueue, FairTicket, FenceFloor, FenceHighwater, LeaseLeft, TimeLeft,
		LatchCreate, LatchDown, LatchCount, ListScan, ListPresent,
		LockAcquire, LockAcquireWait, LockAcquireFair, LockAcquireNX, LockUnacquireNX, LockFence,
		LockRelease, LockExtend, LockHold, LockUnhold, LockExtendOwned, LockDelete, LockDeleteExact, LockInfo, LockOwner, LockBreak, LockReenrol,
		RWAcquire, RWExtend, RWLeave, RWReenrol, RWRelease,
		SemAcquire, SemCount, SemExtend, SemRelease, SemSet, WaitInfo, WaitMark,
	}
}

// ByName returns the descriptor of the script called name, or nil.
func ByName(name string) *Script {
	for _, s := range All() {
		if s.Name == name {
			return s
		}
	}
	return nil
}
