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

// Ratio returns c's staleness ratio at now: (now − LastRunAt) / Cadence, +Inf when it
// never ran, 0 when it has no cadence.
func (c Candidate) Ratio(now time.Time) float64 {
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
// In order: it drops candidates already running; while a heavy task runs, heavy
// candidates; candidates a DependsOn task of which runs. Among the rest, the first
// data-safety candidate in registry order wins; else the first bootstrap candidate; else
// the waiter with the oldest WaitingSince that has waited at least YieldAfter (fairness
// promotion; registry order on a tie); else the staleness representative — the candidate
// with Cadence > 0 and the greatest ratio, never-run ones above all, the first in registry
// order on a tie — unless a candidate without cadence stands earlier in the registry, in
// which case the first such candidate wins.
//
// A promoted waiter wins over a cadence-less candidate earlier in the registry: that is
// what bounds every wait. O(len(Candidates) × (len(Running) + len(DependsOn))).
func Pick(in PickInput) Selection {
	sel, _ := pick(in)
	return sel
}

func pick(in PickInput) (Selection, []loss) {
	running := make(map[string]bool, len(in.Running))
	heavyRunning := ""
	for _, t := range in.Running {
		running[t.Name] = true
		if t.Class == Heavy && heavyRunning == "" {
			heavyRunning = t.Name
		}
	}
	n := len(in.Candidates)
	losses := make([]loss, n)
	cons := make([]Consideration, n)
	eligible := make([]int, 0, n)
	for i, c := range in.Candidates {
		cons[i] = Consideration{Name: c.Task.Name, Ratio: c.Ratio(in.Now)}
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
	win, why := -1, ""
	for _, i := range eligible {
		if in.Candidates[i].Task.DataSafety {
			win, why = i, "won: data-safety"
			break
		}
	}
	if win < 0 {
		for _, i := range eligible {
			if in.Candidates[i].Task.Bootstrap {
				win, why = i, "won: bootstrap"
				break
			}
		}
	}
	if win < 0 && in.YieldAfter > 0 {
		for _, i := range eligible {
			c := in.Candidates[i]
			if c.WaitingSince.IsZero() || in.Now.Sub(c.WaitingSince) < in.YieldAfter {
				continue
			}
			if win < 0 || c.WaitingSince.Before(in.Candidates[win].WaitingSince) {
				win = i
			}
		}
		if win >= 0 {
			why = fmt.Sprintf("won: waiter promoted after %v", in.Now.Sub(in.Candidates[win].WaitingSince))
		}
	}
	if win < 0 {
		rep := -1
		for _, i := range eligible {
			if in.Candidates[i].Task.Cadence <= 0 {
				continue
			}
			if rep < 0 || cons[i].Ratio > cons[rep].Ratio {
				rep = i
			}
		}
		for _, i := range eligible {
			if rep >= 0 && i > rep {
				break
			}
			if in.Candidates[i].Task.Cadence <= 0 {
				win, why = i, "won: no cadence, earlier in the registry"
				if rep < 0 {
					why = "won: no cadence, first in the registry"
				}
				break
			}
		}
		if win < 0 && rep >= 0 {
			win, why = rep, "won: greatest staleness ratio"
			if math.IsInf(cons[rep].Ratio, 1) {
				why = "won: never ran"
			}
		}
	}
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

func firstRunning(names []string, running map[string]bool) string {
	for _, d := range names {
		if running[d] {
			return d
		}
	}
	return ""
}
