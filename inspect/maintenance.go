package inspect

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/rotaworks/rota/maintenance"
)

// Where the maintenance page's gauge comes from.
const (
	sourceStateStore = "state_store"
	sourceLastPoll   = "last_poll"
	sourceNone       = "none"
)

// maintenanceView builds the maintenance page at now: every task's state and the gauge from
// one StateStore.Load, and the last poll the Inspector was told about. Without a
// StateStore the gauge is the last poll's.
func (i *Inspector) maintenanceView(ctx context.Context, now time.Time) maintenanceJSON {
	_, polls, _ := i.snapshot()
	v := maintenanceJSON{Now: utc(now), Source: sourceNone, Tasks: []taskJSON{}}
	if len(polls) > 0 {
		v.LastPoll = pollOf(polls[len(polls)-1])
	}
	if i.store == nil {
		if len(polls) > 0 {
			v.Source, v.Gauge = sourceLastPoll, gaugeOf(polls[len(polls)-1].gauge)
		}
		return v
	}
	v.Source = sourceStateStore
	snap, g, err := i.readGauge(ctx, now)
	if err != nil {
		v.Error = i.withhold(ctx, slog.LevelError, "reading the maintenance state", err)
		return v
	}
	v.Fence, v.Gauge = snap.Token, gaugeOf(g)
	for _, s := range snap.States {
		v.Tasks = append(v.Tasks, taskOf(s, now, snap.Token))
	}
	return v
}

// posture is the overview's line on maintenance: from the StateStore, else the last poll;
// nil when the Inspector has neither.
func (i *Inspector) posture(ctx context.Context, now time.Time, polls []pollRecord) *postureJSON {
	var g maintenance.Gauge
	p := &postureJSON{}
	switch {
	case i.store != nil:
		gauge, err := maintenance.ReadGauge(ctx, i.store, nil, now, 0)
		if err != nil {
			return &postureJSON{Posture: maintenance.PostureUnknown.String(), Source: sourceStateStore,
				Error: i.withhold(ctx, slog.LevelError, "reading the maintenance state", err)}
		}
		g, p.Source = gauge, sourceStateStore
	case len(polls) > 0:
		g, p.Source = polls[len(polls)-1].gauge, sourceLastPoll
	default:
		return nil
	}
	p.Posture, p.Holder, p.Waiters, p.LongestWaitSeconds = g.Posture.String(), g.Holder, len(g.Waiters), seconds(longestWait(g))
	return p
}

// readGauge loads every task's state and reads the gauge at now from the StateStore alone,
// without the Lease, with maintenance.DefaultDegradeAfter: two Loads.
func (i *Inspector) readGauge(ctx context.Context, now time.Time) (maintenance.Snapshot, maintenance.Gauge, error) {
	snap, err := i.store.Load(ctx)
	if err != nil {
		return maintenance.Snapshot{}, maintenance.Gauge{}, fmt.Errorf("inspect: StateStore.Load: %w", err)
	}
	g, err := maintenance.ReadGauge(ctx, i.store, nil, now, 0)
	if err != nil {
		return maintenance.Snapshot{}, maintenance.Gauge{}, fmt.Errorf("inspect: %w", err)
	}
	return snap, g, nil
}

func gaugeOf(g maintenance.Gauge) *gaugeJSON {
	j := &gaugeJSON{At: utc(g.At), Posture: g.Posture.String(), Holder: g.Holder, HolderTask: g.HolderTask,
		HeldForSeconds: seconds(g.HeldFor), Waiters: make([]waiterJSON, 0, len(g.Waiters)),
		LongestWaitSeconds: seconds(longestWait(g)), ChainDepth: g.ChainDepth}
	for _, w := range g.Waiters {
		j.Waiters = append(j.Waiters, waiterJSON{Task: w.Task, Since: utc(w.Since), WaitSeconds: seconds(w.Wait),
			Reason: string(w.Reason), Blocker: w.Blocker})
	}
	return j
}

// taskOf is s as the maintenance page shows it at now, fence the store's: it is running
// while its flag is set, its run's claim has not lapsed and, for a heavy task, no later
// grant has replaced the one it runs under.
func taskOf(s maintenance.TaskState, now time.Time, fence uint64) taskJSON {
	running := s.Running && now.Before(s.RunningUntil) && (s.Class != maintenance.Heavy || s.RunningToken >= fence)
	j := taskJSON{Name: s.Name, Class: s.Class.String(), Rank: s.Rank.String(), LastRunAt: utc(s.LastRunAt),
		LastOutcome: string(s.LastOutcome), LastError: s.LastError, Running: running,
		RunningSince: utc(s.RunningSince), RunningBy: s.RunningBy, RunningUntil: utc(s.RunningUntil), DeferredSince: utc(s.DeferredSince),
		DeferredAt: utc(s.DeferredAt), Deferrals: s.Deferrals, DeferReason: string(s.DeferReason), DeferBlocker: s.DeferBlocker}
	if !s.DeferredSince.IsZero() {
		j.WaitSeconds = since(now, s.DeferredSince)
	}
	return j
}

func pollOf(p pollRecord) *pollJSON {
	j := &pollJSON{At: utc(p.now), Winner: p.winner, Heavy: p.heavy, SecondPass: append([]string{}, p.secondPass...),
		Deferred: make([]deferralJSON, 0, len(p.deferred)), Posture: p.gauge.Posture.String(),
		TurnedDegraded: p.turnedDegraded, Recovered: p.recovered, Error: p.err}
	for _, d := range p.deferred {
		j.Deferred = append(j.Deferred, deferralJSON{Task: d.Task, Reason: string(d.Reason), Blocker: d.Blocker, Since: utc(d.Since)})
	}
	return j
}

// longestWait is the gauge's longest wait, 0 without waiters (they come longest first).
func longestWait(g maintenance.Gauge) time.Duration {
	if len(g.Waiters) == 0 {
		return 0
	}
	return g.Waiters[0].Wait
}
