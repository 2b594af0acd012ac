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
//     arrives, the round's deadline alarm answers for the silent ones
//     (every deadline is an alarm on one engine-wide timer, alarms.go: a
//     round answered in time creates no timer), and nothing the caller
//     does cancels it (no goroutine per master call). Engine.follow issues a follow-up to each master only
//     once that master's request in an earlier round returned, so that it
//     can never overtake it on the master's ordered connection.
//   - round.count counts the answers where they arrive (on the masters'
//     readers) and wakes the caller once, with the verdict, as soon as a
//     rule decides: grantRule for acquisitions (yes at quorum; no once a
//     quorum answered and yes can no longer reach it; else no quorum),
//     strictRule for releases and extensions (no only when N - quorum + 1
//     masters said no). A predicate says whether one master's answer is a
//     yes. A restarted master's answer never counts (see
//     docs/design/restarts.md); tally.err turns "no quorum" into a
//     *QuorumError.
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
// Acquire takes a Request that names its Primitive (and carries that
// primitive's own options, SemaphoreOptions, ElectionOptions or
// LockOptions, defined with it); Release, Extend, Abandon and Info work
// on any primitive's lease; Latch drives latches. The operators' verbs
// (Status, EndQuarantine, Break, Delete, List, Waiters) are on Operator,
// the election's own (Proclaim, Watch) on Elections, the semaphore's
// (Set) on Semaphores. The engine reads time from its Clock
// (Options.Clock), so that tests drive it. The verbs dispatch on one
// table, primitives (api.go): a primitive is a value there (its acquire,
// release, extend, abandon and info, its operation names for metrics,
// its scripts and the design file that argues its safety). Plain and
// multi-resource locks (lock.go) are the reference primitive: a lockSet
// names the keys, and one try, attempt, acquires them, makes the fences
// held by a quorum and checks validity for every lock-like primitive. A
// primitive gives attempt its flavour: how its acquire differs from the
// plain lock_acquire and what undoes it (plainLock and waitingLock in
// lock.go, fairLock in fair.go, campaign in elect.go, reentrantHold in
// reentrant.go, setNX in dropin.go); TestSharedTryKnowsNoFlavour keeps
// attempt and the acquire loop free of any primitive's script or
// flavour. Each script is sent through its descriptor in quorum/scripts;
// decodeAcquire reads one master's answer.
//
// Where things are: node.go is the Node interface, engine.go the Engine
// and its Options, clock.go its Clock, api.go the lease verbs and the
// primitives table, operator.go the operators' verbs, round.go the ops,
// rounds, rules and undo, send.go how a request reaches one master
// (split per hash slot), fence.go the fence proposals and spread,
// confirm.go the releases that ask again, reenrol.go the extensions that
// take a lease again, wakeups.go the release wake-ups, retry.go the one
// acquire loop, waiters.go the waiting counts, health.go the masters'
// health, quarantine and fence floors, slots.go the slotted layout,
// info.go and list.go what a quorum says is live, errors.go the errors.
// Each primitive has its file: lock.go, reentrant.go, dropin.go,
// fair.go, rwlock.go, semaphore.go, latch.go, elect.go. The Lua scripts
// and their descriptors are in quorum/scripts, the Redis implementation
// of Node (single servers and clusters) in quorum/redisnode, the pub/sub
// relay between proxies in package relay (the engine only attaches its
// masters to it: Options.Relay), and the design behind all of it in
// docs/design (see "Design documents" below).
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
//     channels) and a flavour (its try's acquire and undo, in its own
//     file), and reuses attempt, its fence write-back and rollback,
//     rather than a new acquire loop. Wake-ups other than releases (an
//     election's changes) go on the primitive's channel with a message
//     that wakes no waiter ("0:<id>", see Wakeups.Notify) and are read
//     by a watch that wakes on everything (watchAll). TestEverySubset
//     compares the masters' keys through fakeNode.dump, which must know
//     every Redis type the primitive writes (hashes, for the election's
//     advertisement).
//  3. * The table: a Primitive constant and its entry in primitives and
//     Primitives (api.go): verbs, operation names (the metrics' series
//     follow), scripts, design file.
//  4. * The safety argument: a file docs/design/<primitive>.md with a
//     top-level heading, named in the entry (doc, a path from the
//     repository's root) and listed under "Design documents" below,
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
//     election's Proclaim and Watch) goes on the primitive's own verbs
//     type (quorum.Elections), its commands.Engine part, and the fake
//     engine (commands/fake_engine_test.go), whose req() must also record
//     its options type (Request.Options); its operation name, if it
//     reports one, goes in Operations' extra list (the metrics). A
//     command with subcommands (RELECT) is one entry of the table:
//     COMMAND DOCS, the arity check and the metrics' Result
//     (TestResultKinds) see only its top level, so its table tests must
//     cover each subcommand's arity, and one Result serves them all.
//  7. The contract and the docs: its section in docs/PROTOCOL.md, the
//     command table in docs/commands.md, the CHANGELOG; an integration test against
//     real masters in tests/.
//
// # What a grant means
//
// A Lease is returned only when, within one attempt:
//
//  1. a quorum of masters set every lock key of the lease to the lease's
//     token (atomically, all keys or none on each master; with the
//     slotted layout, atomically per hash slot, see
//     docs/design/cluster.md);
//  2. a quorum of masters hold a fence sequence at least the lease's fence,
//     raised while they held the lock (see docs/design/fencing.md);
//  3. the validity, ttl - elapsed - (ttl*drift_factor + 2ms), measured from
//     the start of that attempt, is still positive after step 2.
//
// Any attempt that does not end in a grant is rolled back, token-checked, on
// every master that might hold its keys (those that timed out included),
// each only once its acquire returned (so the release cannot overtake it),
// on a context that outlives the caller's.
//
// Release of a lock reports held only with a quorum of masters that released every
// key, and not held only when N - quorum + 1 masters said so (then no
// quorum can have held it up to the release); otherwise it is an error, as
// the answers decide nothing. Extend follows the same rule. A release
// whose answers decide nothing asks again, and through the engine that
// granted it counts the grant's voters that stay silent on the
// connection they voted on, within the validity, while no voter
// contradicts them (grantNote, docs/design/releases.md).
//
// What a grant does not promise (timing assumptions, masters that lose
// their data silently, breaks, TOKEN retries through another proxy) is in
// docs/design/limits.md.
//
// # Design documents
//
// Each primitive's safety argument, and each argument shared by several,
// lives in one Markdown file under docs/design (paths from the
// repository's root). A primitive's entry in primitives (api.go) names
// its file, and TestPrimitiveChecklist checks that the file exists, has
// its heading and is listed here.
//
// Primitives:
//
//   - docs/design/locks.md: plain and multi-resource locks (Lock), the
//     reference primitive.
//   - docs/design/drop-in.md: drop-in mode's SET NX locks (SetNX), with
//     an owner nonce beside each key.
//   - docs/design/fair-locks.md: fair locks (Fair): one queue order on
//     every master, stale waiters, hand-off.
//   - docs/design/rwlock.md: read-write locks (Read): exclusion, the
//     phase-fair order of readers and writers, downgrade.
//   - docs/design/reentrant.md: re-entrant holds of a lock (Lock with
//     Reentrant).
//   - docs/design/semaphores.md: semaphores (Semaphore): numbered slots,
//     the waiters' queue, resizing (Semaphores().Set).
//   - docs/design/latches.md: count-down latches (Latch).
//   - docs/design/election.md: leader election (Election): leaderships,
//     terms, proclamations, observers.
//
// Shared by several primitives:
//
//   - docs/design/fencing.md: fences strictly increase per resource.
//   - docs/design/releases.md: releases and extensions that ask again.
//   - docs/design/restarts.md: masters restarted empty: quarantine and
//     fence floors.
//   - docs/design/leases.md: extensions re-enrol the masters that lost a
//     lease, and operators' breaks.
//   - docs/design/faults.md: availability with a minority of masters
//     paused, slow or dead; the skipping rule and its bound. One cell of
//     `make chaos CHAOS=10` stays below 99.5% by design: a fair lock
//     whose proxy is killed (98.9-99.0%), since the dead proxy's waiter at the
//     head of the queue keeps its place for a second after its last try
//     (a shorter life would cost a live waiter on a CPU-starved proxy its
//     place): about a second per kill, 98.8% of an 80 s cell at worst.
//   - docs/design/waiters.md: the count of calls waiting on a resource.
//   - docs/design/listing.md: RLOCKLIST's pages.
//   - docs/design/cluster.md: Redis Cluster masters and the slotted
//     layout.
//   - docs/design/limits.md: what is NOT guaranteed.
//   - docs/design/simulation.md: the deterministic simulation that
//     drives this engine under seeded faults, and its negative controls.
package quorum
