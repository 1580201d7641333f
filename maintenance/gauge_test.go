package maintenance_test

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/rotaworks/rota/maintenance"
)

// TestGaugeFlipsAndSurvivesRestart: the gauge reads Degraded once a waiter passes
// DegradeAfter, Healthy again once it acquires, and reads the same from a new Scheduler
// over the same StateStore (a restart).
func TestGaugeFlipsAndSurvivesRestart(t *testing.T) {
	store := maintenance.NewMemoryStateStore()
	lease := maintenance.NewMemoryLease(2 * time.Hour)
	cfg := maintenance.Config{StateStore: store, Lease: lease, MaxHold: 2 * time.Hour, LeaseTTL: 2 * time.Hour}
	tasks := []maintenance.Task{heavy("summary", 10*time.Minute), heavy("nightly", day)}
	seed(t, store, map[string]time.Time{"summary": t0.Add(-time.Hour), "nightly": t0.Add(-25 * time.Hour)})
	s := newSched(t, tasks, cfg)

	if g := poll(t, s, t0).Gauge; g.Posture != maintenance.PostureHealthy || g.HolderTask != "summary" || len(g.Waiters) != 1 {
		t.Fatalf("at t0 summary holds and nightly just started waiting: %+v", g)
	}
	g := poll(t, s, t0.Add(time.Hour)).Gauge
	if g.Posture != maintenance.PostureHealthy {
		t.Fatalf("rule: a wait of exactly DegradeAfter is not yet Degraded: %v", g.Posture)
	}
	at := t0.Add(time.Hour + time.Minute)
	g = poll(t, s, at).Gauge
	if g.Posture != maintenance.PostureDegraded {
		t.Fatalf("rule: Degraded once a waiter exceeds DegradeAfter: %+v", g)
	}
	if g.Holder != maintenance.DefaultHolder || g.HeldFor != 61*time.Minute || g.HolderTask != "summary" {
		t.Errorf("gauge: holder %q task %q held for %v", g.Holder, g.HolderTask, g.HeldFor)
	}
	if len(g.Waiters) != 1 || g.Waiters[0].Task != "nightly" || g.Waiters[0].Wait != 61*time.Minute ||
		g.Waiters[0].Reason != maintenance.ReasonHeavyBusy || g.ChainDepth != 1 {
		t.Errorf("gauge: waiters %+v depth %d", g.Waiters, g.ChainDepth)
	}

	// Restart: a process with the same store (and lease, or a fresh one) reads the same
	// gauge, without polling.
	for _, l := range []maintenance.Lease{lease, maintenance.NewMemoryLease(time.Hour)} {
		g2, err := maintenance.ReadGauge(bg, store, l, at, 0)
		if err != nil {
			t.Fatal(err)
		}
		if g2.Posture != maintenance.PostureDegraded || len(g2.Waiters) != 1 || g2.Waiters[0] != g.Waiters[0] {
			t.Fatalf("rule: the posture survives a restart: %+v, want %+v", g2, g)
		}
	}

	// The waiter acquires: Healthy again, and again after a restart.
	done := t0.Add(62 * time.Minute)
	if err := s.Complete(bg, "summary", nil, done); err != nil {
		t.Fatal(err)
	}
	res := poll(t, s, done)
	if winnerName(res) != "nightly" || res.Gauge.Posture != maintenance.PostureHealthy {
		t.Fatalf("rule: Healthy again once the waiter acquires: winner %q, gauge %+v", winnerName(res), res.Gauge)
	}
	if g3, _ := maintenance.ReadGauge(bg, store, lease, done, 0); g3.Posture != maintenance.PostureHealthy || g3.HolderTask != "nightly" {
		t.Fatalf("rule: the recovered posture survives a restart: %+v", g3)
	}
}

func TestGaugeChainDepth(t *testing.T) {
	lease := maintenance.NewMemoryLease(time.Hour)
	if _, err := lease.Acquire(bg, "daemon-b", 30*time.Minute, t0); err != nil {
		t.Fatal(err)
	}
	summary := heavy("summary", 10*time.Minute)
	summary.Gates = []maintenance.Gate{{Producer: "memory-summary-backfill"}}
	golden := offLease("golden-path", time.Hour)
	golden.Gates = []maintenance.Gate{{Producer: "summary"}}
	s := newSched(t, []maintenance.Task{golden, summary, heavy("memory-summary-backfill", 6*time.Hour)},
		maintenance.Config{Lease: lease, MaxHold: time.Hour})
	g := poll(t, s, t0.Add(time.Minute)).Gauge
	// golden-path waits on summary (gate), which waits on backfill (gate), which waits on
	// the lease held by daemon-b.
	if g.ChainDepth != 3 || g.Holder != "daemon-b" || g.HolderTask != "" {
		t.Fatalf("rule: the chain depth counts waiters each blocked by the next: %+v", g)
	}
	if g.Posture.String() != "healthy" || maintenance.PostureDegraded.String() != "degraded" ||
		maintenance.PostureUnknown.String() != "unknown" || maintenance.PostureDisabled.String() != "disabled" {
		t.Errorf("Posture strings: %v", g.Posture)
	}
}

// ReadGauge needs no task list: from the StateStore and the Lease alone it reads the
// gauge the scheduler's poll computed; without the Lease it finds the holder from the
// heavy run's claim; it reads PostureDisabled only for a store that holds no state.
func TestReadGauge(t *testing.T) {
	store := maintenance.NewMemoryStateStore()
	lease := maintenance.NewMemoryLease(2 * time.Hour)
	store.FenceWith(lease)
	tasks := []maintenance.Task{heavy("summary", 10*time.Minute), heavy("nightly", day), offLease("verify", time.Hour)}
	seed(t, store, map[string]time.Time{"summary": t0.Add(-time.Hour), "nightly": t0.Add(-25 * time.Hour), "verify": t0})
	if g, err := maintenance.ReadGauge(bg, store, lease, t0, 0); err != nil || g.Posture != maintenance.PostureHealthy {
		t.Fatalf("rule: a store with states is not Disabled without a task list: %+v, %v", g, err)
	}
	s := newSched(t, tasks, maintenance.Config{StateStore: store, Lease: lease, MaxHold: 2 * time.Hour, LeaseTTL: 2 * time.Hour, Holder: "daemon-a"})
	poll(t, s, t0)
	at := t0.Add(61 * time.Minute)
	want := poll(t, s, at).Gauge
	if want.Posture != maintenance.PostureDegraded || want.HolderTask != "summary" {
		t.Fatalf("the scheduler's gauge: %+v", want)
	}
	got, err := maintenance.ReadGauge(bg, store, lease, at, 0)
	if err != nil || !reflectGauge(got, want) {
		t.Errorf("rule: ReadGauge with the Lease reads the poll's gauge:\n got %+v, %v\nwant %+v", got, err, want)
	}
	got, err = maintenance.ReadGauge(bg, store, nil, at, 0)
	if err != nil || !reflectGauge(got, want) {
		t.Errorf("rule: ReadGauge without the Lease finds the holder from the heavy run's claim:\n got %+v, %v\nwant %+v", got, err, want)
	}
	if g, _ := maintenance.ReadGauge(bg, store, nil, at, 2*time.Hour); g.Posture != maintenance.PostureHealthy {
		t.Errorf("rule: degradeAfter is the caller's: a 61m wait under 2h is Healthy: %v", g.Posture)
	}
	if g, err := maintenance.ReadGauge(bg, maintenance.NewMemoryStateStore(), nil, at, 0); err != nil || g.Posture != maintenance.PostureDisabled {
		t.Errorf("rule: an empty store reads Disabled: %+v, %v", g, err)
	}
	if _, err := maintenance.ReadGauge(bg, nil, nil, at, 0); !errors.Is(err, maintenance.ErrInvalid) {
		t.Errorf("a nil store is ErrInvalid: %v", err)
	}
	if _, err := maintenance.ReadGauge(bg, store, nil, at, -time.Second); !errors.Is(err, maintenance.ErrInvalid) {
		t.Errorf("a negative degradeAfter is ErrInvalid: %v", err)
	}
	fs := &failingStore{MemoryStateStore: maintenance.NewMemoryStateStore(), failLoad: true}
	if g, err := maintenance.ReadGauge(bg, fs, nil, at, 0); !errors.Is(err, errDisk) || g.Posture != maintenance.PostureUnknown {
		t.Errorf("an unreadable store reads Unknown, with the error: %+v, %v", g, err)
	}
}

// reflectGauge reports whether two gauges agree on everything an operator reads.
func reflectGauge(a, b maintenance.Gauge) bool {
	return a.At.Equal(b.At) && a.Posture == b.Posture && a.Holder == b.Holder && a.HolderTask == b.HolderTask &&
		a.HeldFor == b.HeldFor && a.ChainDepth == b.ChainDepth && slices.Equal(a.Waiters, b.Waiters)
}
