package maintenance

import (
	"fmt"
	"math"
	"time"
)

// Candidate is a due task offered to Pick.
type Candidate struct {
	// Task is the registry entry.
	Task Task
	// LastRunAt is when the task last ran; zero means never.
	LastRunAt time.Time
	// WaitingSince is the start of the task's deferral streak; zero means it is not a
	// waiter.
	WaitingSince time.Time
}

// PickInput is everything Pick looks at.
type PickInput struct {
	// Candidates are the due tasks, in registry order. Pick ranks them; it does not
	// re-check due-ness.
	Candidates []Candidate
	// Running are the tasks running now, of any class.
	Running []Task
	// Now is the instant of the pick.
	Now time.Time
	// YieldAfter is how long a waiter must have waited to be promoted over the staleness
	// representative; zero or negative disables promotion (the plain staleness picker).
	YieldAfter time.Duration
}

// Consideration explains one candidate of a pick.
type Consideration struct {
	// Name is the candidate's task name.
	Name string
	// Ratio is its staleness ratio (now − LastRunAt) / Cadence: +Inf when it never ran,
	// 0 when it has no cadence.
	Ratio float64
	// Reason says why it won ("won: …") or why it lost.
	Reason string
}

// Selection is Pick's answer.
type Selection struct {
	// Winner is a copy of the winning candidate, nil when every candidate was dropped.
	Winner *Candidate
	// Considered explains every candidate, in the order of PickInput.Candidates.
	Considered []Consideration
}

// Why a candidate did not win, as Poll turns it into a Deferral.
type lossKind int

const (
	lossNone       lossKind = iota // the winner
	lossRunning                    // already running
	lossHeavy                      // a heavy task runs
	lossDependency                 // a DependsOn task runs
	lossOutranked                  // eligible, ranked lower
)

type loss struct {
	kind    lossKind
	blocker string
}

// ratio returns c's staleness ratio at now: (now − LastRunAt) / Cadence, +Inf when it
// never ran, 0 when it has no cadence.
func (c Candidate) ratio(now time.Time) float64 {
	if c.Task.Cadence <= 0 {
		return 0
	}
	if c.LastRunAt.IsZero() {
		return math.Inf(1)
	}
	return float64(now.Sub(c.LastRunAt)) / float64(c.Task.Cadence)
}

// Pick chooses the one candidate to run next and explains the choice. It is pure: the
// same input gives the same Selection, and it reads no clock.
//
// It drops candidates already running; while a heavy task runs, heavy candidates;
// candidates a DependsOn task of which runs. Among the rest the first data-safety
// candidate in registry order wins; else the first bootstrap candidate; else the waiter
// with the oldest WaitingSince that has waited at least YieldAfter (fairness promotion);
// else the staleness representative — the greatest ratio among candidates with a
// Cadence, never-run ones first, registry order on a tie — unless a candidate without
// cadence stands earlier in the registry, which then wins.
//
// O(len(Candidates) × (len(Running) + len(DependsOn))).
func Pick(in PickInput) Selection {
	sel, _ := pick(in)
	return sel
}

// pick is Pick that also says why each loser lost.
func pick(in PickInput) (Selection, []loss) {
	cons, losses, eligible := screen(in)
	win, why := choose(in, cons, eligible)
	if win < 0 {
		return Selection{Considered: cons}, losses
	}
	wname := in.Candidates[win].Task.Name
	for _, i := range eligible {
		if i == win {
			cons[i].Reason = why
			continue
		}
		losses[i] = loss{lossOutranked, wname}
		cons[i].Reason = fmt.Sprintf("outranked by %q (%s)", wname, why[len("won: "):])
	}
	w := in.Candidates[win]
	return Selection{Winner: &w, Considered: cons}, losses
}

// screen explains every candidate's ratio, drops those that cannot start now (running,
// heavy while a heavy task runs, a dependency running) and returns the indexes of the
// others, the eligible ones, in order.
func screen(in PickInput) (cons []Consideration, losses []loss, eligible []int) {
	running := make(map[string]bool, len(in.Running))
	heavyRunning := ""
	for _, t := range in.Running {
		running[t.Name] = true
		if t.Class == Heavy && heavyRunning == "" {
			heavyRunning = t.Name
		}
	}
	n := len(in.Candidates)
	losses, cons, eligible = make([]loss, n), make([]Consideration, n), make([]int, 0, n)
	for i, c := range in.Candidates {
		cons[i] = Consideration{Name: c.Task.Name, Ratio: c.ratio(in.Now)}
		switch dep := firstRunning(c.Task.DependsOn, running); {
		case running[c.Task.Name]:
			losses[i] = loss{lossRunning, c.Task.Name}
			cons[i].Reason = "already running"
		case heavyRunning != "" && c.Task.Class == Heavy:
			losses[i] = loss{lossHeavy, heavyRunning}
			cons[i].Reason = fmt.Sprintf("heavy task %q is running", heavyRunning)
		case dep != "":
			losses[i] = loss{lossDependency, dep}
			cons[i].Reason = fmt.Sprintf("dependency %q is running", dep)
		default:
			eligible = append(eligible, i)
		}
	}
	return cons, losses, eligible
}

// choose returns the winner among the eligible candidates and why it won, -1 if none.
func choose(in PickInput, cons []Consideration, eligible []int) (int, string) {
	task := func(i int) Task { return in.Candidates[i].Task }
	if w := firstWhere(eligible, func(i int) bool { return task(i).DataSafety }); w >= 0 {
		return w, "won: data-safety"
	}
	if w := firstWhere(eligible, func(i int) bool { return task(i).Bootstrap }); w >= 0 {
		return w, "won: bootstrap"
	}
	if in.YieldAfter > 0 {
		since := func(i int) time.Time { return in.Candidates[i].WaitingSince }
		promoted := func(i int) bool { return !since(i).IsZero() && in.Now.Sub(since(i)) >= in.YieldAfter }
		if w := bestWhere(eligible, promoted, func(a, b int) bool { return since(a).Before(since(b)) }); w >= 0 {
			return w, fmt.Sprintf("won: waiter promoted after %v", in.Now.Sub(since(w)))
		}
	}
	hasCadence := func(i int) bool { return task(i).Cadence > 0 }
	rep := bestWhere(eligible, hasCadence, func(a, b int) bool { return cons[a].Ratio > cons[b].Ratio })
	if w := firstWhere(eligible, func(i int) bool { return !hasCadence(i) && (rep < 0 || i < rep) }); w >= 0 {
		if rep < 0 {
			return w, "won: no cadence, first in the registry"
		}
		return w, "won: no cadence, earlier in the registry"
	}
	switch {
	case rep < 0:
		return -1, ""
	case math.IsInf(cons[rep].Ratio, 1):
		return rep, "won: never ran"
	default:
		return rep, "won: greatest staleness ratio"
	}
}

// firstWhere returns the first of the eligible indexes for which ok holds, -1 if none.
func firstWhere(eligible []int, ok func(i int) bool) int {
	return bestWhere(eligible, ok, func(int, int) bool { return false })
}

// bestWhere returns, among the eligible indexes for which ok holds, the one no later one
// is better than (the first on a tie), -1 if none.
func bestWhere(eligible []int, ok func(i int) bool, better func(a, b int) bool) int {
	best := -1
	for _, i := range eligible {
		if ok(i) && (best < 0 || better(i, best)) {
			best = i
		}
	}
	return best
}

func firstRunning(names []string, running map[string]bool) string {
	for _, d := range names {
		if running[d] {
			return d
		}
	}
	return ""
}
