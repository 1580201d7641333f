package indextest

import (
	"maps"
	"slices"
	"testing"

	"pgregory.net/rapid"
)

// TestStateMachineCovers checks that the state machine's generated sequences meet each
// case of the turn-queue contract in at least 1.5% of 2,000 of them (they meet most in 5 to
// 40% and the rarest in about 3%; the floor leaves room for chance):
// holds taken, passed over, ended by Claim and by Release with the reader's exact
// heldUntil and not by another's, routed groups read and held users routed, both cuts of
// Ready, served users, batches that write some items and refuse others, and the limits:
// Ready and Claim cut by them, a weighted user's pass short of now, bad limits refused, a
// hand-back, and the operator's reads of limited users and claimed entries; claims started
// and refused a second start or a hand-back, and a current claim's item refused for an
// Until not the claim's; and pauses written, kept, ended, listed and
// read, passed over by Claim and ended before a Ready.
func TestStateMachineCovers(t *testing.T) {
	if testing.Short() {
		t.Skip("-short shortens rapid's state-machine sequences, and this test needs them at full length")
	}
	const runs = 2000
	count := map[string]int{}
	n := 0
	for n < runs {
		before := n
		rapid.Check(t, func(rt *rapid.T) {
			n++
			s := newSequence(rt, NewModel())
			s.cover = map[string]bool{}
			s.run()
			for c := range s.cover {
				count[c]++
			}
		})
		if n == before {
			t.Fatal("rapid ran no sequences (is -rapid.checks 0?)")
		}
	}
	cases := []string{
		"Ready holds", "Ready passes over a held user", "Ready reads a routed group",
		"Ready cuts at Users and sets Next", "Ready cuts at PerUser", "Ready reads a served user",
		"Route moves a held user", "Release ends a hold", "Release passes over another reader's hold",
		"Claim ends a hold", "CompleteMany writes some items and refuses others",
		"Ready cuts Due by a user's limits", "Route refuses bad limits", "Claim is cut by a user's limits",
		"Claim moves a weighted user's pass short of now", "Unclaim hands back a current claim",
		"User reads a limited user with claims in flight", "Entries reads a claimed entry",
		"StartClaims starts a claim", "StartClaims refuses a started claim", "Unclaim refuses a started claim",
		"StartClaims refuses a current claim's item for its Until",
		"Pause of a user with entries", "Pause keeps a later pause", "Resume ends a pause that counts",
		"Paused lists a user", "User reads a paused user", "Claim passes over a paused user",
		"Ready reads a user whose pause has ended",
	}
	for _, c := range cases {
		if count[c] < n*3/200 {
			t.Errorf("%q in %d of %d sequences, want at least 1.5%%", c, count[c], n)
		}
	}
	t.Logf("of %d sequences: %v", n, count)
	if extra := slices.DeleteFunc(slices.Collect(maps.Keys(count)), func(c string) bool { return slices.Contains(cases, c) }); len(extra) > 0 {
		t.Errorf("cases noted but not checked: %q", extra)
	}
}
