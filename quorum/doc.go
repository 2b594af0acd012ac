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
//  2. a quorum of masters hold the lease's fence for each resource, written
//     while they held the lock (see Fencing);
//  3. the validity, ttl - elapsed - (ttl*drift_factor + 2ms), measured from
//     the start of that attempt, is still positive after step 2.
//
// Any attempt that does not end in a grant is rolled back, token-checked, on
// every master that might hold its keys (those that timed out included),
// each only once its acquire returned (so the release cannot overtake it),
// on a context that outlives the caller's.
//
// # Fencing
//
// Each master keeps, per resource, a fence counter under the meta prefix.
// The acquire script, in the same atomic step that takes the lock, raises
// the counter to max(counter, floor)+1 and returns it. The fence is the
// highest value returned by the acquiring quorum. A master that returned
// exactly that value already holds it; if fewer than a quorum did (their
// counters disagreed), the fence is written back to the others with
// "counter = max(counter, fence) if the lock is still mine" until a quorum
// holds it. In the usual case (counters agree) a grant takes one round.
//
// Let G1 be granted before G2 on the same resource. The quorum that holds
// G1's fence F1 and the quorum that acquired G2 share at least one master
// m. On m, F1 was written while G1 held the lock, and G2 could only take
// the lock on m after G1's key there was gone; so G2's acquire raised m's
// counter to at least F1+1, and G2's fence is greater than F1.
// ("Increment on each master and return the max" without the write-back
// is not monotonic: two grants can meet on a master that never saw the
// first grant's maximum.)
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
