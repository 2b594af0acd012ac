package quorum

import "testing"

// TestGrantRule: a grant needs a quorum of yes; a refusal needs a quorum
// of answers and waits for every master that could still make the yes a
// quorum, except those that were down when the count began (stalled).
func TestGrantRule(t *testing.T) {
	for _, tc := range []struct {
		name                              string
		yes, no, failed, pending, stalled int
		final                             bool
		want                              verdict
	}{
		{"quorum of yes", 3, 0, 0, 2, 0, false, decidedYes},
		{"quorum of yes, the rest stalled", 3, 0, 0, 2, 2, false, decidedYes},
		{"split, two live pending", 2, 1, 0, 2, 0, false, undecided},
		{"split, two stalled pending", 2, 1, 0, 2, 2, false, decidedNo},
		{"split, one live and one stalled pending", 2, 1, 0, 2, 1, false, undecided},
		{"two no, one live pending", 1, 2, 0, 2, 1, false, decidedNo},
		{"fewer than a quorum answered, stalled pending", 1, 1, 0, 3, 3, false, undecided},
		{"fewer than a quorum answered, final", 1, 1, 3, 0, 0, true, noQuorum},
		{"a quorum answered, final", 2, 1, 2, 0, 0, true, decidedNo},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ty := &tally{yes: tc.yes, no: tc.no, failed: tc.failed, pending: tc.pending, stalled: tc.stalled}
			if got := grantRule(3, 5, ty, tc.final); got != tc.want {
				t.Fatalf("grantRule = %v, want %v", got, tc.want)
			}
		})
	}
}
