// Package quorum is the Redlock engine: it grants, releases and extends
// leases on a set of resources by asking N independent Redis masters in
// parallel and counting a quorum of their answers.
//
// It knows nothing about RESP or about any Redis client: it talks to the
// masters through the small Node interface, whose implementation lives in
// quorum/redisnode.
//
// # Shape: rounds over operations
//
// Every primitive is a thin layer over one machinery:
//
//   - Node.Send(name, keys, args, done) issues the Lua script name
//     (quorum/scripts/<name>.lua, one file per operation) to one
//     master, to run there atomically, and calls done with the reply;
//     requests to one master reach it in the order issued. A Node knows
//     nothing of locks.
//   - An op is one request for every master: script, keys, args, timeout.
//   - Engine.send issues an op to every master at once and returns a
//     round; each reply completes its master's part of the round where it
//     arrives, one timer per round answers for the silent ones at the
//     deadline, and nothing the caller does cancels it (no goroutine per
//     master call). Engine.follow issues a follow-up to each master only
//     once that master's request in an earlier round returned, so that it
//     can never overtake it on the master's ordered connection.
//   - round.count reads the answers as they arrive and stops as soon as a
//     rule decides: grantRule for acquisitions (yes at quorum; no once a
//     quorum answered and yes can no longer reach it; else no quorum),
//     strictRule for releases and extensions (no only when N - quorum + 1
//     masters said no). A predicate says whether one master's answer is a
//     yes. A restarted master's answer never counts (see Restarted
//     masters); tally.err turns "no quorum" into a *QuorumError.
//   - Engine.undo sends the primitive's undo op (token-checked) to every
//     master that may hold what a failed round did, timed-out ones
//     included, each after its own request returned.
//   - acquireLoop is the one acquire loop: it tries with the caller's
//     token or a fresh one per try, gives back a grant whose caller left,
//     and waits in retry, the one wait loop (a release notification from
//     any proxy or the jittered retry timer, the caller's hang-up, the
//     WAIT deadline), before trying again. Every blocking primitive
//     acquires through it.
//   - Engine.spread writes a chosen value (a fence) back until a quorum
//     holds it, for primitives whose safety needs that.
//
// The exported surface is a handful of verbs over one Lease value:
// Acquire takes a Request that names its Primitive; Release, Extend,
// Abandon and Info work on any primitive's lease; Latch drives latches;
// Delete is drop-in mode's DEL; Status and EndQuarantine are the masters'
// side. The verbs dispatch on one table, primitives (api.go): a
// primitive is a value there (its acquire, release, extend, abandon and
// info, its operation names for metrics, its scripts and the section of
// this doc that argues its safety). Plain and multi-resource locks
// (lock.go) are the reference primitive: a lockSet names the keys,
// lock_acquire (a writer that does not wait: nothing but the keys, the
// fences and the lease mark), lock_acquire_wait (a writer that waits: the
// writer marks and the readers next, see "Read-write locks"),
// lock_acquire_fair (its queue, see "Fair locks"), lock_fence /
// lock_release / lock_extend are its scripts, each sent through its
// descriptor in quorum/scripts; decodeAcquire reads one master's answer.
//
// # How to add a primitive
//
// A new primitive (leader election, say) touches these files and tables;
// TestPrimitiveChecklist (quorum) and TestEveryPrimitiveHasCommands
// (commands) fail while one of the starred ones is missing.
//
//  1. * Scripts: one per operation in quorum/scripts, named
//     <primitive>_<operation>.lua, each starting with the header that
//     binds its KEYS and ARGV to names, and its descriptor in
//     quorum/scripts (named keys and arguments; the scripts' test checks
//     one against the other). Atomic, token-checked and idempotent on one
//     master (a resend must never report a false "taken" nor touch another
//     owner's keys); every key it writes expires, or is deleted when the
//     primitive is no longer live. Helpers shared with other scripts (the
//     lease mark, the master's time) come from the prelude.
//  2. The algorithm: a new file of this package names the keys (under
//     Options.MetaPrefix for anything that is not a lock key), builds
//     the ops from the descriptors, and writes each operation as: send,
//     count with a rule and a yes predicate, undo on failure. Its
//     acquisition is an attempt run by acquireLoop. A primitive that is
//     a lock with more (an election) builds its own lockSet (keys,
//     channels) and reuses attempt, its fence write-back and rollback,
//     rather than a new acquire loop. Wake-ups other than releases (an
//     election's changes) go on the primitive's channel with a message
//     that wakes no waiter ("0:<id>", see Wakeups.Notify) and are read
//     by a watch that wakes on everything (watchAll). TestEverySubset
//     compares the masters' keys through fakeNode.dump, which must know
//     every Redis type the primitive writes (hashes were added for the
//     election's advertisement).
//  3. * The table: a Primitive constant and its entry in primitives and
//     Primitives (api.go): verbs, operation names (the metrics' series
//     follow), scripts, doc section.
//  4. * The safety argument: a section of this doc, named in the entry,
//     saying why the invariant holds with a minority of masters failed,
//     slow or restarted empty.
//  5. * The every-subset test: a row in subsetRows (subset_test.go),
//     which runs it over every assignment of ok, down, taken and slow
//     masters and checks grant, refusal, rollback and release.
//  6. * Commands: its commands in commands/<family>.go, built from
//     acquireHandler, releaseHandler and extendHandler (commands/verbs.go)
//     with their COMMAND DOCS, and an example row in
//     TestEveryPrimitiveHasCommands; a new error type gets its RESP code
//     in commands/errors.go; table tests of its replies with the fake
//     engine (commands/handlers_test.go). A verb of its own (an
//     election's Proclaim and WatchElection) goes on commands.Engine and
//     on the fake engine (commands/fake_engine_test.go), whose req()
//     must also record any new Request field; its operation name, if it
//     reports one, goes in Operations' extra list (the metrics). A
//     command with subcommands (RELECT) is one entry of the table:
//     COMMAND DOCS, the arity check and the metrics' Result
//     (TestResultKinds) see only its top level, so its table tests must
//     cover each subcommand's arity, and one Result serves them all.
//  7. The contract and the docs: its section in docs/PROTOCOL.md, the
//     command table in docs/commands.md, the CHANGELOG; an integration
//     test against real masters in tests/.
//
// # What a grant means
//
// A Lease is returned only when, within one attempt:
//
//  1. a quorum of masters set every lock key of the lease to the lease's
//     token (atomically, all keys or none on each master; with the
//     slotted layout, atomically per hash slot, see Cluster masters);
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
// A multi-resource lock is one lock over a set: duplicates are dropped and
// the keys are sorted, so every master takes the whole set or none of it
// in one script (with the slotted layout, one script per slot, and a
// master that refuses any slot rolls back the others: see Cluster
// masters); two requests over overlapping sets therefore contend like
// two plain locks, and cannot hold half each.
//
// Release of a lock reports held only with a quorum of masters that released every
// key, and not held only when N - quorum + 1 masters said so (then no
// quorum can have held it up to the release); otherwise it is an error, as
// the answers decide nothing. Extend follows the same rule.
//
// Releases ask again (confirm.go). A release whose answers within
// MasterTimeout decide nothing (a busy machine's answers arrive late, a
// connection broke) reads the answers still to come, then asks the
// masters that failed or stayed silent again, every RetryDelay, until the
// validity of what it releases ends, and at least Options.ReleaseRetry
// (config release_retry): the validity is the lease's when its holder
// knows it (the connection that keeps it), else the longest ttl a master
// that released it said it had left (every release script but an
// election's resignation answers that beside its verdict), less the
// drift; the silent masters were given the same ttl at about the same
// time. Past it the lock is gone wherever it was not released, and the
// release answers NOQUORUM. So a release may wait as long as the lock's
// ttl when a quorum stays silent (a connection's close does not wait
// more than a second for its leases' releases, which carry on). An
// extension stops at ReleaseRetry, and when the validity it would report
// ends.
// A resend is safe because every release script is token-checked and
// idempotent on one master: it deletes only what the token holds, and a
// second run finds nothing to delete and touches no other owner's keys.
// What a resend cannot do is prove a "not held": the first request may
// have run after its deadline and deleted the key, its answer lost. So a
// resent "not held" counts as no answer; "not held" is reported only
// from first answers, and a first request's answer that arrives after its
// round's deadline (kept for these rounds) counts when it found the token.
// Extension scripts delete nothing, so their resent answers are definite.
//
// # Fencing
//
// Each master m keeps three kinds of keys under the meta prefix:
//
//   - fence-hwm, its fence sequence: never lowered, no expiry, at least
//     every fence m ever stored (one key per master, not per resource);
//   - fence-lag, a lagging bound (at most the sequence), which expires
//     FenceLag after it was created;
//   - fence:<r> for each resource r that is held or was held within the
//     last ttl + FenceLag: its latest fence, expiring FenceLag after the
//     lock's own ttl, deleted with the lock by a release.
//
// The acquire script, in the same atomic step that takes the lock, gives r
// the fence c = max(P, fence:<r> + 1, fence-lag + 1), where P is the
// proxy's proposal (above every fence and sequence this proxy has seen,
// so masters usually agree); when fence-lag is absent it is first created
// from the sequence. It stores c in fence:<r>, raises the sequence, and
// returns the sequence with c. The fence is the highest c of the acquiring
// quorum; if fewer than a quorum returned exactly that, it is written back
// ("fence:<r> = max(fence:<r>, fence) if the lock is still mine") until a
// quorum holds it. A release folds fence:<r> into fence-lag (if fence-lag
// exists) before deleting it. So nothing per resource outlives the lock by
// more than FenceLag, and fences of different resources are comparable.
//
// On one master, once F was stored in fence:<r>, every later acquisition
// of r there gets c > F. If fence:<r> is present at that acquisition, it
// holds at least F (stored values only rise while the key lives, and a key
// re-created since was created by a later acquisition, which by induction
// got more than F). If it is absent, the key holding F (or more) ended:
//
//   - by a release: that release raised fence-lag to at least F if it
//     existed; a fence-lag created later is created from the sequence,
//     which was at least F; either way fence-lag + 1 > F while it lives,
//     and a new one is created from the sequence again;
//   - by expiry, at least FenceLag after its last write: a fence-lag that
//     still lives was created less than FenceLag ago, so after that write,
//     from a sequence that was already at least F; one that does not is
//     created now, from the sequence.
//
// Across masters: let G1 be granted before G2 on the same resource. The
// quorum that holds G1's fence F1 and the quorum that acquired G2 share a
// master m. On m, F1 was stored while G1 held the lock, and G2 took the
// lock on m after G1's key there was gone; so G2's c on m is above F1, and
// G2's fence (the maximum) is greater than F1. ("Take a fence on each
// master and return the max" without the write-back is not monotonic: two
// grants can meet on a master that never saw the first grant's maximum.)
//
// A retry of the holder keeps its fence. When every lock key of a request
// already holds its token on a master (a TOKEN retry of a grant whose
// reply was lost), the script gives each resource the value its fence key
// holds instead of a new one: the retry is the same grant, and answers
// the same fence (docs/clients.md, TOKEN). The arguments above still hold, because
// they are about acquisitions that take a key no one holds: on that
// master the token has held the key continuously since such an
// acquisition, whose fence was above every fence stored there before, and
// the fence key only rose since (write-backs of this grant). A grant to
// another token in between cannot have been granted where the key held
// this token, so every master of its fence quorum gave this token the key
// again afterwards, with a fence above it. A retry that takes a key fresh
// on some master gets a new, higher fence there, and the grant's fence (the
// quorum's maximum) may then be higher than the first reply's; it is never
// lower.
//
// FenceLag is a constant of the version, not a setting: the argument needs
// every proxy to write fence keys with at least the lifetime that every
// proxy gives fence-lag. Expiry is measured by each master's own clock,
// which Redlock already assumes does not jump.
//
// Upgrading from the layout before 1.1 (a counter fence:<r> without expiry
// per resource ever locked, fence-floor and fence-hwm per master) issues
// no lower fence: fence-hwm was kept at least every counter and the floor,
// and is the sequence now; an old counter, if present, is read like a
// fence key. Old counters are never deleted by the proxy except by a
// release of their resource; they are harmless and may be deleted by hand
// once every proxy runs 1.1. Proxies before and after 1.1 must not serve
// the same masters at once: an old proxy ignores fence-lag.
//
// # Semaphores
//
// A semaphore of limit L is L numbered slots, and each slot is taken like
// a lock: a string key under the meta prefix holding the token, with the
// ttl as expiry, set only where it is free or already the token's. A
// grant of n permits is n slots, each held with the token on a quorum of
// masters, within the validity. Two grants that hold the same slot at the
// same time would each have a quorum of masters holding it, and two
// quorums share a master, where the key holds one token only: so each slot
// has at most one live grant, and at most L permits are live, whatever a
// minority of masters does. (Keeping a set of at most L holders per master
// and granting on any quorum does not do this: quorums that differ by one
// master each see at most L, and together more.) A master that restarts
// empty forgets its slots; as for locks, its votes do not count until
// every grant it may have voted for has expired (Restarted masters).
//
// The masters choose the slots in one script, so an acquisition is one
// round whatever L is: the token keeps the slots it holds and takes free
// ones, searching from one random slot per try, which masters in the same
// state all pick alike. Masters that saw concurrent tries in different
// orders may give different slots; then a second round asks every master
// for exactly the n slots that the most of them can give. Anything short
// of n slots each on a quorum is rolled back. Each master keeps, per
// token, its record (the slot list, same ttl), so that a release or an
// extension counts only masters that hold the same slots, and per
// semaphore its limit, living as long as its longest-lived slot and
// deleted by the release that frees its last slot: a semaphore not in use
// leaves nothing on the masters, and users who pass another limit while it
// is in use are refused (LimitError). A release announces how many permits
// it freed, and each proxy wakes only that many of its waiters, first in
// their queue order below (lowest ticket), then oldest first.
//
// Waiters first. Who may take a free slot is a second rule, checked by
// sem_acquire in the same script as the slots on each master, and it
// only ever refuses: a refusal changes no slot, so the argument above,
// and the limit, do not depend on it. Each semaphore has a queue of
// waiters on each master, kept like a fair lock's (same tickets from the
// fence sequence, same enqueue and dequeue scripts, so one order on every
// master): member "<count>:<id>" by ticket, and by deadline on the
// master's clock. A call that will wait (WAIT) and is refused takes a
// ticket once (if fewer than a quorum answer, it asks again at its next
// refusal, and until then has every waiter ahead of it); each of its
// tries re-places it at its ticket and pushes its deadline ahead. On each master, a request for n permits is granted
// only if the slots it holds or finds free, less the permits asked by the
// live waiters queued ahead of it, are at least n; a request not queued
// (one that does not wait, or a waiting call's first try) has every
// waiter ahead of it. A token that holds its n slots there already (a
// TOKEN retry of a grant) is granted as before. The rule is checked where
// a try searches for slots (its first round); the second round of the
// same try (exact slots, asked only once a quorum admitted the try) and
// the fix-up of stragglers after a grant do not consult it. A grant takes
// the waiter out of the queue on that master; a call that returns,
// granted or not, leaves it on every master after its last try there.
//
// What that gives:
//
//   - A waiter woken by a release is not overtaken by a request that
//     arrives after the release, on any proxy: it was queued before
//     (its ticket is held by a quorum before it waits), so a later
//     request is either not queued or queued behind it (a later ticket
//     is higher: "One order on every master" under Fair locks), and on
//     every master the freed permits count for the waiter first. The
//     releaser asking again at once is such a request.
//   - A COUNT n waiter keeps its place: the single-permit requests behind
//     it are refused until n permits are free for it, so it cannot
//     starve. The price is that permits freed meanwhile stay idle until
//     enough are free, at most the longest hold ahead of it.
//   - It is not one at a time: with L permits, the waiters at the front
//     whose counts fit are all granted at once, as they try.
//
// Why a queue and not a hand-off window (freed slots kept a few
// milliseconds for woken waiters): the masters do not know who was woken
// (each proxy wakes its own), a window does not keep a COUNT n waiter's
// place (single waiters woken in it take the permits one by one), and its
// length is a guess between permits left idle and waiters overtaken on a
// slow machine. Why tickets and not each master's arrival order: waiters
// that reach the masters in different orders could each be ahead on some
// masters and none on a quorum, and all be refused until they give up.
//
// Cost and expiry. A semaphore no one waits on pays a clock read and two
// reads of absent keys per try. A waiting call pays two rounds once, at its first
// refusal (ticket and write-back), and one dequeue when it returns. An
// entry's deadline is two tries' spacing after its last try (as a
// read-write lock's writer mark): a waiter whose proxy died holds permits
// back at most that long, and the next try on that master removes it.
// The queue's keys expire twice that after their last write and are
// deleted when the last waiter leaves: nothing outlives the waiters, and
// nothing grows with the number of semaphores ever used. A waiter that
// gives up at the head of the queue announces the new head (as a fair
// lock's hand-off), so that the waiters behind it try at once. A master
// that restarts empty loses its queue, and the waiters' next tries (one
// retry delay) re-place it; until then it may give a newcomer a slot
// that a waiter should have had there, which costs order, never the
// limit.
//
// Resizing (RSEMSET, SemSet). SemSet stores a limit L' on every master
// it reaches, with a version (the proxy's clock in ms, then a random
// tie-break: a master keeps the highest, so masters that see two SemSets
// in either order agree) and the span, the highest limit the semaphore
// had while its config key lived (sem .. ':c'). A try sends the limit it
// uses (the caller's, or the one a quorum of masters store, read first),
// and a master that stores another refuses it without a vote (its answer
// {-1, stored}: a LimitError for a caller that gave one; for one that
// did not, the next try reads the limit again). So a grant is made by a
// quorum of masters that all store the limit it used. And on each master,
// a try is refused while any slot from the limit up to the span is held.
// Why lowering never over-subscribes: say SemSet(L') returned (reached a
// quorum Qs) and a grant G is then made on a quorum Qg. Qg meets Qs, so
// a master of Qg stores L' (versions only rise), hence every master of Qg
// does, and each refused G while a slot of [L', span) was held there. A
// permit H held in slot h >= L' was granted before, held on a quorum Qh
// within its validity; Qg meets Qh at a master where slot h was held and
// checked. So G was granted only once no permit above L' was held, and G
// and every later grant use slots below L': at most L' permits are
// held, each slot by one grant as above, from the moment the permits
// above L' are released or expire. Before that, the permits held (at most
// the old limit) are not revoked and no permit is added. Raising the
// limit adds slots; the masters that store the raise announce the permits
// added (as a release does: "<count>:<id>"), so waiters on every proxy
// try at once, and so does the release of the last permit held above a
// lowered limit (every free permit below it). A SemSet that reached fewer
// than a quorum leaves masters that disagree: no quorum agrees on one
// limit, so callers that give no limit are refused (ErrNoSemLimit) and
// others may be (LimitError), until a SemSet reaches a quorum. A SemSet
// that returned goes on sending the limit to the masters that did not
// answer (for up to a minute), so that they do not keep the old one: the
// argument above needs Qs, and a master of Qs that restarts empty forgets
// the limit (its quarantine covers grants, not limits), so with some
// masters still on the old limit, a caller that gives the old one could
// find a quorum of masters that accept it. Once every master stores the
// new limit, a minority restarted empty leaves a quorum that store it,
// and the argument holds; a proxy logs a SemSet that could not reach
// every master in that minute. A master whose version is above the
// proposal (another proxy's clock ahead) refuses it; SemSet then proposes
// above the highest version stored. The span shrinks back to the limit
// on a master where a try finds nothing held above the limit: nothing can
// be held there again unless the limit rises. Permits held above a lowered limit are
// extended but not re-enrolled, and while they are held no try (nor a
// re-enrolment of a permit below the limit) is granted. A restarted
// master forgets the limit and the span with its slots, and is
// quarantined as for any grant: its votes count again only once every
// permit it may have held has expired. Expiry: the limit key and the
// config key live at least keep (SemSet's, one day by default) and at
// least as long as any held slot (sem_live, at every grant and
// extension); a grant renews keep. The release of the last permit no
// longer deletes a limit that SemSet stored. The cost to semaphores that
// were never resized: one read of an absent key per try, release and
// extension.
//
// # Fair locks
//
// A fair lock (Primitive Fair, RFAIRLOCK) is a plain lock on one resource, same
// lock key, same fence, same release: fair and plain locks exclude each
// other, and mutual exclusion never depends on the queue. The queue only
// chooses who may try. Each master keeps it as a sorted set of waiter ids
// by ticket (one id per call: the caller's token, or a random id while
// the lock token is fresh for every try), and a sorted set of their
// deadlines by the master's own time; lock_acquire_fair refuses
// unless the queue is empty, the id is its head, or the lock key holds the
// token already (a TOKEN retry of the holder), and takes the id out of the
// queue when it grants.
//
// One order on every master. A refused caller that will wait asks every
// master for a ticket (max(proposal, the master's sequence + 1), the fence
// sequence, which tickets share), takes the highest of a quorum's answers
// and writes that one ticket back to every master, and waits only once a
// quorum holds it. The score is chosen once, by the enqueuing proxy, and is
// the same on every master; a per-master order (a list pushed on each
// master) would let waiters that reach the masters in different orders
// each be first on some masters, none on a quorum, and stall. If A's
// ticket Ta is held by a quorum Qa before B asks for a ticket, B's quorum
// of answers shares a master with Qa whose sequence is at least Ta, so
// Tb > Ta: arrival order is ticket order.
//
// Two waiters never both believe they are first on a quorum: with Ta < Tb,
// B is the head on a master only where A is absent. A is present on Qa,
// and any quorum Qb where B is the head shares a master with Qa, where A,
// with the lower ticket, is ahead of B. A leaves a master's queue only by
// being granted, leaving (its WAIT ran out, its client left: a dequeue to
// every master, following its last try on each connection, so it can
// never be granted afterwards; a grant that raced the caller's exit is
// rolled back and the new head is told), by going stale, or by a restart.
//
// Stale waiters. Every try re-places the token at its ticket and pushes
// its deadline fair.stale_after ahead. A waiter whose proxy died stops
// trying; the next try of anyone behind it, after its deadline, removes
// it: a dead head blocks the queue at most stale_after (plus one retry
// delay). stale_after must exceed the longest gap between two tries of a
// live waiter (checked by the configuration). The queue keys expire
// 2 * stale_after after their last write and are deleted when the last
// waiter leaves: an idle resource keeps nothing.
//
// Hand-off. A release of the resource announces the head of the queue
// on its release channel ("h:<token>"). Each proxy wakes its plain
// waiters and only the fair waiter with that token, which tries once a
// quorum of masters announced the release (or after handOffGrace), so
// that its try does not reach masters before the release: nobody but the
// head is woken. Waiters not at the head still try every retry delay, to
// keep their deadlines and re-place themselves on a restarted master.
//
// Restarted masters. A master that restarts empty loses its queue; it is
// rebuilt, not ignored: the tries of every live waiter re-place it at
// its ticket, so within one retry delay the master holds the queue again,
// in the same order, long before its quarantine ends and its votes count
// again. Its sequence is raised from the others before that, so new
// tickets stay above every ticket held. Until then it holds a partial
// queue, but like any single master it cannot make a waiter the head on a
// quorum by itself; with quarantine off, one restart may let a later
// waiter overtake an earlier one for up to one retry delay. Exclusion is
// never at stake: it comes from the lock key.
//
// # Read-write locks
//
// A reader (Primitive Read, RRLOCK) is recorded in the resource's reader set (a
// sorted set of tokens by expiry, on the master's clock), and the lock
// key itself then holds "" (no token is empty) and lives as long as the
// longest-lived reader: every writer (Lock and Fair leases, multi-resource
// locks) sees the key taken without reading anything else, and a reader
// is granted only where the lock key is free or "". Both checks are one
// script on each master, so no writer can take the key between a
// reader's check and its record (the check-then-act bug of read locks
// built from two commands). Safety is the lock's intersection argument: a
// live reader is recorded, with the key holding "", on a quorum Qr until
// its validity ends; a writer needs a quorum Qw of masters where the key
// is free; Qr and Qw share a master, which cannot be both. The same holds
// the other way round. A restarted master forgets its readers and is
// quarantined as for locks.
//
// Who goes first (phase-fair). Exclusion above never depends on it: it
// only decides who may try, like the fair lock's queue, and every rule
// below is checked in the same script as the lock key on each master.
// Three per-resource records, each a sorted set or string that expires:
//
//   - the writer mark (rw-w:<resource>): a writer that will wait and is
//     refused marks the resource (the call's id, expiring after two retry
//     delays plus a round: a live writer renews it with each try, a dead
//     one's lapses within that time). New readers are refused while it
//     lives: writer preference. A grant deletes the call's own mark.
//   - readers next (rw-ra:<resource>): the ids of waiting readers whose
//     turn comes as soon as the lock key is free, each with a deadline
//     (the master's time; the same lifetime as a mark, renewed by every
//     try). A waiting reader refused because a writer holds the key is
//     put there. A reader there is admitted despite writer marks; it
//     stays there until its call returns, granted or not, and leaves
//     then (a try granted on some masters but rolled back keeps the
//     reader's place: had the grant taken it out, a waiting writer could
//     take the key before the reader's next try). A writer that will wait is refused where
//     the key is free and readers next has a live member (it marks the
//     resource as when refused by a holder).
//   - readers after (rw-rb:<resource>): waiting readers refused only by a
//     writer mark: they arrived behind a waiting writer. A waiting
//     writer's grant moves them into readers next: they go right after
//     that writer's hold.
//
// A waiting reader that gives up leaves both sets (its proxy died: its
// entries lapse at their deadline); leaving readers next empty on a free
// key announces a release, so that waiting writers try at once.
//
// The phases alternate: a writer holds; the readers that waited during
// its hold, or arrived behind it while it waited, are readers next; when
// it releases, they are admitted (a waiting writer is refused while any
// of them has not entered) and share the lock; readers arriving now find
// a writer mark and wait behind that writer; when the readers of the
// phase release, the waiting writers contend for the key as plain locks
// do, and the next writer's grant makes the readers behind it the next
// phase. Hence the bounds, for writers and readers that WAIT, on a
// resource whose readers and writers all wait:
//
//   - a reader waits at most the reader phase in progress, if a writer
//     was already waiting when it arrived, plus one writer hold: the hold
//     in progress, or the next waiting writer's; plus the time for its
//     try to reach the masters. A reader that misses its phase (its tries
//     reached too few masters in time) is moved again by the next
//     writer's grant: each miss costs one more writer hold.
//   - a writer waits at most one reader phase (the readers holding and
//     those next) before it may take the key; among writers the order is
//     the lock's own (RLOCK: whoever's try reaches a quorum first;
//     RFAIRLOCK: its queue). A reader phase ends: its readers entered at
//     its start and each holds at most its ttl; a reader next that never
//     comes lapses at its deadline.
//
// Writers that do not wait keep the plain lock's cost: they read neither
// set, and may take a free key at the start of a reader phase; each such
// grant adds its hold to the readers' wait. Readers that do not wait are
// refused by a writer mark as before and are put in neither set.
//
// The sets are per master, and masters may see tries in different orders:
// a reader may be next on some masters and after on others. That costs
// time, never exclusion. A reader whose try found a granted writer
// holding on a quorum (its tries, a retry delay apart or at the writer's
// release, reach every master) is next on that quorum, so no waiting
// writer can be granted after that hold until the reader entered or
// lapsed, while the reader is admitted on that quorum at once. A reader
// that is next on fewer masters (its try met the hold only there) and
// loses the race for the others waits, after, for the next writer's
// grant: that is the "miss" counted in the bound. Partial grants (rolled
// back) may move readers after into readers next early, which only lets
// them in one hold sooner. No state lives longer than its waiters: every
// set expires at its last member's deadline, empty sets are deleted, and
// a reader leaves them when its call returns, granted or not.
//
// Releases wake through the resource's release channel: the last
// reader's release wakes the writers, a writer's release everyone.
//
// Downgrade. The writer of a resource takes its read lock with its own
// token (RRLOCK ... TOKEN <writer's token>), then releases the write lock;
// at no moment is neither held, and upgrade (a reader taking the write
// lock while it reads) stays refused: two readers that both upgrade would
// each wait for the other to leave. On a master where the lock key holds
// the token itself, rw_acquire admits the reader (no writer mark refuses
// it: it is not a new reader phase, it ends a writer's) and the key keeps
// the token, living at least as long as the reader (read_hold). The key
// then excludes other writers and other readers as the write lock did;
// the writer's release (lock_release) and extension (lock_extend) find
// the resource's live readers and leave the key holding "" for as long as
// they live, or never shorten it below that. Exclusion is unchanged on
// every master: the key is never free while a reader recorded there
// lives, and never "" while the writer holds it, so the intersection
// argument above holds of the write lock until its release and of the
// read lock from its grant; a quorum that granted the read lock holds the
// key throughout, as the writer's token and then as "". A downgrade that
// did not reach a quorum is rolled back as any read try (rw_release: the
// reader leaves; the key, still the writer's, is not touched), so the
// write lock is as it was, except that on those masters its key may live
// up to the read ttl longer. A restarted master forgets both, as it
// forgets any lock. The cost to writers that never downgrade: one read of
// an absent key in each release and extension.
//
// # Count-down latches
//
// A latch is, on each master, its count (a string expiring with the latch)
// and its arrivals (a set of tokens, bounded by the count, expiring with
// it). An arrival is SADD of its token, so a retry of a lost reply, on any
// proxy, counts once on each master (a counter decremented per request
// counts it twice). A quorum's view of the arrivals still missing is the
// quorum-th smallest of the masters' answers: a quorum of masters miss at
// most that many, so "open" (0) means open on a quorum. The arrival that
// opens a master's latch announces it, and waiters on every proxy
// recount. A latch that at least N - quorum + 1 masters do not have cannot
// be on a quorum: "no such latch". A master that restarted empty has no
// latch; arrivals still count on the others, and a latch created again
// after a restart starts empty on that master only.
//
// # Leader election
//
// An election (Primitive Election, RELECT) is a lock on one resource, the
// election, whose keys live under the meta prefix: elect:<name> holds the
// leader's token, elect-fence:<name> its fence, and elect-value:<name> the
// advertisement, a hash (token, value) that lives as long as the lock key.
// A campaign is the lock's attempt with elect_campaign, which is
// lock_acquire plus the advertisement in the same script; resignation,
// rollback and abandon are elect_resign (lock_release's delete, fence
// folded into fence-lag, plus the token's advertisement); extension is
// lock_extend plus the advertisement. The term is the lock's fence,
// written back by lock_fence as for any lock; once the grant is decided,
// elect_term records it in the advertisement, and the campaign is won
// only when a quorum recorded it (else it is rolled back as a failed
// attempt). Recording it is needed because the fence keys of the
// masters that hold the token may differ: a straggler that granted late
// kept its own, higher fence, so "the highest fence among the holders"
// is not the campaign's term.
//
// Never two leaders with overlapping validity. A leadership is a lock
// grant, and "What a grant means" applies unchanged: a campaign is
// granted only when a quorum of masters set the lock key to its token
// within one attempt, and it is valid until its validity ends, measured
// from the attempt's start with the drift margin. Two leaderships whose
// validities overlapped would each have had the key on a quorum at a
// common instant; two quorums share a master, whose key holds one token.
// A minority failed or slow cannot give a second campaign a quorum; a
// master restarted empty is quarantined (Restarted masters) until every
// grant it may have voted for has expired, so its empty key never counts
// for a second leader. The AUTOEXTEND keeper extends a leadership as a
// lock's lease, and reports it lost when an extension cannot reach a
// quorum before the validity ends: from then on the leader is told, and
// another may be elected.
//
// Terms strictly increase. The term is the lock's fence on the election's
// resource, so Fencing's argument applies as it stands: every grant of the
// election gets a fence above every fence a quorum held for an earlier
// grant, whichever proxy granted it and across restarts (a restarted
// master's sequence is raised from a quorum of the others before it votes
// again). There is no TOKEN for a campaign, so each leadership is a new
// grant with a new term. Terms are not consecutive: they come from the
// masters' fence sequences, shared with every lock.
//
// Proclaim changes the advertisement only where the lock key holds the
// token (elect_proclaim, one script), and succeeds on a quorum of such
// masters (strictRule), so a leader that lost the election cannot
// advertise: the masters of a newer leader's quorum refuse it. The term
// does not change.
//
// Reading the leader (Info, RELECT LEADER) counts the answers as they come
// and decides at the first (token, value) shared by a quorum of them, or a
// quorum of "free": two quorums share a master, so at most one view can
// reach a quorum among the answers of one read; a minority slow or down
// does not delay it. A master whose key is held but whose advertisement is
// another token's, missing or without its term agrees with no view. The
// term reported is the one recorded in the advertisement, which is part
// of the view: a quorum agree on it, and it is the campaign's own. Once
// a proclamation was decided, a quorum
// holds the new value, so no read that starts after it can see a quorum
// of the old one; a read while one is half applied may find no view with
// a quorum and answers no quorum.
//
// Observers never see a term go back. Changes are announced on the
// election's change channel on every master: a resignation by
// elect_resign itself (the same message wakes waiting campaigners), a
// won campaign and a proclamation by the deciding proxy once decided
// ("0:<id>", which wakes no campaigner). An observer (WatchElection)
// subscribes on every master before its first read, then reads the
// election as above at every announcement from any master, when the
// leader's ttl runs out (a lapse is never announced), and at least every
// second (an announcement lost with a connection); so a change decided
// through any proxy is read within one round after its announcement
// arrives. An observer's read does not wait out a silent master when a
// quorum answered without agreeing (a change in flight): it gives up
// master_timeout/5 later and reads again. Reads are not monotonic by
// themselves: two reads near a lapse, or on different quorums, may
// disagree. The proxy therefore keeps,
// per connection and election, the last term it pushed and whether that
// term was reported ended, and pushes a leader only with a higher term
// (or the same term, not ended, with another value), and "none" only for
// the last term pushed, once. Since terms of successive leaders increase,
// the pushes one connection sees are in term order; a leadership that
// began and ended between two reads is missed, never reordered.
//
// What a minority cannot do: a minority of masters failed or slow delays
// no campaign, resignation, read or proclamation beyond master_timeout and
// misses no announcement (each master announces to each subscribed
// proxy; one is enough). A master restarted empty has no leader and no
// advertisement; until its quarantine ends its answers do not count.
// Not guaranteed: an extension re-takes nothing where the key is gone (no
// extension does yet, see "What is NOT guaranteed"); a master whose key
// expired and which voted in no later grant then simply agrees with no
// view until the leadership ends.
//
// # Drop-in locks
//
// Drop-in mode's SET NX lock (SetNX) is a lock (see "What a grant means")
// with two differences, both for callers that lock with one constant
// value. Its acquire follows SET NX's rule: a key that exists is refused
// even when it holds the same value, so two such callers never both win.
// And each attempt writes an owner nonce beside every key it sets, so
// that its rollback, its abandon and its release delete only its own
// keys: a release asks every master who holds the key (value and nonce)
// and deletes, on each, only a key that still holds a (value, nonce) pair
// a quorum agreed on (deleteHeld). A late delete therefore never removes
// a later grant with the same value, which a value-checked delete would
// do on a master it reached late, leaving that grant on fewer than a
// quorum. With a minority of masters failed or slow the two rounds still
// reach a quorum; a master restarted empty is quarantined as for locks.
//
// # Restarted masters
//
// A master that restarts without persistence forgets its locks and its
// fence counters. Every new connection to a master reads its run_id before
// any request is sent on it (Node.Identity), and the engine checks it each
// time it counts an answer, so a restart is seen before the restarted
// master's first vote could count. Its votes then do not count until
// every grant it may have voted for has expired (at most
// Options.Quarantine, limits.max_ttl); releases and rollbacks still go to
// it.
//
// How long that is, is learnt from the other masters: every grant and
// extension raises, on each master that makes it, the master's lease
// high-water mark (lease-hwm: a key that expires, on the master's own
// clock, no earlier than its longest-lived grant). A grant keeps the mark
// alive at least its ttl: it reads the mark's PTTL and writes only when
// the mark would expire sooner, then with an eighth of the ttl to spare,
// so that a stream of grants writes it once per eighth of their ttl
// rather than at every grant; the quarantine may last that eighth longer
// than needed, never shorter. A grant the restarted master i
// voted for was made by a quorum Q that includes i; any quorum Qr of the
// N-1 other masters shares a master with Q minus i (q + q-1 > N-1), and
// that master's mark lives at least as long as the grant. So the longest
// mark among a quorum of the others' answers, asked once the restart was
// seen, bounds every grant i voted for (plus drift and a round), and the
// quarantine is that long. Grants made since do not count i's vote. Only
// masters that kept their data (not themselves waiting to rejoin) count;
// with fewer than a quorum of them the quarantine stays
// Options.Quarantine. With 3 s leases, a rolling restart of every master
// keeps each one out for about 3 s.
//
// When a quorum of masters restarted at once, nothing bounds their
// grants but Options.Quarantine (limits.max_ttl), and the service is out
// that long. EndQuarantine (RQUARANTINE END) lets an operator who knows
// that no grant from before the restart is still live end it: the master
// then rejoins as after any quarantine, fence floor first. It trades the
// quarantine's guarantee for the operator's word, and is logged so.
//
// Before it votes again its fence sequence is raised: the floor of a
// restarted master becomes the highest sequence of a quorum of the other
// masters (and at least the highest fence this engine issued), and it is
// written to the master's sequence (and to fence-lag, if one exists
// already). A fence F held by a quorum Qw before the restart is thus never
// lost: a quorum Qr of the N-1 other masters and the q-1 or more members of
// Qw other than the restarted one share at least 2q-N >= 1 master, whose
// sequence is at least F; the restarted master's next fence-lag comes
// from its raised sequence, so every fence it gives is above F.
//
// # Leases re-enrol masters
//
// An extension (REXTEND and the others, AUTOEXTEND's) resets the ttl where
// the key still holds the token. A master whose copy expired while it was
// paused, or that the acquisition never reached, would otherwise never
// hold the lease again: a long lease shrinks to the masters that stayed
// reachable, and one more fault loses it. So an extension also takes the
// lease on a master that answered "not held" (extendWith, readExtend,
// semExtend; reenrol.go), in a second round to those masters only:
//
//   - a lock or multi-resource lock: lock_acquire with the lease's token,
//     as an acquisition with a fixed token (TOKEN) would take it: every
//     key free or already the token's, else nothing; each taken key gets a
//     fence as an acquisition's does, with the lease's fences (when known)
//     or this proxy's proposal as the proposal;
//   - a read lock: rw_reenrol, which adds the reader where no writer holds
//     the key (a waiting writer's mark does not refuse it: it is not a new
//     reader, and no writer can be granted while it holds a quorum);
//   - a semaphore: sem_acquire for exactly the lease's slots (learnt from
//     a master that held them, with the limit), never another slot.
//
// Never where another holder has it: that master refuses, as it would
// refuse an acquisition. Taking a free key is therefore an acquisition by
// the token on that master, and exclusion is the acquisition's argument:
// a master votes for the token only where the key was free or the token's,
// another grant needs a quorum holding its own token, and two quorums
// share a master. What makes it an extension rather than a new grant is
// when it may happen: only while the lease is known to hold a quorum, so
// that a free key means the lease's own copy ended there, not that another
// holder came and went:
//
//   - when the extension's first round found the token on a quorum: the
//     lease is valid for the new validity from the round's start, and the
//     masters that said "not held" are re-enrolled after the reply, for the
//     next extension (their votes are not needed for this one);
//   - when the caller knows the lease's validity (Lease.Validity and
//     Decided: the keeper of an AUTOEXTEND lease, and a connection that
//     keeps the lease it extends), before the first round decided: a taken
//     master's vote counts only if its answer arrived before that validity
//     ended, so the script ran while the lease still held a quorum. A lease
//     held on two masters, with two paused and one whose copy expired, is
//     then extended on three instead of being lost.
//
// Fences: the lease keeps the fences of its grant (an extension answers
// none). A re-enrolled master stores, for the resource, a fence above every
// fence it stored before and at least the proposal, as any acquisition
// there; the next grant of the resource still gets a greater fence than
// the lease's by the argument of Fencing: its quorum shares a master with
// the quorum that held the lease's fences when it was granted, and a
// restarted one among those rejoined with its floor raised above them.
// This is the TOKEN retry of Fencing, which may store higher fences for
// the same grant and never lower ones.
//
// Restarted masters: a master in quarantine answers ErrQuarantined, so it
// is neither asked to re-enrol nor counted; once it rejoins (fence floor
// raised) it is re-enrolled like any master whose key is absent, and the
// fence it stores is above its floor. Re-enrolled keys raise the master's
// lease mark as a grant does, so a later restart's quarantine covers them.
//
// Validity: counted, as for every extension, from the first round's start
// (ttl less the time since and the drift); the keys taken later with the
// same ttl outlive it.
//
// Breaks (RLOCKBREAK, Engine.Break). An operator's break deletes the lock
// key (a writer's token or the readers' "") and the readers on every
// master it reaches, folding the fence into the lagging bound as a release
// does (the next grant's fence is greater: the broken holder's is stale),
// and adds the broken tokens (the writer's, or every reader's) to the
// resource's break mark, a set that lives Options.MaxTTL (the longest
// validity an extension made before the break can have given the lease,
// with the drift), or as long as the key had left if longer. A break that
// returned reached a quorum Qb. The broken
// lease is then no longer "known to hold a quorum": no quorum can hold it
// without a master of Qb, where it is gone. But the second case above
// trusts the caller's validity, not the masters, and a keeper whose lease
// was broken on Qb, with the masters the break missed still holding it,
// would take it again on Qb and revive it. So a re-enrolment never takes a
// key where the break mark lists the lease's token (lock_reenrol,
// rw_reenrol): on Qb it is refused while the broken lease could still be
// valid, and the masters the break missed are a minority. The extension
// then finds the lease not held, and its keeper reports it lost. A mark
// costs a key per broken resource for at most MaxTTL, and re-enrolment
// one read of an absent key; nothing else reads it. A fresh grant that
// reuses a broken token (TOKEN) is not re-enrolled while the mark lives,
// which costs it availability under faults, not safety.
//
// # Availability under faults
//
// With a minority of masters paused, slowed or dead, a quorum still
// answers, so the service should answer as if nothing happened. Where it
// did not (issue 29, measured with make chaos), and what was done:
//
//   - A caller blocked in a write to a master that stopped reading
//     (paused: its socket buffers full) held up the same request to every
//     other master until the stall timeout, 10 s. A caller's write is now
//     bounded and the pipe's own goroutine finishes it (redisnode).
//   - A split vote among the live masters waited master_timeout for the
//     paused ones before refusing, holding its keys there meanwhile; every
//     other try collided with them, a livelock that lasted as long as the
//     pause under contention. A refusal no longer waits for masters that
//     were down when the count began (grantRule's stalled answers); a
//     grant still needs a quorum of yes.
//   - A refused try with a caller's token waited for its rollback's
//     acknowledgement from paused masters (two master_timeouts per try,
//     more for a fair waiter, whose tries are chained on each master: one
//     took 230 ms while its hand-off came and went). A master down at the
//     time is tainted at once instead, and only until the rollback's
//     acknowledgement arrives, late or not (taints.refresh): then the
//     rollback ran there, and the call's next tries count its vote again.
//     Tainted for the rest of the call, a master paused in turn with
//     another one left too few votes for the call to finish. (Tainting
//     at once a master merely slow, a straggle grace after the count, was
//     tried and withdrawn: a new call with the same token, as a drop-in
//     library's retry loop makes, then met the rollback after its grant.)
//   - A fair waiter (RFAIRLOCK with TOKEN) still lost about 1.6% of the
//     intervals with 2 of 5 paused, each gap 200-250 ms just after a new
//     pair was paused. Traced: the waiter's refused try rolled back, and
//     the rollback waited for the just-paused masters, not down yet; the
//     rollback follows the call's earlier requests there (the try, its
//     ticket, its queueing), each with its own deadline, so the wait was
//     their sum, 250 ms, while its hand-off came and was buffered. A
//     master found down while its rollback is waited for (another request
//     to it timed out meanwhile) is now tainted then, as one down at the
//     start; one that answers in time is still waited for.
//   - A release waited for its token's acquires to be sent to every
//     master, and a fair lock's tries, which follow the call's previous
//     request on each master, are sent to a paused master only after that
//     request's deadline: each release of a fair lock waited
//     master_timeout. A release now marks its token's requests not yet sent
//     as never to be sent (under the flight's lock, which also covers each
//     send, so the release is after every request that was sent on each
//     master's ordered connection) and does not wait (awaitForRelease).
//   - A waiter's first wait needed every master to confirm its
//     subscription; a quorum is enough (a release that deleted on a quorum
//     is announced by one of them).
//   - A master slowed past master_timeout (300 ms in the fault run) was
//     down after each timed-out round and up again whenever a request with
//     a longer timeout (a release, a rollback) was answered, so rounds kept
//     waiting for it. An answer slower than master_timeout now keeps it
//     down; one in time brings it back.
//   - A paused master was sent every request of the pause and, on
//     resuming, ran that backlog (about 400 ms after 3 s) before it
//     answered in time, while other masters' faults went on. A new
//     acquisition's first request (op.fresh) is not sent to a master
//     whose last three answers in a row kept it waiting, but for one
//     probe per master_timeout (skipDown; one late answer on a busy
//     machine must not cost a master its votes); rollbacks,
//     releases and follow-ups of what was sent still are. Not sending is a
//     lost request, which Redlock tolerates: a grant still needs a quorum
//     of yes, and nothing was set there to roll back.
//
// The skipping rule and its bound (skipSet, nodeHealth.record):
//
//   - Late answers count in windows: a master's late run grows by at
//     most one per master_timeout, so the requests one stall kept waiting
//     (a GC pause, a proxy starved of CPU, with dozens of rounds
//     pipelined) count as one late answer, not one per request.
//   - A fresh round skips at most N - quorum masters, those with the
//     longest late runs, and asks every other. So skipping alone never
//     makes a round answer NOQUORUM: that takes N - quorum + 1 masters
//     that fail or answer late in that round itself. A proxy that stalls
//     makes every master late at once; it still asks a quorum. With more
//     than N - quorum masters really down no quorum can answer anyway,
//     and the least late of them is still asked.
//   - A reader's rolled-back try (split among the live masters) that
//     left the reader set empty freed the key without a word, and
//     waiting writers found out on their retry timer. Its rollback now
//     announces as the last reader's release does.
//
// Down means a master kept a request waiting (timed out, or answered
// after master_timeout); one that fails at once (refused, not connected)
// is not waited for anyway and is asked every time.
//
// Known limit: a fair-lock waiter whose proxy died keeps its place at the
// head of the queue until fair.stale_after (10 s by the contract), and the
// waiters behind it wait that long.
//
// # Re-entrant locks
//
// RLOCK ... TOKEN t REENTRANT takes one more hold of t's lock. Each
// master keeps, beside the lock key, the lock's holds: a sorted set of
// hold ids (one fresh id per try) by the order the proxy gave them
// (lock_hold; a lock the token held without holds counts as one hold,
// "base"). The holds live exactly as long as the lock key: every script
// that sets or extends the key sets them with it, and every release or
// break deletes them with it. The count is the number of hold ids a
// quorum of masters record.
//
// Exclusion is the lock's own: a hold is granted only where the key is
// free or the token's, by the same quorum and validity rule as any
// grant, so re-entrancy adds no way for two tokens to hold at once; the
// holds only decide when the token's lock is released. A failed try
// takes away only its own hold id (lock_unhold): the token's earlier
// holds, and its lock, stay. Because hold ids are unique, a try's votes
// are never ambiguous and need no taint.
//
// RUNLOCK takes one hold away in two rounds: lock_release, on a master
// where the token's lock has holds, releases nothing and answers them;
// the proxy picks the last hold (by order, then id) that a quorum of
// those answers record and takes that id away on every master, or, when
// at most one hold is left, releases the lock on every master whatever
// holds a minority records (lock_unhold with last), with the release's
// announcement. Since every master is told the same id, a RUNLOCK
// repeated after one that reached only some masters takes the same hold
// away again, not a second one, as long as a quorum still records it; a
// RUNLOCK that answered NOQUORUM after reaching most masters may have
// taken it away (RLOCKINFO's holds tells).
//
// Restarted masters: the holds a master loses when it restarts empty are
// on the others, so the count survives as the lock does. An extension
// that re-enrols a master where the lock is gone (see "Leases re-enrol
// masters") first reads the holds from the masters that answered it as
// holding the lock (lock_info; the masters just heard from, never one
// that is down) and takes those a quorum of them record there with the
// key (lock_reenrol), so a lock kept alive while
// every master restarts in turn keeps its count, as it keeps its key.
// When fewer than a quorum of them answer that read in time and those
// that did record holds, which holds a quorum records is unknown, and the
// master is not re-enrolled by that extension (taken without its holds, a single RUNLOCK would free it
// there while the holder still has a hold); the next extension tries
// again. A
// hold that a concurrent RUNLOCK took away between that read and the
// re-enrolment comes back only on the masters re-enrolled, a minority, so
// it is never counted again.
//
// # Waiters
//
// A call that waits (every primitive waits in retry) counts itself into a
// waiting set per resource on every master once its first wait ended
// without a grant (the many waits of a contended resource that are over
// at their first wake-up cost nothing), and out again when it returns: a sorted set of call ids scored by the
// master's time at which the entry ends, named after the resource's
// release channel (waitingKey), so that one mechanism serves every
// primitive. Neither write is waited for: the count is a report, never a
// vote, and a grant never reads it. An entry lives until the wait's end
// or fair.stale_after, whichever is first, and a call that waits longer
// renews it every half of that; the set drops ended entries whenever a
// call joins, expires with its longest entry, and is gone with its last
// member. So nothing outlives the waits: a proxy that dies leaves its
// entries for at most fair.stale_after, as it leaves its fair waiters.
// These writes are never sent to a master that is down (op.report), nor
// count as its probe: sent to a paused master, every waiter's entry
// joined the backlog it runs when it resumes, which kept it answering
// late, hence down, into the next pause (semaphore waiters, the most
// numerous, lost 3-4% of the intervals with 2 of 5 paused that way). Engine.Waiters reports the count
// that a quorum of masters record at least, so a master restarted empty
// or one that missed a count lowers nothing, and a fair waiter's place as
// 1 + the waiters queued ahead of it on a quorum (a waiter queued on a
// minority was never ahead). The cost is two writes per master per call
// that waits (and one per stale_after/2 of waiting), none for a call
// granted at once.
//
// # Listing
//
// Engine.List (RLOCKLIST) pages through the live primitives without
// growing anything: the cursor it hands out packs the master it scans,
// the masters it scanned to the end (a bit each) and that master's own
// SCAN cursor. It scans masters in order until N - quorum + 1 of them were
// scanned to the end: any quorum intersects those, so a primitive that a
// quorum holds from the first page to the last is met on at least one. It
// is reported on the first scanned master that has its main key (a key
// met on master i is left out when a master scanned before i has it), and
// only if a quorum holds it now (Engine.Info, read as RLOCKINFO reads it).
// So a primitive held on the same masters throughout the listing is
// reported exactly once. One whose holding masters change meanwhile (a
// re-enrolment, a master restarted empty, a master scanned before that
// does not answer the presence check) may be reported twice or, if it
// moved onto a master scanned earlier, missed, as SCAN's own guarantee
// covers only keys present throughout. A master down or in quarantine
// when its turn comes is passed over; the listing fails (NOQUORUM) only
// when too few masters are left to meet every quorum.
//
// # Cluster masters
//
// A master may be a Redis Cluster (a ShardedNode, redisnode.Cluster): its
// shards together cast that master's one vote, and the N masters stay N
// independent failure domains. Redis Cluster runs a script only on keys
// of one hash slot, so with any cluster master the engine uses the
// slotted layout (Options.Slotted). Lock keys keep their names
// (<key_prefix><resource>, a resource's own {tag} included, so libraries
// and the proxy still exclude each other); every other key of a resource
// carries, right after the meta prefix, the hash tag of its lock key's
// slot (SlotTag: the shortest base-36 string in that slot). Semaphores,
// latches and elections, which have no lock key, take their release
// channel's slot, and the keys a script names after a base key (a
// semaphore's slots and records) keep its tag. The master-wide keys
// (fence-hwm, fence-lag, lease-hwm) become one per slot. Every script
// then touches one slot, on every master alike: the layout is the
// deployment's, single servers included.
//
// Fencing, per slot. The Fencing argument holds with "master" read as
// "slot of a master": every key it uses for a resource r (fence:<r>, the
// lagging bound, the sequence) lives in r's slot, and each step is one
// script there. Fences strictly increase per resource; fences of
// resources in different slots come from different sequences and are not
// comparable.
//
// Resharding. A slot moves between the masters of a cluster with its
// keys (MIGRATE moves each key with its ttl, atomically), so the
// sequence, the lagging bound and the lease mark move with the keys they
// bound, and the arguments hold on the new master. While a slot moves, a
// script whose keys are split between the two nodes is refused
// (TRYAGAIN, or ASK to a node that lacks some of them): that cluster's
// vote is missing for that try, as when a master is slow.
//
// Slots that lose data. The Cluster node keeps out of the vote the slots
// of a shard whose run_id changed (it restarted, perhaps empty; a
// connection whose run_id cannot be read has its answers refused), the
// slots that changed owner other than between two healthy masters (a
// replica promoted in a failover, which may miss the last writes, or a
// master given the slots of a failed one without their keys), and those
// of a master
// whose replication id changed between two readings of the slot map with
// its previous one kept (a promotion not seen as one). The quarantine
// belongs to the slots, wherever they move meanwhile: every request for
// such a slot fails with ErrShardNotVoting (a missing vote, not a fault of
// the cluster: its other slots vote on), except the reads and writes of
// the fence floors, for Options.Quarantine; then the engine raises the
// floors of those slots (raiseFloors: the Restarted masters argument,
// slot by slot, from a quorum of the other masters' same slot) and they
// vote again. A restart is seen before the shard's first answer counts:
// the shard's Node reads the run_id on each new connection before it
// sends on it, and the Cluster node compares it as each answer arrives,
// before the answer is handed on. A failover is seen when the slot map is
// read (every second, and at once after a MOVED); a request that met a
// MOVED is sent again only once the map was read again, by that map, so
// no request reaches a new owner before the map that decides on its slots
// is installed. What
// it does not see: a node demoted and promoted again between two readings
// of the map, when its replication history reads like a reset; a map read
// from a node cut off from its cluster (its stale view stands until it
// rejoins or stops answering). The quarantine is not shortened from the
// others' lease marks as for single servers: they are one per slot, and
// one shard's restart would need the marks of all its slots; it lasts
// Options.Quarantine (limits.max_ttl). A restarted single-server master
// in a slotted deployment has its floors raised for every slot, and its
// quarantine is not shortened either. Shards of two clusters restarted at
// once read each other's sequences while quarantined, as restarted
// single servers do (a floor is the maximum of every other master's
// answer, and one more answer never lowers it); the engine cannot tell
// such a shard's answer from an intact one, so its error log "fewer than a
// quorum of masters kept their data" is not given for shards.
//
// Multi-resource calls. A call over resources in several slots runs, on
// every master of a slotted deployment (single servers too, so that each
// resource's fence comes from its own slot's sequence), as one script per
// slot (scripts.Split), all sent at once in ascending slot order: on one
// connection they reach the master before anything the engine sends
// later (a rollback, a release), as an unsplit call does. The master's
// answer is a grant only when every slot granted; a refusal where some
// slots were taken says so, and the engine rolls the try back on that
// master as where it was granted (acquireReply.partial). Exclusion is per
// resource, so this keeps the lock's safety; the vote stays
// all-or-nothing; no try waits while it holds anything, so two
// overlapping multi-locks cannot deadlock. A redirected request (MOVED or
// ASK, a slot moving) is sent again after what followed it, which
// the per-slot scripts tolerate: each is token-checked, and a rollback
// overtaken by its acquire leaves a key that expires with the ttl. A
// writer that waits and was granted some slots but not all loses its
// writer marks on those (they are deleted by the grant, not restored by
// the rollback) until its next try sets them again.
//
// Not with cluster masters: RLOCKLIST (a listing pages through one
// server's keyspace). Release notifications and the proxies' pub/sub
// messages come through the first seed of each cluster: while it is down,
// that cluster's copies are missing (the other masters' arrive, and
// waiters still retry on their timer).
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
// An extension re-enrols masters only while the lease is known valid (see
// Leases re-enrol masters): a lease whose validity ended unseen (a client
// that extends too late with REXTEND, on a connection that does not keep
// it) is extended only where it is still held, and lost once that is
// fewer than a quorum. Drop-in locks and elections' terms are extended
// only where held.
//
// A lock broken by an operator (RLOCKBREAK) is given to the next client at
// once, while its holder may still act until it learns (at its keeper's
// next extension, or its next REXTEND or RUNLOCK): as with a pause past
// the validity, only the fence, which the break makes stale, protects the
// store.
//
// A master that loses its data silently (same run_id, e.g. FLUSHALL, or a
// failover to a replica behind it) is not noticed. If a quorum of masters
// lose their data at once, fences may repeat: the engine rejoins them with
// the best floor it can find rather than refuse service for good, and logs
// an error.
//
// A grant made with a caller-chosen token (TOKEN t) shares that token with
// every retry. The engine never counts, in a later attempt, the vote of a
// master whose rollback from an earlier attempt with the same token was
// not acknowledged yet, and it waits for that rollback before answering a
// failed TOKEN call (except on a master that is down at the time: its
// vote is not counted until the rollback's answer arrives, without
// waiting). That holds across calls through one proxy: a call that
// returns leaves such masters tainted for the token's next calls (a
// library's retry loop makes one at once, and its acquire may reach the
// master before the rollback, which is sent once the earlier acquire's
// answer is in), until the rollback is acknowledged, or for the longest
// ttl a grant may have at most. A new call through another proxy knows
// nothing of them: a client that retries with TOKEN through another proxy
// should wait master_timeout after a failure.
package quorum
