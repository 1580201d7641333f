package dispatch

import (
	"fmt"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"pgregory.net/rapid"
)

func TestShedTrackerFiresWhenAUserCrossesTheThreshold(t *testing.T) {
	tr := ShedTracker{Threshold: 3}
	steps := []struct {
		shed    []string
		crossed []string
		streaks map[string]int
	}{
		{[]string{"a", "b"}, nil, map[string]int{"a": 1, "b": 1, "c": 0}},
		{[]string{"b", "a", "c"}, nil, map[string]int{"a": 2, "b": 2, "c": 1}},
		// a and b cross together, named sorted; c is one short.
		{[]string{"c", "b", "a"}, []string{"a", "b"}, map[string]int{"a": 3, "b": 3, "c": 2}},
		// Past the threshold nobody fires again in the same streak; a was fully served.
		{[]string{"b", "c", "c"}, []string{"c"}, map[string]int{"a": 0, "b": 4, "c": 3}},
		// a starts over: it fires again only after three more consecutive cycles.
		{[]string{"a", "b"}, nil, map[string]int{"a": 1, "b": 5, "c": 0}},
		{[]string{"a"}, nil, map[string]int{"a": 2, "b": 0}},
		{[]string{"a"}, []string{"a"}, map[string]int{"a": 3}},
		{nil, nil, map[string]int{"a": 0}},
	}
	for i, s := range steps {
		got := tr.Record(s.shed)
		if diff := cmp.Diff(s.crossed, got, cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("cycle %d: crossed (-want +got):\n%s", i+1, diff)
		}
		for u, n := range s.streaks {
			if got := tr.Streak(u); got != n {
				t.Errorf("cycle %d: Streak(%q) = %d, want %d", i+1, u, got, n)
			}
		}
		if tr.Len() != len(dedupe(s.shed)) {
			t.Errorf("cycle %d: Len() = %d, want the %d users shed in it", i+1, tr.Len(), len(dedupe(s.shed)))
		}
	}
}

func TestShedTrackerThresholdOne(t *testing.T) {
	tr := ShedTracker{Threshold: 1}
	if diff := cmp.Diff([]string{"x"}, tr.Record([]string{"x"})); diff != "" {
		t.Errorf("first shed cycle (-want +got):\n%s", diff)
	}
	if got := tr.Record([]string{"x"}); got != nil {
		t.Errorf("second shed cycle fired again: %v", got)
	}
}

func TestShedTrackerZeroNeverFires(t *testing.T) {
	var tr ShedTracker
	for range 5 {
		if got := tr.Record([]string{"x"}); got != nil {
			t.Fatalf("a zero ShedTracker fired: %v", got)
		}
	}
	if tr.Streak("x") != 5 {
		t.Errorf("Streak = %d, want 5: the zero tracker still counts", tr.Streak("x"))
	}
}

func dedupe(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return slices.Compact(s)
}

// TestShedTrackerMatchesModel checks Record against the definition over random histories:
// a user is reported in cycle i exactly when the Threshold cycles ending at i all shed it
// and cycle i−Threshold did not (or does not exist); memory holds only the last cycle's
// shed users.
func TestShedTrackerMatchesModel(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		threshold := rapid.IntRange(0, 4).Draw(rt, "threshold")
		users := rapid.IntRange(1, 6).Draw(rt, "users")
		cycles := rapid.SliceOfN(rapid.SliceOfN(rapid.IntRange(0, users-1), 0, users+2), 1, 20).Draw(rt, "cycles")
		tr := ShedTracker{Threshold: threshold}
		var history []map[string]bool
		for i, c := range cycles {
			var shed []string
			set := map[string]bool{}
			for _, u := range c {
				id := fmt.Sprintf("u%d", u)
				shed = append(shed, id)
				set[id] = true
			}
			history = append(history, set)
			got := tr.Record(shed)

			var want []string
			for u := range users {
				id := fmt.Sprintf("u%d", u)
				run := 0
				for j := i; j >= 0 && history[j][id]; j-- {
					run++
				}
				if got := tr.Streak(id); got != run {
					rt.Fatalf("cycle %d: Streak(%s) = %d, model %d", i, id, got, run)
				}
				if threshold >= 1 && run == threshold {
					want = append(want, id)
				}
			}
			if diff := cmp.Diff(want, got, cmpopts.EquateEmpty()); diff != "" {
				rt.Fatalf("cycle %d: crossed (-model +got):\n%s", i, diff)
			}
			if tr.Len() != len(set) {
				rt.Fatalf("cycle %d: holds %d users, want the %d shed in the last cycle", i, tr.Len(), len(set))
			}
		}
	})
}
