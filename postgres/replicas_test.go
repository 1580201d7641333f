package postgres_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/rotaworks/rota/bridge"
	"github.com/rotaworks/rota/cadence"
	"github.com/rotaworks/rota/dispatch"
	"github.com/rotaworks/rota/duework"
	"github.com/rotaworks/rota/internal/fleettest"
	"github.com/rotaworks/rota/postgres"
	"github.com/rotaworks/rota/postgres/pgtest"
	"github.com/rotaworks/rota/tenancy"
)

// Two replicas as a service deploys them: each its own pool, Runner, Dispatcher and
// Bridge, all over one schema, so that they share the Index, the Watchlist and the
// Entitlements. They run on the real clock, so the tests assert what must hold whatever
// the machine's load (who ran what, and what the index holds afterwards), never how fast.

// replicaLane is the one lane of the replicas: two items per user and ten per cycle.
var replicaLane = dispatch.LaneCapacity{Lane: "free", PerUserLimit: 2, PerCycleLimit: 10}

// fastTier is the cadence of every source: due again 200 ms after each run, hit or miss.
const fastTier = "fast"

// replicaSet is a schema with tenants and their sources, and the replicas run over it.
type replicaSet struct {
	t       *testing.T
	schema  string
	admin   *pgxpool.Pool // the tests' own pool on the schema, for set-up and checks
	tiers   *cadence.Registry
	tenants map[string]tenancy.Context
	sources map[duework.Key]bool
	runs    *fleettest.RunLog
}

func newReplicaSet(t *testing.T) *replicaSet {
	t.Helper()
	s := &replicaSet{t: t, schema: pgtest.Schema(t, "rota_replicas"), tiers: cadence.NewRegistry(),
		tenants: map[string]tenancy.Context{}, sources: map[duework.Key]bool{}}
	s.admin = pgtest.PoolIn(t, s.schema, 2)
	if err := postgres.Migrate(context.Background(), s.admin); err != nil {
		t.Fatal(err)
	}
	if err := s.tiers.Register(fastTier, cadence.Backoff{Base: 200 * time.Millisecond, Max: 200 * time.Millisecond, Factor: 1}); err != nil {
		t.Fatal(err)
	}
	s.runs = fleettest.NewRunLog(t, "replica")
	return s
}

// watch puts user on the free plan and has it watch n sources s000, s001, … in the shared
// Watchlist and Entitlements.
func (s *replicaSet) watch(user string, n int) {
	s.t.Helper()
	ctx := context.Background()
	tc, err := tenancy.NewContext(user)
	if err != nil {
		s.t.Fatal(err)
	}
	s.tenants[user] = tc
	if err := postgres.NewEntitlements(s.admin).SetPlan(ctx, tc, tenancy.PlanFree); err != nil {
		s.t.Fatal(err)
	}
	wl := postgres.NewWatchlist(s.admin)
	for j := range n {
		e := tenancy.WatchlistEntry{UserID: user, Slug: fmt.Sprintf("s%03d", j), Tier: fastTier, AddedAt: time.Now()}
		if err := wl.Add(ctx, tc, e); err != nil {
			s.t.Fatal(err)
		}
		s.sources[duework.Key{UserID: user, WorkKey: e.Slug}] = true
	}
}

// tenantList returns the tenants in ID order.
func (s *replicaSet) tenantList() []tenancy.Context {
	var tcs []tenancy.Context
	for _, id := range slices.Sorted(maps.Keys(s.tenants)) {
		tcs = append(tcs, s.tenants[id])
	}
	return tcs
}

// replica is one replica of the service and how its Run ended.
type replica struct {
	id     int
	idx    duework.Index // what its Dispatcher and Bridge use
	bridge *bridge.Bridge
	runner *bridge.Runner
	logs   *bytes.Buffer // written through slog's handler, which serializes; read after Run
	err    error

	mu      sync.Mutex
	reports []bridge.CycleReport
}

// newReplica builds replica id on a pool of its own: the postgres Index (passed through
// wrap when it is not nil), Watchlist and Entitlements over the shared schema, PlanLanes,
// a Dispatcher with one lane and a Runner whose pipeline records each run in s.runs,
// calling hold, when not nil, inside each run.
func (s *replicaSet) newReplica(id int, cfg bridge.RunnerConfig, wrap func(*postgres.Index) duework.Index, hold fleettest.Hold) *replica {
	s.t.Helper()
	pool := pgtest.PoolIn(s.t, s.schema, 4)
	r := &replica{id: id, logs: &bytes.Buffer{}}
	pidx := postgres.NewIndex(pool)
	r.idx = pidx
	if wrap != nil {
		r.idx = wrap(pidx)
	}
	lanes := []dispatch.LaneCapacity{replicaLane}
	laneFor, err := bridge.PlanLanes(postgres.NewEntitlements(pool), map[tenancy.PlanID]dispatch.Lane{tenancy.PlanFree: replicaLane.Lane}, lanes)
	if err != nil {
		s.t.Fatal(err)
	}
	// A minute's hold: a dispatch the stop test keeps waiting in Claim must not see its
	// users taken by the other replica, however slow the machine.
	d, err := dispatch.New(r.idx, dispatch.Config{Lanes: lanes, GlobalBatchLimit: replicaLane.PerCycleLimit, LaneFor: laneFor,
		ClaimFor: time.Minute, HoldFor: time.Minute, RetryAfter: 2 * time.Minute})
	if err != nil {
		s.t.Fatal(err)
	}
	r.bridge = &bridge.Bridge{Index: r.idx, Watchlist: postgres.NewWatchlist(pool), Pipeline: s.runs.Pipeline(id, hold), Tiers: s.tiers}
	// The noisy-neighbour alarm is off: on a loaded machine a lane's wait passes ten short
	// Intervals, and its Warn line would hide one about the stop.
	cfg.AlarmAfter = -1
	cfg.Logger = slog.New(slog.NewTextHandler(r.logs, nil))
	cfg.Observer = cycleObserver(func(rep bridge.CycleReport) {
		r.mu.Lock()
		defer r.mu.Unlock()
		r.reports = append(r.reports, rep)
	})
	if r.runner, err = bridge.NewRunner(r.bridge, d, cfg); err != nil {
		s.t.Fatal(err)
	}
	return r
}

// cycles returns the reports of the replica's cycles so far.
func (r *replica) cycles() []bridge.CycleReport {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.reports)
}

// start runs each replica's Run in a goroutine under ctx, replica i starting i/len of
// interval after the first so that their cycles interleave as those of replicas deployed
// together do. The returned function waits until every Run has returned.
func startReplicas(ctx context.Context, interval time.Duration, reps ...*replica) (wait func()) {
	var wg sync.WaitGroup
	for i, r := range reps {
		wg.Go(func() {
			offset := time.NewTimer(time.Duration(i) * interval / time.Duration(len(reps)))
			defer offset.Stop()
			select {
			case <-offset.C:
			case <-ctx.Done():
			}
			r.err = r.runner.Run(ctx)
		})
	}
	return wg.Wait
}

// checkStoppedCleanly checks what a clean stop leaves: every Run returned nil and logged
// nothing above Info, and no entry of the schema is claimed.
func (s *replicaSet) checkStoppedCleanly(reps ...*replica) {
	s.t.Helper()
	for _, r := range reps {
		if r.err != nil {
			s.t.Errorf("replica %d: Run = %v, want nil after a clean stop", r.id, r.err)
		}
		if logs := r.logs.Bytes(); bytes.Contains(logs, []byte("level=WARN")) || bytes.Contains(logs, []byte("level=ERROR")) ||
			!bytes.Contains(logs, []byte(`msg="rota: runner stopped"`)) {
			s.t.Errorf("replica %d: a clean stop logs only Info lines, the last that the runner stopped:\n%s", r.id, logs)
		}
	}
	var claimed int
	if err := s.admin.QueryRow(context.Background(), `SELECT count(*) FROM rota_due WHERE claim_until IS NOT NULL`).Scan(&claimed); err != nil {
		s.t.Fatal(err)
	}
	if claimed != 0 {
		s.t.Errorf("%d entries left claimed after both replicas stopped", claimed)
	}
}

// checkNothingLost checks every source against the runs recorded: its entry is still
// scheduled, and since every run is a miss that advances the streak by one, its streak is
// the number of times it ran — each run's completion written exactly once, a released
// item's claim handed back without a change.
func (s *replicaSet) checkNothingLost() {
	s.t.Helper()
	ctx := context.Background()
	idx := postgres.NewIndex(s.admin)
	counts := s.runs.Written()
	for k := range s.sources {
		e, err := idx.Get(ctx, s.tenants[k.UserID], k.WorkKey)
		if err != nil {
			s.t.Errorf("%s/%s: %v", k.UserID, k.WorkKey, err)
			continue
		}
		if e.MissStreak != counts[k] {
			s.t.Errorf("%s/%s: streak %d after %d runs", k.UserID, k.WorkKey, e.MissStreak, counts[k])
		}
	}
}

// Two replicas run for a while on the real clock over one schema, thirty quiet tenants
// with two sources each and one noisy tenant with a hundred and fifty, every source due
// again 200 ms after it runs — more than the replicas' lane serves, so each cycle must
// choose. Afterwards: every source ran; no two runs of one source overlapped, and no claim
// ran twice; each replica did at least a quarter of the runs; the quiet tenants were
// served alike (Jain's index over their run counts ≥ 0.9: round robin in turn order gives
// each ready tenant its turn, so their counts differ by the few runs that phase and the
// stop cut, while an order that favoured some tenants would leave others far behind); in
// no cycle did the noisy tenant get more than the lane's per-user limit; and after the
// stop nothing is claimed and every run's completion is in the index.
func TestTwoReplicasShareTheWork(t *testing.T) {
	t.Parallel()
	const quiet, noisySources = 30, 150
	s := newReplicaSet(t)
	for i := range quiet {
		s.watch(fmt.Sprintf("quiet%02d", i), 2)
	}
	s.watch("noisy", noisySources)
	allRan := s.runs.Ran(len(s.sources))

	cfg := bridge.RunnerConfig{Interval: 20 * time.Millisecond, Workers: 8}
	a, b := s.newReplica(0, cfg, nil, nil), s.newReplica(1, cfg, nil, nil)
	// Start-up as each replica does it: sync every tenant, which schedules each source
	// within its tier's base interval. The second sync finds everything scheduled.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for i, r := range []*replica{a, b} {
		added, err := r.bridge.SyncAll(ctx, time.Now())
		if want := len(s.sources) * (1 - i); added != want || err != nil {
			t.Fatalf("replica %d's sync added %d, %v; want %d", i, added, err, want)
		}
	}
	wait := startReplicas(ctx, cfg.Interval, a, b)
	// Run for two seconds and until every source has run, whichever is later; a minute
	// bounds a hang.
	minimum, bound := time.NewTimer(2*time.Second), time.NewTimer(time.Minute)
	defer bound.Stop()
	for pending := 2; pending > 0; pending-- {
		select {
		case <-minimum.C:
		case <-allRan:
		case <-bound.C:
			cancel()
			wait()
			t.Fatalf("after a minute %d of %d sources had run", len(s.runs.Written()), len(s.sources))
		}
	}
	cancel()
	wait()
	s.checkStoppedCleanly(a, b)
	s.checkNothingLost()

	runs := s.runs.All()
	s.runs.CheckEachRanAlone(s.sources)
	perReplica, perQuiet := [2]int{}, make([]int, quiet)
	for _, r := range runs {
		perReplica[r.Runner]++
		var i int
		if _, err := fmt.Sscanf(r.Key.UserID, "quiet%02d", &i); err == nil {
			perQuiet[i]++
		}
	}
	for i, n := range perReplica {
		if 4*n < len(runs) {
			t.Errorf("replica %d did %d of %d runs, less than a quarter", i, n, len(runs))
		}
	}
	if j := fleettest.Jain(perQuiet); j < 0.9 {
		t.Errorf("Jain's index over the quiet tenants' runs = %.3f, want ≥ 0.9; runs per tenant %v", j, perQuiet)
	}
	cycles := checkCycles(t, a, b)
	t.Logf("%d runs in %d cycles: replica 0 %d, replica 1 %d; runs per quiet tenant %v (Jain %.3f)",
		len(runs), cycles, perReplica[0], perReplica[1], perQuiet, fleettest.Jain(perQuiet))
}

// checkCycles checks the replicas' cycle reports together: no claim ran twice, and in no
// cycle did one user get more than the lane's per-user limit. It returns the number of
// cycles.
func checkCycles(t *testing.T, reps ...*replica) (cycles int) {
	t.Helper()
	type claim struct {
		key   duework.Key
		token uint64
	}
	ran := map[claim]bool{}
	for _, r := range reps {
		for _, rep := range r.cycles() {
			cycles++
			perUser := map[string]int{}
			for _, it := range rep.Items {
				c := it.Item.Claim
				perUser[c.Entry.UserID]++
				if it.Status != bridge.StatusHit && it.Status != bridge.StatusMiss {
					continue
				}
				id := claim{duework.Key{UserID: c.Entry.UserID, WorkKey: c.Entry.WorkKey}, c.Token}
				if ran[id] {
					t.Errorf("%s/%s: claim %d ran twice", id.key.UserID, id.key.WorkKey, id.token)
				}
				ran[id] = true
			}
			for u, n := range perUser {
				if n > replicaLane.PerUserLimit {
					t.Errorf("replica %d, cycle at %v: %s got %d items, over the limit of %d", r.id, rep.Now, u, n, replicaLane.PerUserLimit)
				}
			}
		}
	}
	return cycles
}

// claimHold holds a replica's second Index.Claim — a dispatch under way after the first
// cycle's items have started — until the test opens it.
type claimHold struct {
	*postgres.Index
	mu      sync.Mutex
	calls   int
	entered chan struct{} // closed when the held Claim is reached
	open    chan struct{}
}

func (h *claimHold) Claim(ctx context.Context, keys []duework.Key, now, until time.Time) ([]duework.Claim, error) {
	h.mu.Lock()
	h.calls++
	held := h.calls == 2
	h.mu.Unlock()
	if held {
		close(h.entered)
		select {
		case <-h.open:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return h.Index.Claim(ctx, keys, now, until)
}

// Two replicas stop mid-cycle, as a rolling deploy stops them: their Run contexts end
// while each has items of its first cycle running and its next dispatch inside
// Index.Claim. Each dispatch finishes its claim and hands those items back unstarted, the
// running items finish and are written, Run returns nil, no entry is left claimed, and
// nothing is lost: every source is still scheduled, changed only by the runs recorded.
func TestTwoReplicasStopMidCycle(t *testing.T) {
	t.Parallel()
	s := newReplicaSet(t)
	// Thirty tenants, so that each of the four dispatches reads ten of its own: one that
	// waits in Claim holds the users it read from the other replica.
	for i := range 30 {
		s.watch(fmt.Sprintf("user%02d", i), 2)
	}
	ctx := context.Background()
	idx := postgres.NewIndex(s.admin)
	due := time.Now()
	for k := range s.sources {
		if err := idx.Schedule(ctx, s.tenants[k.UserID], duework.Entry{UserID: k.UserID, WorkKey: k.WorkKey, Tier: fastTier, DueAt: due}); err != nil {
			t.Fatal(err)
		}
	}

	release := make(chan struct{}) // ends the runs of the first cycles
	cfg := bridge.RunnerConfig{Interval: 20 * time.Millisecond, Workers: 16, ShutdownTimeout: time.Minute}
	var holds [2]*claimHold
	var reps [2]*replica
	started := [2]chan struct{}{make(chan struct{}, 100), make(chan struct{}, 100)}
	for i := range reps {
		holds[i] = &claimHold{entered: make(chan struct{}), open: make(chan struct{})}
		reps[i] = s.newReplica(i, cfg, func(x *postgres.Index) duework.Index {
			holds[i].Index = x
			return holds[i]
		}, func(context.Context, duework.Key) bool {
			started[i] <- struct{}{}
			<-release
			return false
		})
	}
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	wait := startReplicas(runCtx, cfg.Interval, reps[0], reps[1])
	for i := range reps {
		await(t, started[i], fmt.Sprintf("replica %d's first items to run", i))
		await(t, holds[i].entered, fmt.Sprintf("replica %d's second dispatch to claim", i))
	}
	stop()
	for _, h := range holds {
		close(h.open)
	}
	close(release)
	wait()
	s.checkStoppedCleanly(reps[0], reps[1])
	s.checkNothingLost()

	for _, r := range reps {
		var ran, released int
		for _, rep := range r.cycles() {
			ran += rep.Hits + rep.Misses
			released += rep.Released
			if rep.Errors+rep.LostClaims+rep.Late > 0 || len(rep.FlushErrs) > 0 {
				t.Errorf("replica %d, cycle at %v: %d errors, %d lost claims, %d late, flush errors %v", r.id, rep.Now, rep.Errors, rep.LostClaims, rep.Late, rep.FlushErrs)
			}
		}
		if ran == 0 || released == 0 {
			t.Errorf("replica %d ran %d items and released %d; want items in flight and a dispatch under way at the stop", r.id, ran, released)
		}
	}
	if n := len(s.runs.All()); n == 0 || n == len(s.sources) {
		t.Errorf("%d of %d sources ran; want the stop to cut the work short", n, len(s.sources))
	}
}

// await returns the next value from ch, failing the test if none comes within a minute (a
// bound on a hang, not a wait: the value normally comes within milliseconds).
func await[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(time.Minute):
		t.Fatalf("timed out waiting for %s", what)
		panic("unreachable")
	}
}

// cycleObserver adapts a function to a bridge.Observer.
type cycleObserver func(bridge.CycleReport)

func (f cycleObserver) ObserveCycle(rep bridge.CycleReport) { f(rep) }
