package maintenance_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/rotaworks/rota/maintenance"
)

var bg = context.Background()

// ordinary is the rank of a task neither data-safety nor bootstrap: the zero Rank.
const ordinary maintenance.Rank = 0

// observerFunc adapts a function to a maintenance.Observer.
type observerFunc func(maintenance.PollReport)

func (f observerFunc) ObservePoll(rep maintenance.PollReport) { f(rep) }

// quiet is the Logger of the tests' schedulers: their poll lines would be noise.
var quiet = slog.New(slog.DiscardHandler)

// newSched returns a scheduler over tasks and cfg, logging to quiet unless cfg says
// otherwise.
func newSched(t *testing.T, tasks []maintenance.Task, cfg maintenance.Config) *maintenance.Scheduler {
	t.Helper()
	if cfg.Logger == nil {
		cfg.Logger = quiet
	}
	s, err := maintenance.NewScheduler(tasks, cfg)
	if err != nil {
		t.Fatalf("NewScheduler: %v", err)
	}
	return s
}

func poll(t *testing.T, s *maintenance.Scheduler, now time.Time) maintenance.PollResult {
	t.Helper()
	res, err := s.Poll(bg, now)
	if err != nil {
		t.Fatalf("Poll at %v: %v", now, err)
	}
	return res
}

func names(cs []maintenance.Candidate) []string {
	var out []string
	for _, c := range cs {
		out = append(out, c.Task.Name)
	}
	return out
}

func winnerName(r maintenance.PollResult) string {
	if r.Winner == nil {
		return ""
	}
	return r.Winner.Task.Name
}

// heavyName returns the heavy task that won the lease at the poll r, "" if none did.
func heavyName(r maintenance.PollResult) string {
	if w := r.Winner; w != nil && w.Task.Class == maintenance.Heavy {
		return w.Task.Name
	}
	return ""
}

// offLeaseRuns returns the off-lease tasks the poll r's second pass dispatched.
func offLeaseRuns(r maintenance.PollResult) []maintenance.Candidate {
	return slices.DeleteFunc(r.Dispatched(), func(c maintenance.Candidate) bool { return c.Task.Class != maintenance.OffLease })
}

func deferral(r maintenance.PollResult, task string) (maintenance.Deferral, bool) {
	for _, d := range r.Deferred {
		if d.Task == task {
			return d, true
		}
	}
	return maintenance.Deferral{}, false
}

func stateOf(t *testing.T, st maintenance.StateStore, name string) maintenance.TaskState {
	t.Helper()
	snap, err := st.Load(bg)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range snap.States {
		if s.Name == name {
			return s
		}
	}
	return maintenance.TaskState{Name: name}
}

// seed stores LastRunAt for tasks, as if they had run.
func seed(t *testing.T, st maintenance.StateStore, lastRun map[string]time.Time) {
	t.Helper()
	for name, at := range lastRun {
		if err := st.Save(bg, 0, maintenance.TaskState{Name: name, LastRunAt: at, LastOutcome: maintenance.OutcomeSucceeded}); err != nil {
			t.Fatal(err)
		}
	}
}

func TestPollSecondPass(t *testing.T) {
	tasks := []maintenance.Task{heavy("summary", 10*time.Minute), heavy("dream", time.Hour)}
	for _, n := range []string{"o1", "o2", "o3", "o4", "o5"} {
		tasks = append(tasks, offLease(n, time.Hour))
	}
	s := newSched(t, tasks, maintenance.Config{AlsoDispatchLimit: 3})
	res := poll(t, s, t0)
	if winnerName(res) != "summary" {
		t.Fatalf("rule: the heavy winner is Winner: got %q", winnerName(res))
	}
	if got := names(res.AlsoDispatched); !slices.Equal(got, []string{"o1", "o2", "o3"}) {
		t.Fatalf("rule: the second pass takes at most AlsoDispatchLimit off-lease tasks in registry order: got %v", got)
	}
	for _, n := range []string{"o4", "o5"} {
		if d, ok := deferral(res, n); !ok || d.Reason != maintenance.ReasonDispatchLimit {
			t.Errorf("rule: an off-lease task beyond the limit is deferred with ReasonDispatchLimit: %s got %+v", n, d)
		}
	}
	if d, ok := deferral(res, "dream"); !ok || d.Reason != maintenance.ReasonOutranked || d.Blocker != "summary" {
		t.Errorf("rule: a losing heavy task is deferred, outranked by the winner: got %+v", d)
	}

	// While summary runs, the next poll dispatches only the remaining off-lease tasks:
	// Winner is then the first of them, and no heavy task is ever also dispatched.
	res = poll(t, s, t0.Add(time.Minute))
	if winnerName(res) != "o4" || !slices.Equal(names(res.AlsoDispatched), []string{"o5"}) {
		t.Fatalf("rule: with no heavy winner, Winner is the first off-lease task: got %q + %v", winnerName(res), names(res.AlsoDispatched))
	}
	if d, ok := deferral(res, "dream"); !ok || d.Reason != maintenance.ReasonHeavyBusy || d.Blocker != "summary" {
		t.Errorf("rule: heavy backpressure defers dream while summary runs: got %+v", d)
	}
}

func TestPollCheapTaskNeverWaitsBehindHeavyBacklog(t *testing.T) {
	golden := offLease("golden-path", time.Hour)
	tasks := []maintenance.Task{heavy("summary", 10*time.Minute), golden}
	store := maintenance.NewMemoryStateStore()
	seed(t, store, map[string]time.Time{"summary": t0.Add(-time.Hour), "golden-path": t0.Add(-18 * day)})
	s := newSched(t, tasks, maintenance.Config{StateStore: store})
	res := poll(t, s, t0)
	if winnerName(res) != "summary" || !slices.Equal(names(res.AlsoDispatched), []string{"golden-path"}) {
		t.Fatalf("rule: an off-lease task runs beside the heavy winner: got %q + %v", winnerName(res), names(res.AlsoDispatched))
	}
}

func TestPollDisabledTaskIsNeitherCandidateNorDeferral(t *testing.T) {
	disabled := heavy("cloud-disabled", time.Minute)
	disabled.Due = never
	disabledOff := offLease("disabled-off", 0)
	disabledOff.Due = never
	tasks := []maintenance.Task{disabled, disabledOff, heavy("dream", time.Hour), offLease("golden-path", time.Hour)}
	s := newSched(t, tasks, maintenance.Config{})
	for i := range 3 {
		res := poll(t, s, t0.Add(time.Duration(i)*time.Hour))
		for _, c := range res.Dispatched() {
			if strings.HasPrefix(c.Task.Name, "disabled") || c.Task.Name == "cloud-disabled" {
				t.Fatalf("rule: a disabled task is never dispatched: %s", c.Task.Name)
			}
		}
		for _, d := range res.Deferred {
			if d.Task == "cloud-disabled" || d.Task == "disabled-off" {
				t.Fatalf("rule: a disabled task is never a deferral: %+v", d)
			}
		}
		for _, c := range res.Considered {
			if c.Name == "cloud-disabled" || c.Name == "disabled-off" {
				t.Fatalf("rule: a disabled task is never a candidate: %+v", c)
			}
		}
		for _, w := range res.Gauge.Waiters {
			if w.Task == "cloud-disabled" || w.Task == "disabled-off" {
				t.Fatalf("rule: a disabled task is never a waiter: %+v", w)
			}
		}
	}
}

func TestPollLeaseHeldByAnotherHolder(t *testing.T) {
	lease := maintenance.NewMemoryLease(time.Hour)
	if _, err := lease.Acquire(bg, "daemon-b", 10*time.Minute, t0); err != nil {
		t.Fatal(err)
	}
	s := newSched(t, []maintenance.Task{heavy("dream", time.Hour), offLease("golden-path", time.Hour)},
		maintenance.Config{Lease: lease, Holder: "daemon-a", MaxHold: time.Hour})
	res := poll(t, s, t0.Add(time.Minute))
	d, ok := deferral(res, "dream")
	if !ok || d.Reason != maintenance.ReasonLeaseHeld || d.Blocker != "daemon-b" {
		t.Fatalf("rule: a winner that cannot acquire is deferred, ReasonLeaseHeld, blocked by the holder: got %+v", d)
	}
	if winnerName(res) != "golden-path" {
		t.Fatalf("rule: off-lease tasks still run while the lease is held: winner %q", winnerName(res))
	}
	if res.Gauge.Holder != "daemon-b" || res.Gauge.HeldFor != time.Minute {
		t.Errorf("gauge: holder %q held for %v, want daemon-b for 1m", res.Gauge.Holder, res.Gauge.HeldFor)
	}
	// The lease lapses at its TTL: the next poll acquires.
	res = poll(t, s, t0.Add(10*time.Minute))
	if winnerName(res) != "dream" {
		t.Fatalf("rule: the lease lapses at its TTL and the waiter acquires: winner %q", winnerName(res))
	}
}

func TestPollSoftGate(t *testing.T) {
	backfill := heavy("memory-summary-backfill", 6*time.Hour)
	summary := heavy("summary", 10*time.Minute)
	summary.Gates = []maintenance.Gate{{Producer: "memory-summary-backfill"}}
	store := maintenance.NewMemoryStateStore()
	seed(t, store, map[string]time.Time{"summary": t0.Add(-day)})
	s := newSched(t, []maintenance.Task{summary, backfill}, maintenance.Config{StateStore: store})

	res := poll(t, s, t0)
	d, ok := deferral(res, "summary")
	if !ok || d.Reason != maintenance.ReasonGate || d.Blocker != "memory-summary-backfill" {
		t.Fatalf("rule: a gate defers its task while the producer is due: got %+v", d)
	}
	if winnerName(res) != "memory-summary-backfill" {
		t.Fatalf("rule: the gate never blocks the producer: winner %q", winnerName(res))
	}
	// Producer running: still gated, same streak.
	res = poll(t, s, t0.Add(time.Minute))
	if d2, _ := deferral(res, "summary"); d2.Reason != maintenance.ReasonGate || !d2.Since.Equal(t0) {
		t.Fatalf("rule: the gate holds while the producer runs and the streak continues: got %+v", d2)
	}
	if err := s.Complete(bg, "memory-summary-backfill", nil, t0.Add(20*time.Minute)); err != nil {
		t.Fatal(err)
	}
	// Re-checked at the next poll: the producer is no longer behind, summary runs.
	res = poll(t, s, t0.Add(20*time.Minute))
	if winnerName(res) != "summary" {
		t.Fatalf("rule: a gate is re-checked every poll and opens once the producer ran: winner %q, deferred %+v", winnerName(res), res.Deferred)
	}
	if st := stateOf(t, store, "summary"); !st.DeferredSince.IsZero() {
		t.Fatalf("rule: dispatching ends the deferral streak: %+v", st)
	}
}

func TestPollDependencyRunning(t *testing.T) {
	golden := offLease("golden-path", time.Hour)
	golden.DependsOn = []string{"dream"}
	s := newSched(t, []maintenance.Task{heavy("dream", time.Hour), golden}, maintenance.Config{})
	res := poll(t, s, t0)
	if winnerName(res) != "dream" || len(res.AlsoDispatched) != 0 {
		t.Fatalf("rule: the second pass never dispatches a task whose dependency runs: %q + %v", winnerName(res), names(res.AlsoDispatched))
	}
	if d, ok := deferral(res, "golden-path"); !ok || d.Reason != maintenance.ReasonDependency || d.Blocker != "dream" {
		t.Fatalf("rule: the dependent is deferred with its running dependency as blocker: got %+v", d)
	}
}

func TestPollDeferralStreakIsDurable(t *testing.T) {
	store := maintenance.NewMemoryStateStore()
	lease := maintenance.NewMemoryLease(2 * time.Hour)
	cfg := maintenance.Config{StateStore: store, Lease: lease}
	tasks := []maintenance.Task{heavy("summary", 10*time.Minute), heavy("dream", time.Hour)}
	s := newSched(t, tasks, cfg)
	poll(t, s, t0) // summary wins, dream waits from t0
	for i := 1; i <= 3; i++ {
		res := poll(t, s, t0.Add(time.Duration(i)*time.Minute))
		d, _ := deferral(res, "dream")
		if !d.Since.Equal(t0) {
			t.Fatalf("rule: a deferral continues the streak: Since %v, want %v", d.Since, t0)
		}
	}
	st := stateOf(t, store, "dream")
	if st.Deferrals != 4 || st.DeferReason != maintenance.ReasonHeavyBusy || st.DeferBlocker != "summary" {
		t.Fatalf("rule: the streak, its last reason and blocker are stored: %+v", st)
	}
	// A restart: a new scheduler over the same store continues the same streak.
	s2 := newSched(t, tasks, cfg)
	res := poll(t, s2, t0.Add(5*time.Minute))
	if d, _ := deferral(res, "dream"); !d.Since.Equal(t0) {
		t.Fatalf("rule: the streak survives a restart: Since %v, want %v", d.Since, t0)
	}
}

func TestPollFleetYield(t *testing.T) {
	type waiter struct {
		rank  maintenance.Rank
		since time.Duration // waited before now
	}
	tests := []struct {
		name      string
		remote    waiter
		local     maintenance.Task
		localWait time.Duration
		yield     bool
	}{
		{"higher rank at once", waiter{maintenance.RankDataSafety, time.Minute}, heavy("dream", time.Hour), 0, true},
		{"bootstrap over ordinary at once", waiter{maintenance.RankBootstrap, time.Minute}, heavy("dream", time.Hour), 0, true},
		{"equal rank past YieldAfter and longer", waiter{ordinary, 31 * time.Minute}, heavy("dream", time.Hour), 0, true},
		{"equal rank short of YieldAfter", waiter{ordinary, 29 * time.Minute}, heavy("dream", time.Hour), 0, false},
		{"equal rank not longer than the acquirer", waiter{ordinary, 40 * time.Minute}, heavy("dream", time.Hour), 50 * time.Minute, false},
		{"lower rank never", waiter{ordinary, 5 * time.Hour}, func() maintenance.Task {
			b := heavy("backup", day)
			b.DataSafety = true
			return b
		}(), 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			store := maintenance.NewMemoryStateStore()
			// Another daemon's task is waiting, recorded in the shared store.
			remote := maintenance.TaskState{Name: "kb-sync", Class: maintenance.Heavy, Rank: tt.remote.rank,
				DeferredSince: t0.Add(-tt.remote.since), DeferredAt: t0.Add(-time.Minute), Deferrals: 3,
				DeferReason: maintenance.ReasonLeaseHeld, DeferBlocker: "daemon-x"}
			local := maintenance.TaskState{Name: tt.local.Name, LastRunAt: t0.Add(-2 * day)}
			if tt.localWait > 0 {
				local.DeferredSince, local.DeferredAt = t0.Add(-tt.localWait), t0.Add(-time.Minute)
			}
			if err := store.Save(bg, 0, remote, local); err != nil {
				t.Fatal(err)
			}
			lease := maintenance.NewMemoryLease(maintenance.DefaultMaxHold)
			s := newSched(t, []maintenance.Task{tt.local}, maintenance.Config{StateStore: store, Lease: lease, Holder: "daemon-a"})
			res := poll(t, s, t0)
			d, deferred := deferral(res, tt.local.Name)
			if tt.yield {
				if winnerName(res) != "" || !deferred || d.Reason != maintenance.ReasonYield || d.Blocker != "kb-sync" {
					t.Fatalf("rule: yield to another scheduler's waiter (%s): winner %q, deferral %+v", tt.name, winnerName(res), d)
				}
				if _, held, _ := lease.Current(bg, t0); held {
					t.Fatal("rule: a yielding winner does not acquire the lease")
				}
			} else if winnerName(res) != tt.local.Name {
				t.Fatalf("rule: no yield (%s): winner %q, deferral %+v", tt.name, winnerName(res), d)
			}
		})
	}

	t.Run("an abandoned waiter record is ignored", func(t *testing.T) {
		store := maintenance.NewMemoryStateStore()
		remote := maintenance.TaskState{Name: "kb-sync", Class: maintenance.Heavy, Rank: maintenance.RankDataSafety,
			DeferredSince: t0.Add(-5 * time.Hour), DeferredAt: t0.Add(-31 * time.Minute)}
		if err := store.Save(bg, 0, remote); err != nil {
			t.Fatal(err)
		}
		s := newSched(t, []maintenance.Task{heavy("dream", time.Hour)}, maintenance.Config{StateStore: store})
		if res := poll(t, s, t0); winnerName(res) != "dream" {
			t.Fatalf("rule: a waiter not refreshed within YieldAfter is presumed abandoned: winner %q", winnerName(res))
		}
	})

	t.Run("two schedulers sharing lease and store", func(t *testing.T) {
		store := maintenance.NewMemoryStateStore()
		lease := maintenance.NewMemoryLease(time.Hour)
		backup := heavy("backup", day)
		backup.DataSafety = true
		a := newSched(t, []maintenance.Task{heavy("summary", 10*time.Minute)},
			maintenance.Config{StateStore: store, Lease: lease, Holder: "a", MaxHold: time.Hour, LeaseTTL: time.Hour})
		b := newSched(t, []maintenance.Task{backup},
			maintenance.Config{StateStore: store, Lease: lease, Holder: "b", MaxHold: time.Hour, LeaseTTL: time.Hour})
		if res := poll(t, a, t0); winnerName(res) != "summary" {
			t.Fatalf("a should win first: %q", winnerName(res))
		}
		res := poll(t, b, t0.Add(time.Minute))
		if d, _ := deferral(res, "backup"); d.Reason != maintenance.ReasonHeavyBusy || d.Blocker != "summary" {
			t.Fatalf("rule: b sees a's heavy task running through the shared store: %+v", d)
		}
		for m := 10; m <= 40; m += 10 { // b keeps polling; its waiter record stays fresh
			poll(t, b, t0.Add(time.Duration(m)*time.Minute))
		}
		if err := a.Complete(bg, "summary", nil, t0.Add(45*time.Minute)); err != nil {
			t.Fatal(err)
		}
		// a polls first after its release, but yields to b's data-safety waiter.
		res = poll(t, a, t0.Add(45*time.Minute))
		if d, _ := deferral(res, "summary"); winnerName(res) != "" || d.Reason != maintenance.ReasonYield || d.Blocker != "backup" {
			t.Fatalf("rule: a yields to b's higher-rank waiter: winner %q, %+v", winnerName(res), d)
		}
		if res := poll(t, b, t0.Add(46*time.Minute)); winnerName(res) != "backup" {
			t.Fatalf("b's waiter acquires: winner %q", winnerName(res))
		}
	})
}

func TestStaleHolderCannotWriteState(t *testing.T) {
	store := maintenance.NewMemoryStateStore()
	lease := maintenance.NewMemoryLease(time.Hour)
	cfg := func(holder string) maintenance.Config {
		return maintenance.Config{StateStore: store, Lease: lease, Holder: holder, MaxHold: time.Hour, LeaseTTL: 5 * time.Minute}
	}
	tasks := []maintenance.Task{heavy("summary", 10*time.Minute)}
	a := newSched(t, tasks, cfg("a"))
	b := newSched(t, tasks, cfg("b"))
	if res := poll(t, a, t0); winnerName(res) != "summary" {
		t.Fatal("a should win")
	}
	// a stalls: it never renews, so its grant lapses after one TTL and b takes over.
	res := poll(t, b, t0.Add(5*time.Minute))
	if winnerName(res) != "summary" {
		t.Fatalf("rule: a stalled holder's heavy task stops counting as running once its grant lapses: b's winner %q", winnerName(res))
	}
	if err := a.Renew(bg, t0.Add(6*time.Minute)); !errors.Is(err, maintenance.ErrNotHolder) {
		t.Fatalf("rule: a stale grant cannot renew: %v", err)
	}
	err := a.Complete(bg, "summary", nil, t0.Add(7*time.Minute))
	if !errors.Is(err, maintenance.ErrStaleToken) {
		t.Fatalf("rule: a stale token cannot write state: Complete = %v", err)
	}
	st := stateOf(t, store, "summary")
	if !st.Running || st.RunningBy != "b" || !st.LastRunAt.IsZero() {
		t.Fatalf("rule: the refused write changed nothing: %+v", st)
	}
	if g, ok, _ := lease.Current(bg, t0.Add(7*time.Minute)); !ok || g.Holder != "b" {
		t.Fatalf("rule: a stale holder cannot release the new grant: %+v %v", g, ok)
	}
	if err := b.Complete(bg, "summary", nil, t0.Add(8*time.Minute)); err != nil {
		t.Fatalf("the live holder records its outcome: %v", err)
	}
	if st := stateOf(t, store, "summary"); !st.LastRunAt.Equal(t0.Add(5*time.Minute)) || st.Running {
		t.Fatalf("LastRunAt is the start of b's run: %+v", st)
	}
}

func TestPollDueErrorLeavesOthers(t *testing.T) {
	flaky := heavy("flaky", 0)
	boom := errors.New("boom")
	flaky.Due = func(context.Context, time.Time, maintenance.TaskState) (bool, error) { return false, boom }
	store := maintenance.NewMemoryStateStore()
	old := maintenance.TaskState{Name: "flaky", DeferredSince: t0.Add(-time.Hour), DeferredAt: t0.Add(-time.Minute), Deferrals: 1}
	if err := store.Save(bg, 0, old); err != nil {
		t.Fatal(err)
	}
	s := newSched(t, []maintenance.Task{flaky, heavy("dream", time.Hour)}, maintenance.Config{StateStore: store})
	res, err := s.Poll(bg, t0)
	if !errors.Is(err, boom) || !strings.Contains(err.Error(), `"flaky"`) {
		t.Fatalf("rule: a Due error is returned naming the task: %v", err)
	}
	if winnerName(res) != "dream" {
		t.Fatalf("rule: a Due error does not stop the others: winner %q", winnerName(res))
	}
	if st := stateOf(t, store, "flaky"); st != old {
		t.Fatalf("rule: a Due error leaves the task's state untouched: %+v", st)
	}
}

func TestCompleteOutcomes(t *testing.T) {
	tests := []struct {
		err  error
		want maintenance.Outcome
	}{
		{nil, maintenance.OutcomeSucceeded},
		{errors.New("disk full"), maintenance.OutcomeFailed},
		{context.Canceled, maintenance.OutcomeCancelled},
		{maintenance.ErrHoldExceeded, maintenance.OutcomeCancelled},
		{fmt.Errorf("lease lost: %w", maintenance.ErrNotHolder), maintenance.OutcomeCancelled},
		{errors.New("bad byte \xff and \x00"), maintenance.OutcomeFailed},
	}
	for _, tt := range tests {
		store := maintenance.NewMemoryStateStore()
		lease := maintenance.NewMemoryLease(maintenance.DefaultMaxHold)
		s := newSched(t, []maintenance.Task{heavy("dream", time.Hour)}, maintenance.Config{StateStore: store, Lease: lease})
		poll(t, s, t0)
		if err := s.Complete(bg, "dream", tt.err, t0.Add(time.Minute)); err != nil {
			t.Fatal(err)
		}
		st := stateOf(t, store, "dream")
		if st.LastOutcome != tt.want || st.Running || !st.LastRunAt.Equal(t0) {
			t.Errorf("rule: Complete(%v) records outcome %q, clears Running and sets LastRunAt to the start: %+v", tt.err, tt.want, st)
		}
		if _, held, _ := lease.Current(bg, t0.Add(time.Minute)); held {
			t.Errorf("rule: Complete of the heavy task releases the lease")
		}
	}
	s := newSched(t, []maintenance.Task{heavy("dream", time.Hour)}, maintenance.Config{})
	if err := s.Complete(bg, "nope", nil, t0); !errors.Is(err, maintenance.ErrInvalid) {
		t.Errorf("Complete of an unknown task is ErrInvalid: %v", err)
	}
}

func TestNewSchedulerValidates(t *testing.T) {
	dup := []maintenance.Task{heavy("a", time.Hour), heavy("a", time.Hour)}
	noCad := []maintenance.Task{{Name: "x", Run: noop}}
	badDep := heavy("b", time.Hour)
	badDep.DependsOn = []string{"ghost"}
	badGate := heavy("c", time.Hour)
	badGate.Gates = []maintenance.Gate{{Producer: "c"}}
	noRun := maintenance.Task{Name: "d", Cadence: time.Hour}
	long := strings.Repeat("n", 257)
	tests := []struct {
		name  string
		tasks []maintenance.Task
		cfg   maintenance.Config
		want  error
		field string
	}{
		{"duplicate name", dup, maintenance.Config{}, maintenance.ErrInvalid, "Name"},
		{"empty name", []maintenance.Task{heavy("", time.Hour)}, maintenance.Config{}, maintenance.ErrInvalid, "Name"},
		{"long name", []maintenance.Task{heavy(long, time.Hour)}, maintenance.Config{}, maintenance.ErrInvalid, "Name"},
		{"control character in name", []maintenance.Task{heavy("a\nb", time.Hour)}, maintenance.Config{}, maintenance.ErrInvalid, "Name"},
		{"no cadence nor due", noCad, maintenance.Config{}, maintenance.ErrInvalid, "Cadence"},
		{"negative cadence", []maintenance.Task{heavy("n", -time.Hour)}, maintenance.Config{}, maintenance.ErrInvalid, "Cadence"},
		{"unknown dependency", []maintenance.Task{badDep}, maintenance.Config{}, maintenance.ErrInvalid, "DependsOn"},
		{"self gate", []maintenance.Task{badGate}, maintenance.Config{}, maintenance.ErrInvalid, "Gates.Producer"},
		{"nil run", []maintenance.Task{noRun}, maintenance.Config{}, maintenance.ErrInvalid, "Run"},
		{"bad class", []maintenance.Task{{Name: "e", Class: 7, Cadence: time.Hour, Run: noop}}, maintenance.Config{}, maintenance.ErrInvalid, "Class"},
		{"class beyond int32", []maintenance.Task{{Name: "e", Class: 1 << 40, Cadence: time.Hour, Run: noop}}, maintenance.Config{}, maintenance.ErrInvalid, "Class"},
		{"negative ttl", nil, maintenance.Config{LeaseTTL: -1}, maintenance.ErrInvalidConfig, "Config.LeaseTTL"},
		{"ttl above max hold", nil, maintenance.Config{LeaseTTL: 2 * time.Hour, MaxHold: time.Hour}, maintenance.ErrInvalidConfig, "Config.LeaseTTL"},
		{"negative limit", nil, maintenance.Config{AlsoDispatchLimit: -1}, maintenance.ErrInvalidConfig, "Config.AlsoDispatchLimit"},
		{"negative yield", nil, maintenance.Config{YieldAfter: -1}, maintenance.ErrInvalidConfig, "Config.YieldAfter"},
		{"long holder", nil, maintenance.Config{Holder: long}, maintenance.ErrInvalidConfig, "Config.Holder"},
		{"control character in holder", nil, maintenance.Config{Holder: "a\x00"}, maintenance.ErrInvalidConfig, "Config.Holder"},
	}
	for _, tt := range tests {
		_, err := maintenance.NewScheduler(tt.tasks, tt.cfg)
		if !errors.Is(err, tt.want) || !strings.Contains(err.Error(), tt.field) {
			t.Errorf("%s: NewScheduler error %v, want %v naming %s", tt.name, err, tt.want, tt.field)
		}
		if err != nil && strings.Count(err.Error(), "maintenance:") != 1 {
			t.Errorf("%s: the error names the package once: %q", tt.name, err)
		}
	}
	_, err := maintenance.NewScheduler(nil, maintenance.Config{LeaseTTL: -time.Second})
	if want := "maintenance: invalid config: Config.LeaseTTL must not be negative, got -1s"; err == nil || err.Error() != want {
		t.Errorf("a config error reads %q, want %q", err, want)
	}
	// Every violation is reported at once.
	_, err = maintenance.NewScheduler(append(dup, noRun), maintenance.Config{MaxHold: -1})
	for _, want := range []string{"Name", "Run", "MaxHold"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("NewScheduler reports every violation: %v lacks %s", err, want)
		}
	}
	s := newSched(t, nil, maintenance.Config{})
	if g := poll(t, s, t0).Gauge; g.Posture != maintenance.PostureDisabled {
		t.Errorf("an empty registry reads PostureDisabled: %v", g.Posture)
	}
}

// validName is the name rule, written independently of the package's: 1 to 256 bytes of
// UTF-8, no control or format character, no white space at either end.
func validName(s string) bool {
	if s == "" || len(s) > 256 || !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if r < 0x20 || (r >= 0x7f && r < 0xa0) || unicode.Is(unicode.Cf, r) {
			return false
		}
	}
	first, _ := utf8.DecodeRuneInString(s)
	last, _ := utf8.DecodeLastRuneInString(s)
	return !unicode.IsSpace(first) && !unicode.IsSpace(last)
}

// FuzzTaskRegistry: NewScheduler refuses exactly the registries that break a rule, each
// violation wrapping ErrInvalid.
func FuzzTaskRegistry(f *testing.F) {
	f.Add("summary", int64(time.Minute), 0, "backfill", "backfill", true)
	f.Add("", int64(-1), 3, "", "x", false)
	f.Add("a", int64(0), 1, "a", "a", true)
	f.Fuzz(func(t *testing.T, name string, cadence int64, class int, dep, gate string, withRun bool) {
		task := maintenance.Task{Name: name, Class: maintenance.Class(class), Cadence: time.Duration(cadence)}
		if withRun {
			task.Run = noop
		}
		if dep != "" {
			task.DependsOn = []string{dep}
		}
		if gate != "" {
			task.Gates = []maintenance.Gate{{Producer: gate}}
		}
		other := heavy("backfill", time.Hour)
		_, err := maintenance.NewScheduler([]maintenance.Task{other, task}, maintenance.Config{})
		valid := validName(name) && name != "backfill" && (class == 0 || class == 1) && cadence > 0 && withRun &&
			(dep == "" || dep == "backfill") && (gate == "" || gate == "backfill")
		if valid != (err == nil) {
			t.Fatalf("NewScheduler(%+v) = %v, want valid=%v", task, err, valid)
		}
		if err != nil && !errors.Is(err, maintenance.ErrInvalid) {
			t.Fatalf("every violation wraps ErrInvalid: %v", err)
		}
	})
}

// TestStaleRunFencedInOneProcess: a host driving Poll without renewing lets its grant
// lapse and dispatches a second heavy run; the first run's late outcome is fenced out by
// the token it ran under, not admitted under the scheduler's newer grant.
func TestStaleRunFencedInOneProcess(t *testing.T) {
	store := maintenance.NewMemoryStateStore()
	once := heavy("summary", 10*time.Minute)
	once.Due = func(_ context.Context, _ time.Time, st maintenance.TaskState) (bool, error) {
		return !st.Running && st.LastRunAt.IsZero(), nil // not again while the host still runs it
	}
	s := newSched(t, []maintenance.Task{once, heavy("dream", time.Hour)},
		maintenance.Config{StateStore: store, LeaseTTL: 5 * time.Minute})
	if res := poll(t, s, t0); winnerName(res) != "summary" {
		t.Fatalf("summary first: %q", winnerName(res))
	}
	if res := poll(t, s, t0.Add(5*time.Minute)); winnerName(res) != "dream" {
		t.Fatalf("summary's grant lapsed, dream acquires: %q", winnerName(res))
	}
	if err := s.Complete(bg, "summary", nil, t0.Add(6*time.Minute)); !errors.Is(err, maintenance.ErrStaleToken) {
		t.Fatalf("rule: a run whose grant was replaced cannot write state: %v", err)
	}
	if err := s.Complete(bg, "dream", nil, t0.Add(7*time.Minute)); err != nil {
		t.Fatalf("the live run records its outcome: %v", err)
	}
}

type failingStore struct {
	*maintenance.MemoryStateStore
	failLoad, failSave bool
}

var errDisk = errors.New("disk unavailable")

func (f *failingStore) Load(ctx context.Context) (maintenance.Snapshot, error) {
	if f.failLoad {
		return maintenance.Snapshot{}, errDisk
	}
	return f.MemoryStateStore.Load(ctx)
}

func (f *failingStore) Save(ctx context.Context, token uint64, states ...maintenance.TaskState) error {
	if f.failSave {
		return errDisk
	}
	return f.MemoryStateStore.Save(ctx, token, states...)
}

func (f *failingStore) Update(ctx context.Context, names []string, fn maintenance.UpdateFunc) error {
	if f.failSave {
		return errDisk
	}
	return f.MemoryStateStore.Update(ctx, names, fn)
}

// TestPollStoreFailures: an unreadable store reads Unknown and dispatches nothing; an
// unwritable one dispatches nothing and releases the grant it took, so nothing is lost:
// the next poll decides again.
func TestPollStoreFailures(t *testing.T) {
	fs := &failingStore{MemoryStateStore: maintenance.NewMemoryStateStore(), failLoad: true}
	lease := maintenance.NewMemoryLease(time.Hour)
	s := newSched(t, []maintenance.Task{heavy("dream", time.Hour)}, maintenance.Config{StateStore: fs, Lease: lease, MaxHold: time.Hour})
	res, err := s.Poll(bg, t0)
	if !errors.Is(err, errDisk) || res.Winner != nil || res.Gauge.Posture != maintenance.PostureUnknown {
		t.Fatalf("rule: an unreadable store is an error, no dispatch, posture Unknown: %v %+v", err, res)
	}
	if g, gerr := maintenance.ReadGauge(bg, fs, lease, t0, 0); !errors.Is(gerr, errDisk) || g.Posture != maintenance.PostureUnknown {
		t.Fatalf("ReadGauge reports the load error with posture Unknown: %v %v", gerr, g.Posture)
	}
	fs.failLoad, fs.failSave = false, true
	res, err = s.Poll(bg, t0)
	if !errors.Is(err, errDisk) || res.Winner != nil {
		t.Fatalf("rule: an unwritable store dispatches nothing: %v %+v", err, res)
	}
	if _, held, _ := lease.Current(bg, t0); held {
		t.Fatal("rule: the grant taken for an unrecorded dispatch is released")
	}
	fs.failSave = false
	if res := poll(t, s, t0.Add(time.Minute)); winnerName(res) != "dream" {
		t.Fatalf("nothing is lost: the next poll dispatches dream: %q", winnerName(res))
	}
}
