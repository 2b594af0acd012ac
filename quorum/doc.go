// Package quorum is the Redlock engine: it grants, releases and extends
// leases on a set of resources by asking N independent Redis masters in
// parallel and counting a quorum of their answers.
//
// It knows nothing about RESP or about any Redis client: it talks to the
// masters through the small Node interface, whose implementation lives in
// quorum/redisnode.
//
// # What a grant means
//
// A Lease is returned only when, within one attempt:
//
//  1. a quorum of masters set every lock key of the lease to the lease's
//     token (atomically, all keys or none on each master);
//  2. the fence chosen for each resource was written back to a quorum of
//     masters, each write conditional on that master still holding the lock;
//  3. the validity, ttl - elapsed - (ttl*drift_factor + 2ms), measured from
//     the start of that attempt, is still positive after step 2.
//
// Any attempt that does not end in a grant is rolled back, token-checked, on
// every master that might hold its keys (those that timed out included), on
// a context that outlives the caller's.
//
// # Fencing
//
// Each master keeps, per resource, a fence counter under the meta prefix.
// The acquire script returns the counter it saw; the engine picks
// fence = max(seen over the acquiring quorum) + 1 and writes it back to a
// quorum with "counter = max(counter, fence) if the lock is still mine".
// Let G1 be granted before G2 on the same resource. The write-back quorum of
// G1 and the acquisition quorum of G2 share at least one master m. On m, G1's
// write-back ran while G1 held the lock, and G2 could only take the lock on m
// after G1's key there was gone; so G2 read a counter >= fence(G1) on m and
// picks a strictly larger fence. ("Increment on each master and return the
// max" is not monotonic: two grants can meet on a master that the first did
// not increment to its returned value.)
//
// # What is NOT guaranteed
//
// Redlock's safety rests on timing assumptions: bounded clock drift between
// proxy and masters, and process pauses shorter than the validity margin.
// A client that pauses (GC, swap) past its validity may still act as holder;
// only the fence, checked by the downstream store, protects against that.
// A master that restarts without persistence forgets its locks and fence
// counters; until restart quarantine lands (see PROTOCOL.md, "Restarted
// masters") such a restart can allow a second grant while the first is
// still valid, and can let a fence repeat.
//
// A grant made with a caller-chosen token (TOKEN t) shares that token with
// every retry. The engine never counts, in a later attempt, the vote of a
// master whose rollback from an earlier attempt of the same call was not
// acknowledged, and it waits for that rollback before answering a failed
// TOKEN call. A rollback still in flight on a master that is slower than
// master_timeout can, however, land after a new call with the same token
// reached that master; a client that retries with TOKEN should wait
// master_timeout after a failure.
package quorum
