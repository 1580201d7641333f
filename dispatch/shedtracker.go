package dispatch

import "slices"

// ShedTracker counts, for every user, the consecutive cycles in which the user was shed:
// the streak a noisy-neighbour alarm watches. Feed it each cycle's Batch.ShedUserIDs with
// [ShedTracker.Record]; it reports the users whose streak reaches Threshold in that cycle,
// once per streak. A user who is not shed in a cycle — fully served, or with no due work
// left — starts again from zero.
//
// It is a pure value: no clock, no I/O. It holds only the users shed in the last recorded
// cycle, so its memory is bounded by them, whatever the number of users ever seen. The zero
// ShedTracker is ready to use and never fires (Threshold 0). It is not safe for concurrent
// use.
type ShedTracker struct {
	// Threshold is the streak at which Record reports a user: Record returns the user in
	// the Threshold-th consecutive cycle in which it is shed, and not again in that
	// streak. Threshold < 1 counts streaks but never reports anyone.
	Threshold int

	streaks map[string]streak
	gen     uint64
}

// streak is one user's run of shed cycles; gen is the last cycle that extended it.
type streak struct {
	n   int
	gen uint64
}

// Record records one cycle in which exactly the users of shed were shed (any order;
// duplicates count once) and returns, sorted, the users whose streak reached Threshold in
// this cycle — nil when none did. Every user not in shed has its streak ended.
//
// Cost: O(S + P) for S users in shed and P users shed in the previous cycle.
func (t *ShedTracker) Record(shed []string) []string {
	t.gen++
	if t.streaks == nil && len(shed) > 0 {
		t.streaks = make(map[string]streak, len(shed))
	}
	var crossed []string
	for _, u := range shed {
		s := t.streaks[u]
		if s.gen == t.gen { // a duplicate in this cycle
			continue
		}
		s.n++
		s.gen = t.gen
		t.streaks[u] = s
		if s.n == t.Threshold {
			crossed = append(crossed, u)
		}
	}
	for u, s := range t.streaks {
		if s.gen != t.gen {
			delete(t.streaks, u)
		}
	}
	slices.Sort(crossed)
	return crossed
}

// Streak returns the number of consecutive recorded cycles, ending with the last one, in
// which user was shed: 0 if it was not shed in the last one.
func (t *ShedTracker) Streak(user string) int {
	return t.streaks[user].n
}

// Len returns the number of users whose streak is running: those shed in the last
// recorded cycle.
func (t *ShedTracker) Len() int { return len(t.streaks) }
