package main

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rotaworks/rota/bridge"
	"github.com/rotaworks/rota/duework"
	"github.com/rotaworks/rota/postgres/pgtest"
	"github.com/rotaworks/rota/tenancy"
)

// runFor is how long each test runs the daemon on the real clock: long enough for every
// source on the dev tier to come due and run at least once.
const runFor = 4 * time.Second

// testConfig is the daemon's configuration in the tests: a few tenants, a short interval,
// and claims long enough for checkClean to tell a claimed entry from a due one.
func testConfig() config {
	return config{schema: "rota", tenants: 9, interval: 250 * time.Millisecond, workers: 4, claimFor: 10 * time.Minute}
}

// replica is one daemon under test: its service, its log, and how its run ended. The
// log's handler serializes its writes; the test reads it once the run has returned.
type replica struct {
	svc *service
	log *bytes.Buffer
	err error
}

// runReplicas builds one service per stores and runs them on the real clock until runFor
// has passed, as SIGTERM would stop them, and returns them when every run has returned.
// Replicas deployed together start at different moments, so their cycles interleave;
// here replica i starts i/len(all) of an interval after the first.
func runReplicas(t *testing.T, all ...stores) ([]*replica, time.Time) {
	t.Helper()
	reps := make([]*replica, len(all))
	for i, st := range all {
		r := &replica{log: &bytes.Buffer{}}
		svc, err := newService(testConfig(), st, slog.New(slog.NewTextHandler(r.log, nil)))
		if err != nil {
			t.Fatal(err)
		}
		r.svc = svc
		reps[i] = r
	}
	started := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), runFor)
	defer cancel()
	var wg sync.WaitGroup
	for i, r := range reps {
		wg.Go(func() {
			offset := time.NewTimer(time.Duration(i) * testConfig().interval / time.Duration(len(reps)))
			defer offset.Stop()
			select {
			case <-offset.C:
				r.err = r.svc.run(ctx)
			case <-ctx.Done():
				r.err = ctx.Err()
			}
		})
	}
	wg.Wait()
	return reps, started
}

// checkStopped checks that each replica ran items, stopped without error, and said so.
func checkStopped(t *testing.T, reps []*replica) {
	t.Helper()
	for i, r := range reps {
		if r.err != nil {
			t.Errorf("replica %d: run returned %v, want nil after a clean stop\n%s", i, r.err, r.log)
		}
		cycles, ended := r.svc.totals()
		if ran := ended[bridge.StatusHit] + ended[bridge.StatusMiss]; ran == 0 {
			t.Errorf("replica %d: %d cycles ran no item: %v\n%s", i, cycles, ended, r.log)
		}
		if n := ended[bridge.StatusError]; n > 0 {
			t.Errorf("replica %d: %d items failed\n%s", i, n, r.log)
		}
		log := r.log.String()
		for _, want := range []string{"daemon: synced", "rota: runner started", "rota: cycle", "rota: runner stopped", "daemon: stopped"} {
			if !strings.Contains(log, want) {
				t.Errorf("replica %d: no %q in the log:\n%s", i, want, log)
			}
		}
		if strings.Contains(log, "level=WARN") || strings.Contains(log, "level=ERROR") {
			t.Errorf("replica %d: a warning or an error in the log of a clean run:\n%s", i, log)
		}
	}
}

// checkClean checks that no entry is left claimed after a run that started at started.
func checkClean(t *testing.T, idx duework.Index, tenants []tenancy.Context, started time.Time) {
	t.Helper()
	left, err := leftClaimed(idx, tenants, started)
	if err != nil {
		t.Fatal(err)
	}
	if left != 0 {
		t.Errorf("%d entries left claimed after the stop", left)
	}
}

// leftClaimed counts the sources of tenants that are still claimed: it reads every
// source's entry and counts those not visible at the latest DueAt among them. A claim made
// during the run lasts until at least started + claimFor, after that instant, so an entry
// still claimed is not visible then; every other entry is due by then.
func leftClaimed(idx duework.Index, tenants []tenancy.Context, started time.Time) (int, error) {
	ctx := context.Background()
	var latest time.Time
	entries := 0
	for _, tc := range tenants {
		for _, slug := range []string{"jobs", "news", "blog"} {
			e, err := idx.Get(ctx, tc, slug)
			if err != nil {
				return 0, fmt.Errorf("%s/%s: %w", tc.UserID(), slug, err)
			}
			if e.DueAt.After(latest) {
				latest = e.DueAt
			}
			entries++
		}
	}
	if claimEnd := started.Add(testConfig().claimFor); !latest.Before(claimEnd) {
		return 0, fmt.Errorf("the latest DueAt %v is not before the earliest claim's end %v: claimed cannot be told from due", latest, claimEnd)
	}
	visible, err := idx.DueBefore(ctx, latest, duework.MaxLimit)
	if err != nil {
		return 0, err
	}
	return entries - len(visible), nil
}

// In memory, the daemon runs items on the real clock and stops cleanly when its context
// ends: Run returns nil and nothing is left claimed.
func TestDaemonInMemory(t *testing.T) {
	st, err := openStores(context.Background(), testConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer st.close()
	reps, started := runReplicas(t, st)
	checkStopped(t, reps)
	checkClean(t, st.index, reps[0].svc.tenants, started)

	// The check sees a claim: one taken now is left.
	tenants := reps[0].svc.tenants
	now := time.Now()
	claims, err := st.index.Claim(context.Background(), []duework.Key{{UserID: tenants[0].UserID(), WorkKey: "jobs"}}, now.Add(time.Minute), now.Add(time.Hour))
	if err != nil || len(claims) != 1 {
		t.Fatalf("claiming one entry: %v, %v", claims, err)
	}
	if left, err := leftClaimed(st.index, tenants, started); left != 1 || err != nil {
		t.Errorf("with one entry claimed, leftClaimed = %d, %v; want 1", left, err)
	}
}

// run, as main calls it, opens its stores, runs until ctx ends and returns nil.
func TestRunReturnsNilOnStop(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	var log bytes.Buffer // the handler serializes its writes; read once run has returned
	if err := run(ctx, testConfig(), slog.New(slog.NewTextHandler(&log, nil))); err != nil {
		t.Errorf("run: %v\n%s", err, log.String())
	}
	if !strings.Contains(log.String(), "daemon: stopped") {
		t.Errorf("no stop line in the log:\n%s", log.String())
	}
}

// On PostgreSQL, two replicas on separate pools over one schema share the index, the
// watch lists and the plans: both do work, neither unschedules the other's sources, and
// both stop cleanly with nothing left claimed. The test needs a server (see pgtest); under
// CI=true it fails without one.
func TestDaemonTwoReplicasOnPostgres(t *testing.T) {
	schema := pgtest.Schema(t, "rota_daemon")
	cfg := testConfig()
	cfg.dbURL, cfg.schema = pgtest.URL(), schema
	var all []stores
	for range 2 {
		st, err := openStores(context.Background(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		defer st.close()
		all = append(all, st)
	}
	reps, started := runReplicas(t, all...)
	for i, r := range reps {
		cycles, ended := r.svc.totals()
		t.Logf("replica %d: %d cycles, items %v", i, cycles, ended)
	}
	checkStopped(t, reps)
	for i, r := range reps {
		if _, ended := r.svc.totals(); ended[bridge.StatusRemoved] > 0 {
			t.Errorf("replica %d removed %d sources the other had watched: the watch list is not shared", i, ended[bridge.StatusRemoved])
		}
	}
	checkClean(t, all[0].index, reps[0].svc.tenants, started)
}

// A bad schema name is refused before anything runs.
func TestDaemonRefusesABadSchema(t *testing.T) {
	cfg := testConfig()
	cfg.dbURL, cfg.schema = "postgres://127.0.0.1:1/none", "pg_catalog"
	if _, err := openStores(context.Background(), cfg); err == nil || !strings.Contains(err.Error(), "invalid schema") {
		t.Errorf("openStores with schema pg_catalog: %v, want postgres.ErrInvalidSchema", err)
	}
}
