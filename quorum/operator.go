package quorum

// Operator holds the operators' verbs: the masters' status, ending a
// quarantine, breaking or deleting locks, listing what is held and
// counting waiters. They act on any token's grants, so a proxy gives them
// only to an operator (or to drop-in mode's DEL), never to a lease's
// holder as such.
type Operator struct{ e *Engine }

// Operator returns the engine's operators' verbs.
func (e *Engine) Operator() Operator { return Operator{e} }
