package quorum

import (
	"slices"
	"strconv"
	"strings"
	"time"
)

// A grant note is what a grant through this engine leaves for the
// release of its token: which masters voted for it, each with the
// connection its vote came on, and when its validity ends. A release
// whose answers decide nothing (say two of five masters paused, two of
// the three live ones holding it, the third not: a grant made on two
// live masters and one that paused since) counts, while the validity lasts,
// the voters that stay silent on the connection they voted on as still
// holding it (confirm, vouched). Without the note such a release could
// only keep asking the paused masters until the validity ended and then
// answer NOQUORUM, which the client cannot act on.
//
// Why a silent voter still holds it: its key was set with the grant's
// ttl, which outlives the validity, and only the token's own release, a
// break (RLOCKBREAK) or a restart removes it before then. The release
// takes the note first (a second release of the token finds none, and
// cannot count masters that the first one's requests, queued on their
// connections, will empty). A restart breaks the connection, so a voter
// counts only while the connection its vote came on is the current one
// and none of the release's requests to it failed other than by silence
// (a master killed fails them at once). A break reaches the live masters
// too: a voter that answers "not held" vetoes every vouch (the lock was
// broken, or lost some other way this engine did not see), and then the
// answers decide as they would without the note. So a vouched yes is
// never the only evidence: it needs the yes answers of this release
// beside it, and no voter may contradict it.
//
// Even a voter that was silently lost (its host crashed without a reset
// reaching the proxy) keeps the grant exclusive: a master that comes
// back empty is quarantined for limits.max_ttl, longer than any
// validity, and votes for nobody meanwhile; this is Redlock's own
// argument for a minority of masters lost.
//
// The notes live in the engine only (a release through another proxy
// decides as before) and are bounded by the grants live on this engine:
// each is taken by the token's release or abandon, and the health loop
// forgets the ones whose validity ended.
type grantNote struct {
	key       noteKey
	resources []string
	// conns[i] is the connection master i's vote came on (Identity.Conn),
	// 0 when master i did not vote for the grant (or its connections are
	// not numbered: a cluster master).
	conns []uint64
	// group is what a voter holds, as the release's answers name it
	// (confirm's groups): "" for locks, the slot list for a semaphore.
	group string
	until time.Time
}

// noteKey finds a grant's note: its kind of release, its token and its
// first resource (one token may hold several locks: a library's thread
// id, say).
type noteKey struct {
	kind     byte
	token    string
	resource string
}

// noteKind is the release family of p (a fair lock is released as a
// lock), 0 for primitives whose releases take no note.
func noteKind(p Primitive) byte {
	switch p {
	case Lock, Fair, "":
		return 'l'
	case Read:
		return 'r'
	case Semaphore:
		return 's'
	}
	return 0
}

// voters lists, for a grant whose answers are r's and whose counted
// masters are counted (the tally's; nil: every master whose answer holds
// says), the connection each voter's answer came on.
func voters(r *round, counted []bool, holds func(i int) bool) []uint64 {
	conns := make([]uint64, len(r.ans))
	for i := range conns {
		if (counted == nil || counted[i]) && (holds == nil || holds(i)) {
			conns[i] = r.ans[i].conn
		}
	}
	return conns
}

// semGroupOf is the record a semaphore's master keeps for slots (the
// slot list sem_acquire stores: ascending, comma-separated), the group
// its release answers name.
func semGroupOf(slots []int) string {
	var b strings.Builder
	for i, s := range slots {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(s))
	}
	return b.String()
}

// noteGrant keeps l's note, for the release of its token.
func (e *Engine) noteGrant(l *Lease) {
	kind := noteKind(l.Primitive)
	if kind == 0 || l.voters == nil || len(l.Resources) == 0 || l.Validity <= 0 {
		return
	}
	n := &grantNote{
		key:       noteKey{kind, l.Token, l.Resources[0]},
		resources: l.Resources,
		conns:     l.voters,
		until:     l.Decided.Add(l.Validity),
	}
	if l.Primitive == Semaphore {
		n.group = semGroupOf(l.Slots)
	}
	e.notes.Store(n.key, n)
}

// takeNote removes and returns the note of the grant l releases (nil if
// this engine has none for it).
func (e *Engine) takeNote(l *Lease) *grantNote {
	kind := noteKind(l.Primitive)
	if kind == 0 || len(l.Resources) == 0 {
		return nil
	}
	v, ok := e.notes.LoadAndDelete(noteKey{kind, l.Token, l.Resources[0]})
	if !ok {
		return nil
	}
	n := v.(*grantNote)
	if !slices.Equal(n.resources, l.Resources) {
		return nil
	}
	return n
}

// sweepNotes forgets the notes whose grant's validity ended (the client
// let the lock expire, or released it through another proxy).
func (e *Engine) sweepNotes() {
	now := e.now()
	e.notes.Range(func(k, v any) bool {
		if !now.Before(v.(*grantNote).until) {
			e.notes.CompareAndDelete(k, v)
		}
		return true
	})
}

// vouches reports whether master i, silent in the release so far, counts
// as holding the grant n noted: it voted for it on the connection that
// is still the current one, and the grant's validity has not ended.
func (e *Engine) vouches(n *grantNote, i int) bool {
	if n == nil || n.conns[i] == 0 || !e.now().Before(n.until) {
		return false
	}
	return e.nodes[i].Identity().Conn == n.conns[i]
}
