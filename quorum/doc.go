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
// # Restarted masters
//
// A master that restarts without persistence forgets its locks and its
// fence counters. Every new connection to a master reads its run_id before
// any request is sent on it (Node.Identity), and the engine checks it each
// time it counts an answer, so a restart is seen before the restarted
// master's first vote could count. Its votes then do not count for
// Options.Quarantine (limits.max_ttl: every lock it may have held has
// expired by then); releases and rollbacks still go to it.
//
// Before it votes again its fence floor is raised: every fence write-back
// also raises the master's high-water mark, and the floor of a restarted
// master becomes the highest high-water mark of a quorum of the other
// masters (and at least the highest fence this engine issued). The acquire
// script reads every counter as at least the floor. A fence F written back
// to a quorum Qw before the restart is thus never lost: a quorum Qr of the
// N-1 other masters and the q-1 or more members of Qw other than the
// restarted one share at least 2q-N >= 1 master, which holds F.
//
// # What is NOT guaranteed
//
// Redlock's safety rests on timing assumptions: bounded clock drift between
// proxy and masters, and process pauses shorter than the validity margin.
// A client that pauses (GC, swap) past its validity may still act as holder;
// only the fence, checked by the downstream store, protects against that.
//
// The first run_id the engine sees for a master is taken as it is: a proxy
// that starts cannot know whether a master restarted just before it, and
// counts its vote at once. Other proxies that were running at the time do
// quarantine it. Run masters with persistence, or start a new proxy more
// than max_ttl after any master restarted.
//
// A master that loses its data silently (same run_id, e.g. FLUSHALL, or a
// failover to a replica behind it) is not noticed. If a quorum of masters
// lose their data at once, fences may repeat: the engine rejoins them with
// the best floor it can find rather than refuse service for good, and logs
// an error.
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
