package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/rotaworks/rota/bridge"
	"github.com/rotaworks/rota/duework"
	"github.com/rotaworks/rota/maintenance"
	"github.com/rotaworks/rota/postgres"
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

// tally is an Observer that counts a daemon's cycles and the items they ended, by status.
type tally struct {
	mu     sync.Mutex
	cycles int
	ended  map[bridge.ItemStatus]int
}

func (t *tally) ObserveCycle(rep bridge.CycleReport) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.ended == nil {
		t.ended = map[bridge.ItemStatus]int{}
	}
	t.cycles++
	for _, it := range rep.Items {
		t.ended[it.Status]++
	}
}

// totals returns the cycles counted and the items ended, by status.
func (t *tally) totals() (cycles int, ended map[bridge.ItemStatus]int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.cycles, maps.Clone(t.ended)
}

// demoTenants are the tenants cfg's daemon adds.
func demoTenants(t *testing.T, cfg config) []tenancy.Context {
	t.Helper()
	tcs := make([]tenancy.Context, cfg.tenants)
	for i := range tcs {
		tc, err := tenancy.NewContext(demoTenant(i))
		if err != nil {
			t.Fatal(err)
		}
		tcs[i] = tc
	}
	return tcs
}

// replica is one daemon under test: its stores, what its cycles did, its log, and how
// its run ended. The log's handler serializes its writes; the test reads it once the run
// has returned.
type replica struct {
	st    stores
	tally *tally
	log   *bytes.Buffer
	err   error
}

// runReplicas serves one daemon per stores, each with its own holder, on the real clock
// until runFor has passed, as SIGTERM would stop them, and returns them when every run
// has returned. Replicas deployed together start at different moments, so their cycles
// interleave; here replica i starts i/len(all) of an interval after the first.
func runReplicas(t *testing.T, all ...stores) ([]*replica, time.Time) {
	t.Helper()
	reps := make([]*replica, len(all))
	for i, st := range all {
		reps[i] = &replica{st: st, tally: &tally{}, log: &bytes.Buffer{}}
	}
	started := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), runFor)
	defer cancel()
	var wg sync.WaitGroup
	for i, r := range reps {
		cfg := testConfig()
		cfg.holder, cfg.observer = fmt.Sprintf("replica-%d", i), r.tally
		wg.Go(func() {
			offset := time.NewTimer(time.Duration(i) * cfg.interval / time.Duration(len(reps)))
			defer offset.Stop()
			select {
			case <-offset.C:
				r.err = serve(ctx, cfg, r.st, slog.New(slog.NewTextHandler(r.log, nil)))
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
			t.Errorf("replica %d: serve returned %v, want nil after a clean stop\n%s", i, r.err, r.log)
		}
		cycles, ended := r.tally.totals()
		if ran := ended[bridge.StatusHit] + ended[bridge.StatusMiss]; ran == 0 {
			t.Errorf("replica %d: %d cycles ran no item: %v\n%s", i, cycles, ended, r.log)
		}
		if n := ended[bridge.StatusError]; n > 0 {
			t.Errorf("replica %d: %d items failed\n%s", i, n, r.log)
		}
		log := r.log.String()
		for _, want := range []string{"rota: runner started", "rota: cycle", "maintenance: poll", "rota: runner stopped"} {
			if !strings.Contains(log, want) {
				t.Errorf("replica %d: no %q in the log:\n%s", i, want, log)
			}
		}
		if strings.Contains(log, "level=WARN") || strings.Contains(log, "level=ERROR") {
			t.Errorf("replica %d: a warning or an error in the log of a clean run:\n%s", i, log)
		}
	}
}

// checkTasks checks that every task of names has run and succeeded, by the StateStore.
func checkTasks(t *testing.T, state maintenance.StateStore, names ...string) {
	t.Helper()
	snap, err := state.Load(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	outcomes := map[string]maintenance.Outcome{}
	for _, s := range snap.States {
		outcomes[s.Name] = s.LastOutcome
	}
	for _, name := range names {
		if outcomes[name] != maintenance.OutcomeSucceeded {
			t.Errorf("maintenance task %q: last outcome %q, want %q (states: %v)", name, outcomes[name], maintenance.OutcomeSucceeded, outcomes)
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
		for _, slug := range demoSources {
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

// In memory, the daemon runs items and its maintenance task on the real clock and stops
// cleanly when its context ends: serve returns nil and nothing is left claimed.
func TestDaemonInMemory(t *testing.T) {
	st, err := openStores(context.Background(), testConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer st.close()
	reps, started := runReplicas(t, st)
	checkStopped(t, reps)
	tenants := demoTenants(t, testConfig())
	checkClean(t, st.index, tenants, started)
	checkTasks(t, st.state, pruneTask.Name)

	// The check sees a claim: one taken now is left.
	now := time.Now()
	claims, err := st.index.Claim(context.Background(), []duework.Key{{UserID: tenants[0].UserID(), WorkKey: "jobs"}}, now.Add(time.Minute), now.Add(time.Hour))
	if err != nil || len(claims) != 1 {
		t.Fatalf("claiming one entry: %v, %v", claims, err)
	}
	if left, err := leftClaimed(st.index, tenants, started); left != 1 || err != nil {
		t.Errorf("with one entry claimed, leftClaimed = %d, %v; want 1", left, err)
	}
}

// TestMain runs main instead of the tests when DAEMON_TEST_MAIN is set, with the flags in
// DAEMON_TEST_ARGS, so that a test can run the daemon as a process of its own.
func TestMain(m *testing.M) {
	if os.Getenv("DAEMON_TEST_MAIN") == "1" {
		os.Args = append([]string{"daemon"}, strings.Fields(os.Getenv("DAEMON_TEST_ARGS"))...)
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// startMain starts the daemon as a process with args and returns it once its log holds
// until, with the log, which Wait completes.
func startMain(t *testing.T, args, until string) (*exec.Cmd, *syncBuffer) {
	t.Helper()
	log := &syncBuffer{}
	seen := make(chan struct{})
	var once sync.Once
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), "DAEMON_TEST_MAIN=1", "DAEMON_TEST_ARGS="+args)
	cmd.Stderr = writerFunc(func(p []byte) (int, error) {
		n, err := log.Write(p)
		if strings.Contains(log.String(), until) {
			once.Do(func() { close(seen) })
		}
		return n, err
	})
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-seen:
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("the daemon logged no %q within 30 s:\n%s", until, log.String())
	}
	return cmd, log
}

// writerFunc is a function as an io.Writer.
type writerFunc func(p []byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// The daemon as a process: SIGTERM stops it cleanly, and it exits 0 saying so.
func TestMainStopsOnSIGTERM(t *testing.T) {
	cmd, log := startMain(t, "-tenants 3 -interval 100ms", "rota: cycle")
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Errorf("after SIGTERM the daemon exited with %v, want 0\n%s", err, log.String())
	}
	for _, want := range []string{"daemon: starting", "rota: runner stopped", "daemon: stopped"} {
		if !strings.Contains(log.String(), want) {
			t.Errorf("no %q in the log:\n%s", want, log.String())
		}
	}
	if strings.Contains(log.String(), "level=ERROR") {
		t.Errorf("an error in the log of a clean stop:\n%s", log.String())
	}
}

// A daemon that cannot start one of its parts exits 1, saying why.
func TestMainExitsOnAFailure(t *testing.T) {
	cmd, log := startMain(t, "-tenants 1 -http 127.0.0.1:-1", "daemon: stopped")
	err := cmd.Wait()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 {
		t.Errorf("with a bad -http the daemon exited with %v, want exit status 1\n%s", err, log.String())
	}
	if !strings.Contains(log.String(), "level=ERROR") || !strings.Contains(log.String(), "daemon: -http") {
		t.Errorf("the log does not say why it stopped:\n%s", log.String())
	}
}

// An -http address that cannot be listened on makes serve return that error at once,
// before any loop starts.
func TestServeStopsOnAFailure(t *testing.T) {
	cfg := testConfig()
	cfg.httpAddr = "127.0.0.1:-1"
	st, err := openStores(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer st.close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var log syncBuffer
	err = serve(ctx, cfg, st, slog.New(slog.NewTextHandler(&log, nil)))
	if err == nil || !strings.Contains(err.Error(), "daemon: -http") || ctx.Err() != nil {
		t.Errorf("serve with a bad -http = %v (ctx %v); want the listen error at once", err, ctx.Err())
	}
	if strings.Contains(log.String(), "rota: runner started") {
		t.Errorf("the Runner started although the pages could not be served:\n%s", log.String())
	}
}

// A bad knob is refused before anything runs, with every bad knob named: a claim of no
// length (the Dispatcher's) and a 1 ns interval (the Runner's).
func TestServeRefusesABadConfig(t *testing.T) {
	cfg := testConfig()
	cfg.claimFor, cfg.interval = 0, time.Nanosecond
	st, err := openStores(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer st.close()
	var log syncBuffer
	err = serve(context.Background(), cfg, st, slog.New(slog.NewTextHandler(&log, nil)))
	if err == nil || !strings.Contains(err.Error(), "ClaimFor") || !strings.Contains(err.Error(), "Interval") {
		t.Errorf("serve with ClaimFor 0 and Interval 1ns = %v; want both refused", err)
	}
	if log.String() != "" {
		t.Errorf("serve logged before it refused its config:\n%s", log.String())
	}
}

// On PostgreSQL, two replicas on separate pools over one schema share the index, the
// watch lists, the plans and the maintenance state: both do work, neither unschedules
// the other's sources, the maintenance tasks (the queue vacuum among them) run, and both
// stop cleanly with nothing left claimed. The test needs a server (see pgtest); under
// CI=true it fails without one.
func TestDaemonTwoReplicasOnPostgres(t *testing.T) {
	schema := pgtest.Schema(t, "rota_daemon")
	cfg := testConfig()
	cfg.dbURL, cfg.schema = pgtest.URL(), schema
	checkTwoReplicas(t, cfg, pruneTask.Name, postgres.QueueVacuumTaskName)
}

// checkTwoReplicas runs two replicas over the shared stores cfg opens and checks that both
// do work, neither unschedules the other's sources, the maintenance tasks named run, and
// both stop cleanly with nothing left claimed.
func checkTwoReplicas(t *testing.T, cfg config, tasks ...string) {
	t.Helper()
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
		cycles, ended := r.tally.totals()
		t.Logf("replica %d: %d cycles, items %v", i, cycles, ended)
	}
	checkStopped(t, reps)
	for i, r := range reps {
		if _, ended := r.tally.totals(); ended[bridge.StatusRemoved] > 0 {
			t.Errorf("replica %d removed %d sources the other had watched: the watch list is not shared", i, ended[bridge.StatusRemoved])
		}
	}
	checkClean(t, all[0].index, demoTenants(t, cfg), started)
	checkTasks(t, all[0].state, tasks...)
}

// On PostgreSQL an entry scheduled due now, by any process over the schema, wakes the
// daemon's Runner: with an interval of an hour, the entry is dispatched within seconds.
func TestDaemonWakesOnDueOnPostgres(t *testing.T) {
	schema := pgtest.Schema(t, "rota_daemon")
	cfg := testConfig()
	cfg.dbURL, cfg.schema, cfg.tenants, cfg.interval = pgtest.URL(), schema, 1, time.Hour
	st, err := openStores(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer st.close()
	other, err := openStores(context.Background(), cfg) // another replica's, or the host's
	if err != nil {
		t.Fatal(err)
	}
	defer other.close()
	cycles := make(chan bridge.CycleReport, 16)
	cfg.observer = cycleObserver(func(rep bridge.CycleReport) { cycles <- rep })
	ctx, cancel := context.WithCancel(context.Background())
	var log syncBuffer
	done := make(chan error, 1)
	go func() { done <- serve(ctx, cfg, st, slog.New(slog.NewTextHandler(&log, nil))) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v\n%s", err, log.String())
		}
	}()
	timeout := time.After(30 * time.Second)
	select {
	case <-cycles: // the first cycle, at start-up; the next would come in an hour
	case <-timeout:
		t.Fatalf("no first cycle\n%s", log.String())
	}
	tc := demoTenants(t, cfg)[0]
	now := time.Now()
	if err := other.watchlist.Add(ctx, tc, tenancy.WatchlistEntry{UserID: tc.UserID(), Slug: "urgent", Tier: "dev", AddedAt: now}); err != nil {
		t.Fatal(err)
	}
	// The ListenDue connection may not be listening yet when the first cycle ends: keep
	// scheduling the entry due now until a cycle dispatches it.
	for {
		if err := other.index.Schedule(ctx, tc, duework.Entry{UserID: tc.UserID(), WorkKey: "urgent", Tier: "dev", DueAt: time.Now()}); err != nil {
			t.Fatal(err)
		}
		select {
		case rep := <-cycles:
			for _, it := range rep.Items {
				if it.Item.Claim.Entry.WorkKey == "urgent" {
					return
				}
			}
		case <-time.After(time.Second):
		case <-timeout:
			t.Fatalf("the entry due now was not dispatched within 30 s, with an interval of an hour\n%s", log.String())
		}
	}
}

// A bad schema name is refused before anything runs.
func TestDaemonRefusesABadSchema(t *testing.T) {
	cfg := testConfig()
	cfg.dbURL, cfg.schema = "postgres://127.0.0.1:1/none", "pg_catalog"
	if _, err := openStores(context.Background(), cfg); err == nil || !strings.Contains(err.Error(), "invalid schema") {
		t.Errorf("openStores with schema pg_catalog: %v, want postgres.ErrInvalidSchema", err)
	}
}

// cycleObserver adapts a function to a bridge.Observer.
type cycleObserver func(bridge.CycleReport)

func (f cycleObserver) ObserveCycle(rep bridge.CycleReport) { f(rep) }
