package maintenance_test

import (
	"context"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/rotaworks/rota/maintenance"
)

var t0 = time.Date(2026, 6, 20, 12, 0, 0, 0, time.UTC)

func noop(context.Context) error { return nil }

func heavy(name string, cadence time.Duration) maintenance.Task {
	return maintenance.Task{Name: name, Class: maintenance.Heavy, Cadence: cadence, Run: noop}
}

func offLease(name string, cadence time.Duration) maintenance.Task {
	return maintenance.Task{Name: name, Class: maintenance.OffLease, Cadence: cadence, Run: noop}
}

func never(context.Context, time.Time, maintenance.TaskState) (bool, error)  { return false, nil }
func always(context.Context, time.Time, maintenance.TaskState) (bool, error) { return true, nil }

func cand(t maintenance.Task, lastRunAgo time.Duration) maintenance.Candidate {
	c := maintenance.Candidate{Task: t}
	if lastRunAgo > 0 {
		c.LastRunAt = t0.Add(-lastRunAgo)
	}
	return c
}

func waiting(c maintenance.Candidate, for_ time.Duration) maintenance.Candidate {
	c.WaitingSince = t0.Add(-for_)
	return c
}

const day = 24 * time.Hour

// TestPick has one row per rule of Pick (see its doc).
func TestPick(t *testing.T) {
	backup := heavy("backup", day)
	backup.DataSafety = true
	boot := heavy("bootstrap-index", day)
	boot.Bootstrap = true
	adhoc := heavy("adhoc", 0)
	adhoc.Due = always
	golden := offLease("golden-path", time.Hour)
	golden.DependsOn = []string{"dream"}
	compact := heavy("compact", time.Hour)
	compact.DependsOn = []string{"index"}

	tests := []struct {
		name    string
		rule    string
		cands   []maintenance.Candidate
		running []maintenance.Task
		yield   time.Duration
		want    string            // winner, "" for none
		reasons map[string]string // candidate → substring of its Reason
	}{
		{
			name: "data-safety beats hugely stale and registry-earlier",
			rule: "a data-safety candidate wins",
			cands: []maintenance.Candidate{
				cand(heavy("summary", 10*time.Minute), 30*day),
				cand(heavy("backfill", time.Hour), 0),
				cand(backup, 25*time.Hour),
			},
			want:    "backup",
			reasons: map[string]string{"backup": "won: data-safety", "summary": `outranked by "backup"`, "backfill": "data-safety"},
		},
		{
			name: "weeks-stale golden-path beats just-drained summary",
			rule: "the greatest staleness ratio wins",
			cands: []maintenance.Candidate{
				cand(heavy("summary", 10*time.Minute), 45*time.Minute),
				cand(offLease("golden-path", time.Hour), 18*day),
			},
			want:    "golden-path",
			reasons: map[string]string{"golden-path": "greatest staleness ratio", "summary": "outranked"},
		},
		{
			name: "never-run backfill beats summary",
			rule: "never-run tasks rank above all others",
			cands: []maintenance.Candidate{
				cand(heavy("summary", 10*time.Minute), 10*day),
				cand(heavy("memory-summary-backfill", time.Hour), 0),
			},
			want:    "memory-summary-backfill",
			reasons: map[string]string{"memory-summary-backfill": "never ran"},
		},
		{
			name: "equal ratios go to registry order",
			rule: "the first in registry order on a tie",
			cands: []maintenance.Candidate{
				cand(heavy("a", time.Hour), 2*time.Hour),
				cand(heavy("b", 2*time.Hour), 4*time.Hour),
			},
			want: "a",
		},
		{
			name: "equal ratios go to registry order, reversed",
			rule: "the first in registry order on a tie",
			cands: []maintenance.Candidate{
				cand(heavy("b", 2*time.Hour), 4*time.Hour),
				cand(heavy("a", time.Hour), 2*time.Hour),
			},
			want: "b",
		},
		{
			name: "two never-run tasks go to registry order",
			rule: "never-run ties go to registry order",
			cands: []maintenance.Candidate{
				cand(heavy("x", time.Hour), 0),
				cand(heavy("y", time.Minute), 0),
			},
			want: "x",
		},
		{
			name: "cadence-less earlier in the registry beats an overdue heavy task",
			rule: "a candidate with no cadence earlier than the representative goes first",
			cands: []maintenance.Candidate{
				cand(adhoc, 0),
				cand(heavy("dream", time.Hour), 5*time.Hour),
			},
			want:    "adhoc",
			reasons: map[string]string{"adhoc": "no cadence", "dream": `outranked by "adhoc"`},
		},
		{
			name: "cadence-less later in the registry loses to the representative",
			rule: "only a cadence-less candidate earlier than the representative goes first",
			cands: []maintenance.Candidate{
				cand(heavy("dream", time.Hour), 5*time.Hour),
				cand(adhoc, 0),
			},
			want: "dream",
		},
		{
			name: "only cadence-less candidates: the first wins",
			rule: "a candidate with no cadence and no representative",
			cands: []maintenance.Candidate{
				cand(adhoc, 0),
			},
			want: "adhoc",
		},
		{
			name: "running heavy task removes every heavy candidate but no off-lease one",
			rule: "while a heavy task runs, drop heavy candidates",
			cands: []maintenance.Candidate{
				cand(backup, 30*time.Hour),
				cand(heavy("dream", time.Hour), 5*time.Hour),
				cand(offLease("golden-path", time.Hour), 2*time.Hour),
			},
			running: []maintenance.Task{heavy("summary", 10*time.Minute)},
			want:    "golden-path",
			reasons: map[string]string{"backup": `heavy task "summary" is running`, "dream": `heavy task "summary" is running`},
		},
		{
			name: "running heavy task and nothing off-lease: no winner",
			rule: "while a heavy task runs, drop heavy candidates",
			cands: []maintenance.Candidate{
				cand(heavy("dream", time.Hour), 5*time.Hour),
			},
			running: []maintenance.Task{heavy("summary", 10*time.Minute)},
			want:    "",
		},
		{
			name: "running dependency removes its dependents",
			rule: "drop candidates whose DependsOn is running",
			cands: []maintenance.Candidate{
				cand(compact, 10*time.Hour),
				cand(golden, 10*time.Hour),
				cand(heavy("other", time.Hour), 2*time.Hour),
			},
			running: []maintenance.Task{offLease("index", time.Hour), heavy("dream", time.Hour)},
			want:    "",
			reasons: map[string]string{"golden-path": `dependency "dream" is running`, "compact": `heavy task "dream" is running`},
		},
		{
			name: "running off-lease dependency removes a heavy dependent",
			rule: "drop candidates whose DependsOn is running",
			cands: []maintenance.Candidate{
				cand(compact, 10*time.Hour),
				cand(heavy("other", time.Hour), 2*time.Hour),
			},
			running: []maintenance.Task{offLease("index", time.Hour)},
			want:    "other",
			reasons: map[string]string{"compact": `dependency "index" is running`},
		},
		{
			name: "a running candidate is dropped",
			rule: "drop candidates already running",
			cands: []maintenance.Candidate{
				cand(offLease("golden-path", time.Hour), 18*day),
				cand(offLease("heartbeat", time.Minute), 2*time.Minute),
			},
			running: []maintenance.Task{offLease("golden-path", time.Hour)},
			want:    "heartbeat",
			reasons: map[string]string{"golden-path": "already running"},
		},
		{
			name: "bootstrap beats staleness but not data-safety",
			rule: "then a bootstrap candidate",
			cands: []maintenance.Candidate{
				cand(heavy("summary", 10*time.Minute), 0),
				cand(boot, 0),
			},
			want:    "bootstrap-index",
			reasons: map[string]string{"bootstrap-index": "won: bootstrap"},
		},
		{
			name: "data-safety beats bootstrap",
			rule: "a data-safety candidate wins, then a bootstrap one",
			cands: []maintenance.Candidate{
				cand(boot, 0),
				cand(backup, 25*time.Hour),
			},
			want: "backup",
		},
		{
			name: "a waiter past YieldAfter replaces the representative",
			rule: "fairness promotion",
			cands: []maintenance.Candidate{
				cand(heavy("summary", 10*time.Minute), 45*time.Minute),
				waiting(cand(heavy("nightly", day), 25*time.Hour), 31*time.Minute),
			},
			yield:   30 * time.Minute,
			want:    "nightly",
			reasons: map[string]string{"nightly": "waiter promoted", "summary": "waiter promoted"},
		},
		{
			name: "a waiter short of YieldAfter is not promoted",
			rule: "fairness promotion waits YieldAfter",
			cands: []maintenance.Candidate{
				cand(heavy("summary", 10*time.Minute), 45*time.Minute),
				waiting(cand(heavy("nightly", day), 25*time.Hour), 29*time.Minute),
			},
			yield: 30 * time.Minute,
			want:  "summary",
		},
		{
			name: "the oldest waiter is promoted",
			rule: "fairness promotion takes the oldest waiter",
			cands: []maintenance.Candidate{
				waiting(cand(heavy("a", time.Hour), 90*time.Minute), 40*time.Minute),
				waiting(cand(heavy("b", day), 25*time.Hour), 50*time.Minute),
				waiting(cand(heavy("c", 2*time.Hour), 10*time.Hour), 35*time.Minute),
			},
			yield: 30 * time.Minute,
			want:  "b",
		},
		{
			name: "YieldAfter zero disables promotion",
			rule: "fairness promotion is off with YieldAfter 0",
			cands: []maintenance.Candidate{
				cand(heavy("summary", 10*time.Minute), 45*time.Minute),
				waiting(cand(heavy("nightly", day), 25*time.Hour), 5*time.Hour),
			},
			want: "summary",
		},
		{
			name: "a promoted waiter beats a cadence-less task earlier in the registry",
			rule: "promotion bounds every wait",
			cands: []maintenance.Candidate{
				cand(adhoc, 0),
				waiting(cand(heavy("nightly", day), 25*time.Hour), time.Hour),
			},
			yield: 30 * time.Minute,
			want:  "nightly",
		},
		{
			name:  "no candidates",
			rule:  "no winner without candidates",
			cands: nil,
			want:  "",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := maintenance.PickInput{Candidates: tt.cands, Running: tt.running, Now: t0, YieldAfter: tt.yield}
			sel := maintenance.Pick(in)
			got := ""
			if sel.Winner != nil {
				got = sel.Winner.Task.Name
			}
			if got != tt.want {
				t.Fatalf("rule %q: winner %q, want %q; considered %+v", tt.rule, got, tt.want, sel.Considered)
			}
			if len(sel.Considered) != len(tt.cands) {
				t.Fatalf("rule %q: %d considerations for %d candidates", tt.rule, len(sel.Considered), len(tt.cands))
			}
			for i, c := range sel.Considered {
				if c.Name != tt.cands[i].Task.Name || c.Reason == "" {
					t.Errorf("rule %q: consideration %d = %+v, want %q with a reason", tt.rule, i, c, tt.cands[i].Task.Name)
				}
				if want, ok := tt.reasons[c.Name]; ok && !strings.Contains(c.Reason, want) {
					t.Errorf("rule %q: %s reason %q, want it to contain %q", tt.rule, c.Name, c.Reason, want)
				}
				if (c.Name == got) != strings.HasPrefix(c.Reason, "won: ") {
					t.Errorf("rule %q: %s reason %q: only the winner's starts with \"won: \"", tt.rule, c.Name, c.Reason)
				}
			}
		})
	}
}

// ratio is c's staleness ratio at now, as Pick explains it.
func ratio(c maintenance.Candidate, now time.Time) float64 {
	return maintenance.Pick(maintenance.PickInput{Candidates: []maintenance.Candidate{c}, Now: now}).Considered[0].Ratio
}

func TestCandidateRatio(t *testing.T) {
	if r := ratio(cand(heavy("a", time.Hour), 0), t0); !math.IsInf(r, 1) {
		t.Errorf("never-run ratio %v, want +Inf", r)
	}
	if r := ratio(cand(heavy("a", time.Hour), 90*time.Minute), t0); r != 1.5 {
		t.Errorf("ratio %v, want 1.5 = 90m / 1h", r)
	}
	if r := ratio(cand(maintenance.Task{Name: "a", Due: always}, time.Hour), t0); r != 0 {
		t.Errorf("cadence-less ratio %v, want 0", r)
	}
}

// TestPickDoesNotMutateInput: Pick is pure; the winner is a copy.
func TestPickDoesNotMutateInput(t *testing.T) {
	cands := []maintenance.Candidate{cand(heavy("a", time.Hour), 2*time.Hour)}
	sel := maintenance.Pick(maintenance.PickInput{Candidates: cands, Now: t0})
	sel.Winner.Task.Name = "changed"
	if cands[0].Task.Name != "a" {
		t.Fatal("the Winner aliases the input slice")
	}
}
