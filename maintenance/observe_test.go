package maintenance_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/rotaworks/rota/maintenance"
)

// pollRecorder is an in-memory maintenance.Observer.
type pollRecorder struct {
	mu   sync.Mutex
	reps []maintenance.PollReport
}

func (r *pollRecorder) ObservePoll(rep maintenance.PollReport) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.reps = append(r.reps, rep)
}

// flakyStore fails Load while fail is set.
type flakyStore struct {
	maintenance.StateStore
	fail bool
}

var errStoreDown = errors.New("store down")

func (f *flakyStore) Load(ctx context.Context) (maintenance.Snapshot, error) {
	if f.fail {
		return maintenance.Snapshot{}, errStoreDown
	}
	return f.StateStore.Load(ctx)
}

// renderReport writes every field of a report as text, times relative to base, so that a
// scripted scenario can state each report whole.
func renderReport(rep maintenance.PollReport, base time.Time) []string {
	rel := func(t time.Time) string {
		if t.IsZero() {
			return "-"
		}
		return "+" + t.Sub(base).String()
	}
	cand := func(cs []maintenance.Candidate) string {
		var s []string
		for _, c := range cs {
			s = append(s, fmt.Sprintf("%s(%s)", c.Task.Name, c.Task.Class))
		}
		return "[" + strings.Join(s, " ") + "]"
	}
	winner := "-"
	if w := rep.Result.Winner; w != nil {
		winner = fmt.Sprintf("%s(%s)", w.Task.Name, w.Task.Class)
	}
	var deferred []string
	for _, d := range rep.Result.Deferred {
		deferred = append(deferred, fmt.Sprintf("%s %s %q since %s", d.Task, d.Reason, d.Blocker, rel(d.Since)))
	}
	g := rep.Result.Gauge
	var waiters []string
	for _, w := range g.Waiters {
		waiters = append(waiters, fmt.Sprintf("%s since %s waited %v %s %q", w.Task, rel(w.Since), w.Wait, w.Reason, w.Blocker))
	}
	return []string{
		fmt.Sprintf("now %s err %v degraded %v recovered %v", rel(rep.Now), rep.Err, rep.TurnedDegraded, rep.Recovered),
		fmt.Sprintf("winner %s heavy %q second pass %s also %s", winner, heavyName(rep.Result), cand(offLeaseRuns(rep.Result)), cand(rep.Result.AlsoDispatched)),
		"deferred: " + strings.Join(deferred, "; "),
		fmt.Sprintf("gauge at %s %s holder %q task %q held %v depth %d", rel(g.At), g.Posture, g.Holder, g.HolderTask, g.HeldFor, g.ChainDepth),
		"waiters: " + strings.Join(waiters, "; "),
	}
}

// TestObserverScriptedPolls drives a scheduler through a stall and its end — another
// holder keeps the lease past DegradeAfter, the store fails once, the lease comes free —
// and checks every field of every report, and the log lines.
func TestObserverScriptedPolls(t *testing.T) {
	base := time.Date(2026, 6, 20, 12, 0, 0, 0, time.UTC)
	at := func(d time.Duration) time.Time { return base.Add(d) }
	run := func(context.Context) error { return nil }
	tasks := []maintenance.Task{
		{Name: "big", Cadence: time.Hour, Run: run},
		{Name: "small", Cadence: time.Hour, Run: run},
		{Name: "cheap", Class: maintenance.OffLease, Cadence: time.Hour, Run: run},
		{Name: "cheap2", Class: maintenance.OffLease, Cadence: time.Hour, Run: run},
	}
	lease := maintenance.NewMemoryLease(2 * time.Hour)
	other, err := lease.Acquire(bg, "other", time.Hour, at(-10*time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	store := &flakyStore{StateStore: maintenance.NewMemoryStateStore()}
	rec := &pollRecorder{}
	var logs bytes.Buffer
	s := newSched(t, tasks, maintenance.Config{
		Lease: lease, StateStore: store, Holder: "me", MaxHold: 2 * time.Hour,
		YieldAfter: time.Hour, DegradeAfter: 30 * time.Minute, AlsoDispatchLimit: 1,
		Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey {
				return slog.Attr{}
			}
			return a
		}})),
		Observer: rec,
	})

	type step struct {
		at     time.Duration
		before func()
	}
	steps := []step{
		{0, nil},
		{40 * time.Minute, func() {
			if err := s.Complete(bg, "cheap", nil, at(time.Minute)); err != nil {
				t.Fatal(err)
			}
		}},
		{41 * time.Minute, nil},
		{41*time.Minute + 30*time.Second, func() { store.fail = true }},
		{42 * time.Minute, func() {
			store.fail = false
			if err := lease.Release(bg, other); err != nil {
				t.Fatal(err)
			}
		}},
		{44 * time.Minute, func() {
			if err := s.Complete(bg, "big", nil, at(43*time.Minute)); err != nil {
				t.Fatal(err)
			}
		}},
	}
	var returned []maintenance.PollResult
	var errs []error
	for _, st := range steps {
		if st.before != nil {
			st.before()
		}
		res, err := s.Poll(bg, at(st.at))
		returned = append(returned, res)
		errs = append(errs, err)
	}

	want := [][]string{
		{ // big wins the pick but the lease is held; cheap runs off the lease, cheap2 is over the limit
			"now +0s err <nil> degraded false recovered false",
			"winner cheap(off-lease) heavy \"\" second pass [cheap(off-lease)] also []",
			`deferred: big lease-held "other" since +0s; small outranked "big" since +0s; cheap2 dispatch-limit "" since +0s`,
			`gauge at +0s healthy holder "other" task "" held 10m0s depth 2`,
			`waiters: big since +0s waited 0s lease-held "other"; cheap2 since +0s waited 0s dispatch-limit ""; small since +0s waited 0s outranked "big"`,
		},
		{ // the waits pass DegradeAfter: the stall is reported once
			"now +40m0s err <nil> degraded true recovered false",
			"winner cheap2(off-lease) heavy \"\" second pass [cheap2(off-lease)] also []",
			`deferred: big lease-held "other" since +0s; small outranked "big" since +0s`,
			`gauge at +40m0s degraded holder "other" task "" held 50m0s depth 2`,
			`waiters: big since +0s waited 40m0s lease-held "other"; small since +0s waited 40m0s outranked "big"`,
		},
		{ // still degraded: no new report of it
			"now +41m0s err <nil> degraded false recovered false",
			"winner - heavy \"\" second pass [] also []",
			`deferred: big lease-held "other" since +0s; small outranked "big" since +0s`,
			`gauge at +41m0s degraded holder "other" task "" held 51m0s depth 2`,
			`waiters: big since +0s waited 41m0s lease-held "other"; small since +0s waited 41m0s outranked "big"`,
		},
		{ // the store fails: Unknown, which neither ends nor restarts the stall
			"now +41m30s err maintenance: poll: load state: store down degraded false recovered false",
			"winner - heavy \"\" second pass [] also []",
			"deferred: ",
			`gauge at +41m30s unknown holder "" task "" held 0s depth 0`,
			"waiters: ",
		},
		{ // the lease is free: big runs, small still waits
			"now +42m0s err <nil> degraded false recovered false",
			"winner big(heavy) heavy \"big\" second pass [] also []",
			`deferred: small outranked "big" since +0s`,
			`gauge at +42m0s degraded holder "me" task "big" held 0s depth 1`,
			`waiters: small since +0s waited 42m0s outranked "big"`,
		},
		{ // small runs: no waiter is left, the stall is over
			"now +44m0s err <nil> degraded false recovered true",
			"winner small(heavy) heavy \"small\" second pass [] also []",
			"deferred: ",
			`gauge at +44m0s healthy holder "me" task "small" held 0s depth 0`,
			"waiters: ",
		},
	}
	if len(rec.reps) != len(want) {
		t.Fatalf("observer saw %d polls, want %d", len(rec.reps), len(want))
	}
	ignoreFuncs := cmp.Comparer(func(a, b maintenance.Task) bool { return a.Name == b.Name && a.Class == b.Class })
	for i, w := range want {
		rep := rec.reps[i]
		if diff := cmp.Diff(w, renderReport(rep, base)); diff != "" {
			t.Errorf("poll %d (-want +got):\n%s", i+1, diff)
		}
		if diff := cmp.Diff(returned[i], rep.Result, ignoreFuncs); diff != "" {
			t.Errorf("poll %d: reported result differs from Poll's (-returned +reported):\n%s", i+1, diff)
		}
		if rep.Err != errs[i] {
			t.Errorf("poll %d: reported error %v, Poll returned %v", i+1, rep.Err, errs[i])
		}
	}

	out := logs.String()
	for _, s := range []string{
		`level=WARN msg="maintenance: degraded: a task has waited longer than DegradeAfter" degrade_after=30m0s waiters=2 chain_depth=2 task=big wait=40m0s reason=lease-held blocker=other holder=other holder_task="" held_for=50m0s`,
		`level=INFO msg="maintenance: recovered" posture=healthy`,
		`level=INFO msg="maintenance: poll" now=2026-06-20T12:42:00.000Z winner=big heavy=big second_pass=0 deferred=1 posture=degraded holder=me held_for=0s waiters=1 longest_wait=42m0s chain_depth=1` + "\n",
		`level=ERROR msg="maintenance: poll" now=2026-06-20T12:41:30.000Z winner="" heavy="" second_pass=0 deferred=0 posture=unknown holder="" held_for=0s waiters=0 longest_wait=0s chain_depth=0 error="maintenance: poll: load state: store down"` + "\n",
	} {
		if !strings.Contains(out, s) {
			t.Errorf("logs lack %q:\n%s", s, out)
		}
	}
	for msg, n := range map[string]int{"maintenance: degraded": 1, "maintenance: recovered": 1, `msg="maintenance: poll"`: 6} {
		if got := strings.Count(out, msg); got != n {
			t.Errorf("%d lines %q, want %d:\n%s", got, msg, n, out)
		}
	}
}

// TestObserverStallFoundAtStartup: a new scheduler over a store whose waiter has already
// waited past DegradeAfter reports the stall at its first poll.
func TestObserverStallFoundAtStartup(t *testing.T) {
	base := time.Date(2026, 6, 20, 12, 0, 0, 0, time.UTC)
	store := maintenance.NewMemoryStateStore()
	if err := store.Save(bg, 0, maintenance.TaskState{Name: "old", LastRunAt: base.Add(-time.Hour),
		DeferredSince: base.Add(-3 * time.Hour), DeferredAt: base.Add(-time.Minute), Deferrals: 170,
		DeferReason: maintenance.ReasonLeaseHeld, DeferBlocker: "other"}); err != nil {
		t.Fatal(err)
	}
	lease := maintenance.NewMemoryLease(2 * time.Hour)
	if _, err := lease.Acquire(bg, "other", time.Hour, base.Add(-time.Minute)); err != nil {
		t.Fatal(err)
	}
	rec := &pollRecorder{}
	s := newSched(t, []maintenance.Task{{Name: "old", Cadence: time.Hour, Run: func(context.Context) error { return nil }}},
		maintenance.Config{Lease: lease, StateStore: store, Observer: rec})
	poll(t, s, base)
	poll(t, s, base.Add(time.Minute))
	if len(rec.reps) != 2 || !rec.reps[0].TurnedDegraded || rec.reps[1].TurnedDegraded {
		t.Fatalf("want the stall reported at the first poll only, got %+v", rec.reps)
	}
	if g := rec.reps[0].Result.Gauge; g.Posture != maintenance.PostureDegraded || len(g.Waiters) == 0 || g.Waiters[0].Wait != 3*time.Hour {
		t.Errorf("gauge %+v", g)
	}
}
