package postgres_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rotaworks/rota/maintenance"
	"github.com/rotaworks/rota/postgres"
	"github.com/rotaworks/rota/postgres/pgtest"
)

// fleetRun is one run of a task by one replica of the fleet test.
type fleetRun struct {
	replica, task string
	class         maintenance.Class
	polled        time.Time // the now of the poll that dispatched it
	start, end    time.Time // when its RunFunc began and returned (end zero while it runs)
}

// pollObserver adapts a function to a maintenance.Observer.
type pollObserver func(maintenance.PollReport)

func (f pollObserver) ObservePoll(rep maintenance.PollReport) { f(rep) }

// fleetLog records every run, poll and error line of the replicas of TestMaintenanceFleetOnTheRealClock.
type fleetLog struct {
	mu         sync.Mutex
	runs       []*fleetRun
	dispatched map[string][]time.Time // replica/task → the nows of the polls that dispatched it, not yet started
	pollErrs   []string
	errLines   []string
	polls      map[string]int
	// seen[replica][task] is set once a gauge of replica showed task waiting.
	seen map[string]map[string]bool
}

func newFleetLog() *fleetLog {
	return &fleetLog{dispatched: map[string][]time.Time{}, polls: map[string]int{}, seen: map[string]map[string]bool{}}
}

// observer records replica's polls: what each dispatched and the waiters its gauge shows.
func (l *fleetLog) observer(replica string) maintenance.Observer {
	return pollObserver(func(rep maintenance.PollReport) {
		l.mu.Lock()
		defer l.mu.Unlock()
		l.polls[replica]++
		if rep.Err != nil {
			l.pollErrs = append(l.pollErrs, fmt.Sprintf("%s at %v: %v", replica, rep.Now.Format(time.StampMicro), rep.Err))
		}
		for _, c := range rep.Result.Dispatched() {
			k := replica + "/" + c.Task.Name
			l.dispatched[k] = append(l.dispatched[k], rep.Now)
		}
		if l.seen[replica] == nil {
			l.seen[replica] = map[string]bool{}
		}
		for _, w := range rep.Result.Gauge.Waiters {
			l.seen[replica][w.Task] = true
		}
	})
}

// logger returns a Logger that records every line at Error.
func (l *fleetLog) logger(replica string) *slog.Logger {
	return slog.New(errorRecorder{l: l, replica: replica})
}

type errorRecorder struct {
	l       *fleetLog
	replica string
}

func (h errorRecorder) Enabled(_ context.Context, level slog.Level) bool {
	return level >= slog.LevelError
}
func (h errorRecorder) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h errorRecorder) WithGroup(string) slog.Handler      { return h }
func (h errorRecorder) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %s", h.replica, r.Message)
	r.Attrs(func(a slog.Attr) bool {
		fmt.Fprintf(&b, " %s=%v", a.Key, a.Value)
		return true
	})
	h.l.mu.Lock()
	defer h.l.mu.Unlock()
	h.l.errLines = append(h.l.errLines, b.String())
	return nil
}

// instrument returns t with a RunFunc that records the run and takes d.
func (l *fleetLog) instrument(replica string, t maintenance.Task, d time.Duration) maintenance.Task {
	t.Run = func(ctx context.Context) error {
		l.mu.Lock()
		k := replica + "/" + t.Name
		r := &fleetRun{replica: replica, task: t.Name, class: t.Class, start: time.Now()}
		if q := l.dispatched[k]; len(q) > 0 {
			r.polled, l.dispatched[k] = q[0], q[1:]
		}
		l.runs = append(l.runs, r)
		l.mu.Unlock()
		timer := time.NewTimer(d)
		defer timer.Stop()
		var err error
		select {
		case <-timer.C:
		case <-ctx.Done():
			err = context.Cause(ctx)
		}
		l.mu.Lock()
		r.end = time.Now()
		l.mu.Unlock()
		return err
	}
	return t
}

// overlap reports whether a and b ran at the same time (a run not yet ended lasts to the end of the test).
func overlap(a, b *fleetRun, end time.Time) bool {
	ae, be := a.end, b.end
	if ae.IsZero() {
		ae = end
	}
	if be.IsZero() {
		be = end
	}
	return a.start.Before(be) && b.start.Before(ae)
}

// Two maintenance replicas on the real clock, each with its own pool, over one schema:
// the same registry of heavy and off-lease tasks that contend (short cadences, DependsOn
// between off-lease tasks and on a heavy task), and one heavy task each that only it
// knows. For 15 s of wall time, or ROTA_FLEET_DURATION (a time.ParseDuration string, such
// as 5m, for a longer soak), they poll every 100 ms. Whatever the machine's
// load: no poll fails and no line is logged at Error; no task, heavy or off-lease, runs
// on both at once, and no two heavy tasks overlap; no task starts while a task it
// depends on is running; each replica's gauge shows the other's own task waiting; and no
// heavy task waits longer than YieldAfter + (heavy tasks) × MaxHold + one poll interval.
func TestMaintenanceFleetOnTheRealClock(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	schema := pgtest.Schema(t, "rota_fleet")
	if err := postgres.Migrate(ctx, pgtest.PoolIn(t, schema, 1)); err != nil {
		t.Fatal(err)
	}
	const poll, ttl, maxHold, yieldAfter = 100 * time.Millisecond, 2 * time.Second, 4 * time.Second, time.Second
	duration := 15 * time.Second
	if s := os.Getenv("ROTA_FLEET_DURATION"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil || d <= 0 {
			t.Fatalf("ROTA_FLEET_DURATION=%q: want a positive duration such as 5m (%v)", s, err)
		}
		duration = d
	}
	type spec struct {
		task maintenance.Task
		run  time.Duration
	}
	shared := []spec{
		{maintenance.Task{Name: "vacuum", Class: maintenance.Heavy, Cadence: 400 * time.Millisecond}, 60 * time.Millisecond},
		{maintenance.Task{Name: "reindex", Class: maintenance.Heavy, Cadence: 600 * time.Millisecond}, 80 * time.Millisecond},
		{maintenance.Task{Name: "backup", Class: maintenance.Heavy, Cadence: 1500 * time.Millisecond, DataSafety: true}, 40 * time.Millisecond},
		{maintenance.Task{Name: "stats", Class: maintenance.OffLease, Cadence: 150 * time.Millisecond}, 30 * time.Millisecond},
		{maintenance.Task{Name: "prune", Class: maintenance.OffLease, Cadence: 200 * time.Millisecond, DependsOn: []string{"stats"}}, 40 * time.Millisecond},
		{maintenance.Task{Name: "cache", Class: maintenance.OffLease, Cadence: 100 * time.Millisecond}, 20 * time.Millisecond},
		{maintenance.Task{Name: "report", Class: maintenance.OffLease, Cadence: 300 * time.Millisecond, DependsOn: []string{"vacuum"}}, 30 * time.Millisecond},
	}
	own := map[string]spec{
		"a": {maintenance.Task{Name: "a-only", Class: maintenance.Heavy, Cadence: 500 * time.Millisecond}, 70 * time.Millisecond},
		"b": {maintenance.Task{Name: "b-only", Class: maintenance.Heavy, Cadence: 500 * time.Millisecond}, 70 * time.Millisecond},
	}
	cadence, deps := map[string]time.Duration{}, map[string][]string{}
	heavyCount := len(own)
	for _, sp := range append(slices.Clone(shared), own["a"], own["b"]) {
		cadence[sp.task.Name], deps[sp.task.Name] = sp.task.Cadence, sp.task.DependsOn
		if sp.task.Class == maintenance.Heavy && sp.task.Name != "a-only" && sp.task.Name != "b-only" {
			heavyCount++
		}
	}

	log := newFleetLog()
	runCtx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	begin := time.Now()
	for _, replica := range []string{"a", "b"} {
		var tasks []maintenance.Task
		for _, sp := range append(slices.Clone(shared), own[replica]) {
			tasks = append(tasks, log.instrument(replica, sp.task, sp.run))
		}
		pool := pgtest.PoolIn(t, schema, 4)
		s, err := maintenance.NewScheduler(tasks, maintenance.Config{
			Lease: postgres.NewLease(pool, "heavy", maxHold), StateStore: postgres.NewStateStore(pool), Holder: replica,
			LeaseTTL: ttl, MaxHold: maxHold, YieldAfter: yieldAfter, PollInterval: poll,
			Logger: log.logger(replica), Observer: log.observer(replica),
		})
		if err != nil {
			t.Fatal(err)
		}
		wg.Go(func() {
			if err := s.Run(runCtx); err != nil {
				t.Errorf("replica %s: Run: %v", replica, err)
			}
		})
	}
	time.Sleep(duration)
	cancel()
	wg.Wait()
	end := time.Now()

	log.mu.Lock()
	defer log.mu.Unlock()
	for _, e := range log.pollErrs {
		t.Errorf("a poll failed: %s", e)
	}
	for _, e := range log.errLines {
		t.Errorf("an Error line was logged: %s", e)
	}
	runs := log.runs
	var report []string
	for i, a := range runs {
		for _, b := range runs[i+1:] {
			switch {
			case !overlap(a, b, end):
			case a.task == b.task:
				report = append(report, fmt.Sprintf("%s ran on %s (%v–%v) and on %s (%v–%v) at once",
					a.task, a.replica, a.start.Sub(begin), a.end.Sub(begin), b.replica, b.start.Sub(begin), b.end.Sub(begin)))
			case a.class == maintenance.Heavy && b.class == maintenance.Heavy:
				report = append(report, fmt.Sprintf("heavy %s on %s (%v–%v) overlapped heavy %s on %s (%v–%v)",
					a.task, a.replica, a.start.Sub(begin), a.end.Sub(begin), b.task, b.replica, b.start.Sub(begin), b.end.Sub(begin)))
			}
		}
	}
	// A task must not start while a task it depends on runs: the dependency's run had
	// begun before the dependent's poll and was still going when the dependent began.
	for _, y := range runs {
		for _, x := range runs {
			if slices.Contains(deps[y.task], x.task) && !y.polled.IsZero() && !x.start.After(y.polled) &&
				(x.end.IsZero() || x.end.After(y.start)) {
				report = append(report, fmt.Sprintf("%s started on %s at %v while %s, which it depends on, ran on %s (%v–%v)",
					y.task, y.replica, y.start.Sub(begin), x.task, x.replica, x.start.Sub(begin), x.end.Sub(begin)))
			}
		}
	}
	if len(report) > 0 {
		t.Errorf("%d violations, of %d runs:\n%s", len(report), len(runs), strings.Join(report[:min(len(report), 20)], "\n"))
	}
	if !log.seen["b"]["a-only"] || !log.seen["a"]["b-only"] {
		t.Errorf("each replica's waiters are visible to the other: b saw a-only waiting %v, a saw b-only waiting %v",
			log.seen["b"]["a-only"], log.seen["a"]["b-only"])
	}
	// The drain bound, from each heavy run's due instant (its previous run's poll plus the
	// cadence, or the previous run's end if later) to its start; the last wait runs to the end.
	bound := yieldAfter + time.Duration(heavyCount)*maxHold + poll
	last := map[string]*fleetRun{}
	wait := func(task string, at time.Time) time.Duration {
		p, ok := last[task]
		if !ok {
			return at.Sub(begin)
		}
		due := p.polled.Add(cadence[task])
		if p.end.After(due) {
			due = p.end
		}
		return at.Sub(due)
	}
	ran := map[string]int{}
	for _, r := range runs {
		ran[r.task]++
		if r.class != maintenance.Heavy {
			continue
		}
		if w := wait(r.task, r.start); w > bound {
			t.Errorf("heavy %s started %v after it was due, beyond the bound %v", r.task, w, bound)
		}
		last[r.task] = r
	}
	for task, p := range last {
		if w := wait(task, end); !p.end.IsZero() && w > bound {
			t.Errorf("heavy %s has waited %v since it was due, beyond the bound %v", task, w, bound)
		}
	}
	for task := range cadence {
		if ran[task] == 0 {
			t.Errorf("%s never ran", task)
		}
	}
	t.Logf("%d runs in %v (polls %v): %v", len(runs), end.Sub(begin), log.polls, ran)
}
