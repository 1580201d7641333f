package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"

	"github.com/rotaworks/rota/bridge"
	"github.com/rotaworks/rota/dispatch"
	"github.com/rotaworks/rota/duework"
	"github.com/rotaworks/rota/postgres"
	"github.com/rotaworks/rota/postgres/pgtest"
	"github.com/rotaworks/rota/tenancy"
)

// pgConns is the pool size of every benchmark, rota's and River's alike.
const pgConns = 16

// rotaPool returns a pool of pgConns connections on a fresh schema of its own
// (bench_rota_…), migrated with postgres.Migrate and dropped when tb ends.
func rotaPool(tb testing.TB) *pgxpool.Pool {
	tb.Helper()
	pool := pgtest.PoolIn(tb, pgtest.Schema(tb, "bench_rota"), pgConns)
	if err := postgres.Migrate(context.Background(), pool); err != nil {
		tb.Fatal(err)
	}
	return pool
}

// completeAll completes every item with its next due time next(item) as the bridge's
// Runner writes completions: pgConns workers take the items, each adding its completion
// to a shared batch; once 100 wait, one Index.CompleteMany writes
// them while the workers go on adding, and what came meanwhile goes in the next call, one
// call in flight at a time; the rest is written when the items run out.
func completeAll(ctx context.Context, idx duework.Index, items []dispatch.Item, tcs map[string]tenancy.Context, next func(duework.Entry) duework.Entry) error {
	var (
		wg, writes sync.WaitGroup
		mu         sync.Mutex
		batch      []duework.Done
		writing    bool // a CompleteMany is in flight
		ended      bool // every completion has been added
		errs       []error
	)
	// startWrite starts writing the batch when it is due and no write is in flight; mu
	// must be held. The write goes on with what comes meanwhile while that is due.
	var startWrite func()
	startWrite = func() {
		if writing || len(batch) == 0 || (len(batch) < 100 && !ended) {
			return
		}
		writing = true
		done := batch
		batch = nil
		writes.Go(func() {
			outcomes, err := idx.CompleteMany(ctx, done)
			mu.Lock()
			defer mu.Unlock()
			errs = append(append(errs, err), outcomes...)
			writing = false
			startWrite()
		})
	}
	work := make(chan dispatch.Item)
	for range pgConns {
		wg.Go(func() {
			for it := range work {
				e := it.Claim.Entry
				mu.Lock()
				batch = append(batch, duework.Done{Tenant: tcs[e.UserID], Claim: it.Claim, Next: next(e)})
				startWrite()
				mu.Unlock()
			}
		})
	}
	for _, it := range items {
		work <- it
	}
	close(work)
	wg.Wait()
	mu.Lock()
	ended = true
	startWrite()
	mu.Unlock()
	writes.Wait()
	return errors.Join(errs...)
}

func contexts(tb testing.TB, users []string) map[string]tenancy.Context {
	tb.Helper()
	tcs := make(map[string]tenancy.Context, len(users))
	for _, u := range users {
		tc, err := tenancy.NewContext(u)
		if err != nil {
			tb.Fatal(err)
		}
		tcs[u] = tc
	}
	return tcs
}

// pgBatch is how many items one rota cycle hands out and how many jobs River works at once
// (its MaxWorkers, the most one fetch takes).
const pgBatch = 1000

func oneLane(perUser int) dispatch.Config {
	return dispatch.Config{
		Lanes:            []dispatch.LaneCapacity{{Lane: "all", PerUserLimit: perUser, PerCycleLimit: pgBatch}},
		GlobalBatchLimit: pgBatch,
		LaneFor:          func(context.Context, string) (dispatch.Lane, error) { return "all", nil },
		ClaimFor:         time.Minute,
	}
}

// newRotaRunner watches perUser sources for each of users in the postgres Watchlist of
// pool, schedules them with bridge.SyncTenants at t0 (due within the "hot" tier's base
// interval) and returns a Runner over them with a no-op pipeline: every run is a miss,
// and "hot" backs off to an hour at most. Its dispatcher is oneLane(10) over the postgres
// Index; it has pgBatch workers, as River's client has MaxWorkers pgBatch, so both sides
// work up to pgBatch jobs at once over pgConns connections; and the default batched
// completion. cfg may set the Runner's Clock and Observer.
func newRotaRunner(tb testing.TB, pool *pgxpool.Pool, users []string, perUser int, cfg bridge.RunnerConfig) *bridge.Runner {
	tb.Helper()
	ctx := context.Background()
	byUser := contexts(tb, users)
	tcs := make([]tenancy.Context, len(users))
	for i, u := range users {
		tcs[i] = byUser[u]
	}
	// Watch on pgConns connections at once: 10,000 single-row Adds take about a second.
	wl := postgres.NewWatchlist(pool)
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
	)
	work := make(chan tenancy.WatchlistEntry)
	for range pgConns {
		wg.Go(func() {
			for e := range work {
				if err := wl.Add(ctx, byUser[e.UserID], e); err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
				}
			}
		})
	}
	for _, u := range users {
		for j := range perUser {
			work <- tenancy.WatchlistEntry{UserID: u, Slug: fmt.Sprintf("w%05d", j), Tier: "hot", AddedAt: t0}
		}
	}
	close(work)
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		tb.Fatal(err)
	}
	idx := postgres.NewIndex(pool)
	noop := bridge.PipelineFunc(func(context.Context, tenancy.Context, tenancy.WatchlistEntry) (bridge.Result, error) {
		return bridge.Result{}, nil
	})
	br := &bridge.Bridge{Index: idx, Watchlist: wl, Pipeline: noop}
	if added, err := br.SyncAll(ctx, t0); err != nil || added != len(users)*perUser {
		tb.Fatalf("SyncAll: added %d of %d: %v", added, len(users)*perUser, err)
	}
	d, err := dispatch.New(idx, oneLane(10))
	if err != nil {
		tb.Fatal(err)
	}
	cfg.Workers, cfg.Logger = pgBatch, discardLogger
	r, err := bridge.NewRunner(br, d, cfg)
	if err != nil {
		tb.Fatal(err)
	}
	return r
}

// aheadClock is the real clock, ahead by ahead nanoseconds.
type aheadClock struct{ ahead atomic.Int64 }

func (c *aheadClock) Now() time.Time { return time.Now().Add(time.Duration(c.ahead.Load())) }

func (c *aheadClock) NewTicker(d time.Duration) (<-chan time.Time, func()) {
	t := time.NewTicker(d)
	return t.C, t.Stop
}

func (c *aheadClock) AfterFunc(d time.Duration, f func()) func() bool {
	return time.AfterFunc(d, f).Stop
}

// observeCycles is a bridge.Observer of f.
type observeCycles func(bridge.CycleReport)

func (f observeCycles) ObserveCycle(rep bridge.CycleReport) { f(rep) }

// workAll runs the ops of BenchmarkClaimComplete's rota-cycle side: each calls cycle at a now
// two hours after the previous op's until it works nothing, and fails unless that makes
// pgJobs items in all. It reports jobs/s.
func workAll(b *testing.B, cycle func(now time.Time) (worked int, err error)) {
	now := t0
	for b.Loop() {
		now = now.Add(2 * time.Hour)
		worked := 0
		for {
			n, err := cycle(now)
			if err != nil {
				b.Fatal(err)
			}
			if n == 0 {
				break
			}
			worked += n
		}
		if worked != pgJobs {
			b.Fatalf("worked %d entries, want %d", worked, pgJobs)
		}
	}
	b.ReportMetric(float64(b.N*pgJobs)/b.Elapsed().Seconds(), "jobs/s")
}

// River's side: one job kind that does nothing but note when it started.

// benchArgs is River's job: Tenant names whose it is.
type benchArgs struct {
	Tenant string `json:"tenant"`
}

func (benchArgs) Kind() string { return "rota_bench" }

// benchWorker does no work. When onStart is set, it is called as each job starts.
type benchWorker struct {
	river.WorkerDefaults[benchArgs]
	onStart func(*river.Job[benchArgs])
}

func (w *benchWorker) Work(_ context.Context, job *river.Job[benchArgs]) error {
	if w.onStart != nil {
		w.onStart(job)
	}
	return nil
}

var discardLogger = slog.New(slog.NewTextHandler(io.Discard, nil))

// riverClient migrates a schema of its own with rivermigrate and returns a client on it
// whose default queue works up to pgBatch jobs at once, and its pool.
func riverClient(tb testing.TB, w *benchWorker, fetchCooldown time.Duration) (*river.Client[pgx.Tx], *pgxpool.Pool) {
	tb.Helper()
	ctx := context.Background()
	schema := pgtest.Schema(tb, "bench_river")
	pool := pgtest.PoolIn(tb, schema, pgConns)
	driver := riverpgxv5.New(pool)
	m, err := rivermigrate.New(driver, &rivermigrate.Config{Schema: schema, Logger: discardLogger})
	if err != nil {
		tb.Fatal(err)
	}
	if _, err := m.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		tb.Fatal(err)
	}
	workers := river.NewWorkers()
	river.AddWorker(workers, w)
	client, err := river.NewClient(driver, &river.Config{
		Schema:        schema,
		Logger:        discardLogger,
		FetchCooldown: fetchCooldown,
		Queues:        map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: pgBatch}},
		Workers:       workers,
	})
	if err != nil {
		tb.Fatal(err)
	}
	return client, pool
}

// insertJobs inserts one job per tenant of tenants, in that order, with River's COPY path.
func insertJobs(tb testing.TB, client *river.Client[pgx.Tx], tenants []string) {
	tb.Helper()
	params := make([]river.InsertManyParams, len(tenants))
	for i, t := range tenants {
		params[i] = river.InsertManyParams{Args: benchArgs{Tenant: t}}
	}
	n, err := client.InsertManyFast(context.Background(), params)
	if err != nil || n != len(tenants) {
		tb.Fatalf("InsertManyFast: %d of %d: %v", n, len(tenants), err)
	}
}

// pgJobs is how many no-op jobs one op of BenchmarkClaimComplete works.
const pgJobs = 10_000

// BenchmarkClaimComplete: one op works pgJobs no-op jobs to completion on the same server
// with the same pool size (pgConns) and the same concurrency (pgBatch workers).
//
// rota: pgJobs watched sources of 100 tenants (100 each) in the postgres adapter's Index
// and Watchlist, worked by a bridge.Runner with a pipeline that does nothing, as a daemon
// runs it: the op starts Runner.Run, with its defaults but for the pgBatch workers, and
// ends when the cycles it reports to its Observer have run pgJobs items — a cycle reports
// once its completions are written — then stops it (not timed). Each cycle dispatches up to
// pgBatch items (PerUserLimit 10), reads their watchlist entries in one Watchlist.GetMany
// while it starts their claims in one Index.StartClaims, runs each item on a worker and
// writes the completions in Index.CompleteMany batches; the next cycle dispatches as soon
// as the items of the last have all started, so it overlaps their writes. The Runner's
// clock runs 2 hours ahead of the previous op's: rescheduling is how rota finishes work,
// so every op finds all pgJobs due again.
//
// rota-cycle: the same Runner driven one Runner.Cycle at a time until a cycle hands out
// nothing: each cycle's writes end before the next dispatch begins.
//
// rota-dispatch: the same work without the Runner — Dispatch, then completeAll writes the
// completions as the Runner batches them: the index's own cost.
//
// river: pgJobs jobs inserted with InsertManyFast while the client is stopped (not timed);
// the op starts the client (MaxWorkers pgBatch) and ends when the last job_completed event
// arrives — River emits it once the completion is written — then stops the client (not
// timed). River's default FetchCooldown is 100 ms between fetches; the cooldown=1ms variant
// is River tuned for throughput.
func BenchmarkClaimComplete(b *testing.B) {
	users := make([]string, 100)
	for i := range users {
		users[i] = fmt.Sprintf("user%03d", i)
	}
	perUser := pgJobs / len(users)
	b.Run("rota", func(b *testing.B) {
		clk := &aheadClock{}
		var worked atomic.Int64
		all := make(chan struct{}, 1)
		obs := observeCycles(func(rep bridge.CycleReport) {
			if rep.Misses > 0 && worked.Add(int64(rep.Misses)) == pgJobs {
				all <- struct{}{}
			}
		})
		r := newRotaRunner(b, rotaPool(b), users, perUser, bridge.RunnerConfig{Clock: clk, Observer: obs})
		var elapsed time.Duration
		for range b.N {
			clk.ahead.Add(int64(2 * time.Hour))
			worked.Store(0)
			ctx, cancel := context.WithCancel(context.Background())
			stopped := make(chan error, 1)
			start := time.Now()
			go func() { stopped <- r.Run(ctx) }()
			select {
			case <-all:
			case err := <-stopped:
				b.Fatalf("Run returned %v after %d items", err, worked.Load())
			}
			elapsed += time.Since(start)
			cancel()
			if err := <-stopped; err != nil {
				b.Fatal(err)
			}
			if n := worked.Load(); n != pgJobs {
				b.Fatalf("worked %d items, want %d", n, pgJobs)
			}
		}
		b.ReportMetric(elapsed.Seconds()*1e9/float64(b.N), "ns/op")
		b.ReportMetric(float64(b.N*pgJobs)/elapsed.Seconds(), "jobs/s")
	})
	b.Run("rota-cycle", func(b *testing.B) {
		r := newRotaRunner(b, rotaPool(b), users, perUser, bridge.RunnerConfig{})
		workAll(b, func(now time.Time) (int, error) {
			rep, err := r.Cycle(context.Background(), now)
			if err == nil && rep.Misses != rep.Dispatched {
				err = fmt.Errorf("cycle at %v: %d items dispatched, %d ran", now, rep.Dispatched, rep.Misses)
			}
			return rep.Misses, err
		})
	})
	b.Run("rota-dispatch", func(b *testing.B) {
		ctx := context.Background()
		pool := rotaPool(b)
		pgtest.LoadDue(b, pool, users, slices.Repeat([]int{perUser}, len(users)), func(int) time.Time { return t0 })
		tcs := contexts(b, users)
		idx := postgres.NewIndex(pool)
		d, err := dispatch.New(idx, oneLane(10))
		if err != nil {
			b.Fatal(err)
		}
		workAll(b, func(now time.Time) (int, error) {
			batch, err := d.Dispatch(ctx, now)
			if err != nil {
				return 0, err
			}
			next := func(e duework.Entry) duework.Entry {
				e.LastRunAt, e.DueAt = now, now.Add(time.Hour)
				return e
			}
			return len(batch.Items), completeAll(ctx, idx, batch.Items, tcs, next)
		})
	})
	for _, v := range []struct {
		name     string
		cooldown time.Duration
	}{{"river", 0}, {"river-cooldown=1ms", time.Millisecond}} {
		b.Run(v.name, func(b *testing.B) {
			ctx := context.Background()
			client, _ := riverClient(b, &benchWorker{}, v.cooldown)
			tenants := make([]string, pgJobs)
			for i := range tenants {
				tenants[i] = fmt.Sprintf("user%03d", i%100)
			}
			var elapsed time.Duration
			for range b.N {
				insertJobs(b, client, tenants)
				events, cancel := client.SubscribeConfig(&river.SubscribeConfig{ChanSize: pgJobs + 100, Kinds: []river.EventKind{river.EventKindJobCompleted}})
				start := time.Now()
				if err := client.Start(ctx); err != nil {
					b.Fatal(err)
				}
				for range pgJobs {
					<-events
				}
				elapsed += time.Since(start)
				cancel()
				if err := client.Stop(ctx); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(elapsed.Seconds()*1e9/float64(b.N), "ns/op")
			b.ReportMetric(float64(b.N*pgJobs)/elapsed.Seconds(), "jobs/s")
		})
	}
}

// quietTenants is how many quiet tenants enqueue one item each after the noisy backlog.
const quietTenants = 100

// noisyBacklog is the noisy tenant's backlog: 200,000 items, or 20,000 when the benchmarks
// run once each (-benchtime=1x, as CI smoke-runs them), which keeps that run short while
// the sub-benchmark's name says which one ran.
func noisyBacklog() int {
	if smoke() {
		return 20_000
	}
	return 200_000
}

// BenchmarkQuietWait: one tenant enqueues a backlog first, then quietTenants tenants one
// item each; how long until every quiet item is handed out? Reported per op: cycles (rota's
// dispatch cycles; for River, the number of pgBatch-job fetches that many started jobs
// take at the least), s-to-last-quiet (wall-clock seconds from the first dispatch, or the
// client's start, to the moment the last quiet item was handed out or started), and
// handed-out (items handed out up to and including the last quiet one).
//
// rota: the backlog is COPY-loaded due at t0 + j µs, the quiet items scheduled through the
// Index due a second later; one lane of pgBatch per cycle with PerUserLimit pgBatch, so the
// noisy tenant may take the whole batch when nobody else is due; each cycle's items are
// completed (next due a day later) before the next cycle, as workers would.
//
// river: the backlog, then the quiet jobs, inserted with InsertManyFast in that order (one
// queue, same priority: River works jobs in (priority, scheduled_at, id) order, and has no
// notion of tenant); the client (MaxWorkers pgBatch, default fetch cooldown) works them,
// and each job notes its start. The op ends when the last quiet job starts.
func BenchmarkQuietWait(b *testing.B) {
	backlog := noisyBacklog()
	for _, v := range []struct {
		name string
		run  func(testing.TB, int) quietRun
	}{{"rota", quietWaitRota}, {"river", quietWaitRiver}} {
		b.Run(fmt.Sprintf("backlog=%d/%s", backlog, v.name), func(b *testing.B) {
			var sum quietRun
			for range b.N {
				r := v.run(b, backlog)
				sum.cycles += r.cycles
				sum.handed += r.handed
				sum.elapsed += r.elapsed
			}
			n := float64(b.N)
			b.ReportMetric(sum.elapsed.Seconds()*1e9/n, "ns/op")
			b.ReportMetric(float64(sum.cycles)/n, "cycles")
			b.ReportMetric(sum.elapsed.Seconds()/n, "s-to-last-quiet")
			b.ReportMetric(float64(sum.handed)/n, "handed-out")
		})
	}
}

// quietRun is one run of the quiet-wait scenario: how many cycles and items it took until
// the last quiet item was handed out, and how long.
type quietRun struct {
	cycles, handed int
	elapsed        time.Duration
}

func quietNames() []string {
	quiet := make([]string, quietTenants)
	for i := range quiet {
		quiet[i] = fmt.Sprintf("quiet%03d", i)
	}
	return quiet
}

// quietWaitRota runs the scenario on a fresh rota schema (see BenchmarkQuietWait).
func quietWaitRota(tb testing.TB, backlog int) quietRun {
	tb.Helper()
	ctx := context.Background()
	quiet := quietNames()
	pool := rotaPool(tb)
	pgtest.LoadDue(tb, pool, []string{"noisy"}, []int{backlog}, func(int) time.Time { return t0 })
	idx := postgres.NewIndex(pool)
	tcs := contexts(tb, append([]string{"noisy"}, quiet...))
	for _, u := range quiet {
		if err := idx.Schedule(ctx, tcs[u], duework.Entry{UserID: u, WorkKey: "w0", Tier: "hot", DueAt: t0.Add(time.Second)}); err != nil {
			tb.Fatal(err)
		}
	}
	d, err := dispatch.New(idx, oneLane(pgBatch))
	if err != nil {
		tb.Fatal(err)
	}
	now := t0.Add(time.Minute)
	next := func(e duework.Entry) duework.Entry {
		e.LastRunAt, e.DueAt = now, now.Add(24*time.Hour)
		return e
	}
	var r quietRun
	left := quietTenants
	start := time.Now()
	for k := 1; ; k++ {
		batch, err := d.Dispatch(ctx, now)
		if err != nil {
			tb.Fatal(err)
		}
		if len(batch.Items) == 0 {
			tb.Fatalf("cycle %d handed out nothing with %d quiet items left", k, left)
		}
		for _, it := range batch.Items {
			r.handed++
			if it.Claim.Entry.UserID != "noisy" {
				if left--; left == 0 {
					r.elapsed, r.cycles = time.Since(start), k
					return r
				}
			}
		}
		if err := completeAll(ctx, idx, batch.Items, tcs, next); err != nil {
			tb.Fatal(err)
		}
		now = now.Add(time.Second)
	}
}

// quietWaitRiver runs the scenario on a fresh River schema (see BenchmarkQuietWait).
func quietWaitRiver(tb testing.TB, backlog int) quietRun {
	tb.Helper()
	ctx := context.Background()
	var (
		mu      sync.Mutex
		r       quietRun
		started int
		left    = quietTenants
		last    time.Time
		done    = make(chan struct{})
	)
	w := &benchWorker{onStart: func(job *river.Job[benchArgs]) {
		mu.Lock()
		defer mu.Unlock()
		started++
		if job.Args.Tenant != "noisy" {
			if left--; left == 0 {
				last = time.Now()
				r.handed = started
				r.cycles = (started + pgBatch - 1) / pgBatch
				close(done)
			}
		}
	}}
	client, _ := riverClient(tb, w, 0)
	noisy := make([]string, backlog)
	for i := range noisy {
		noisy[i] = "noisy"
	}
	insertJobs(tb, client, noisy)
	insertJobs(tb, client, quietNames())
	start := time.Now()
	if err := client.Start(ctx); err != nil {
		tb.Fatal(err)
	}
	<-done
	if err := client.StopAndCancel(ctx); err != nil {
		tb.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	r.elapsed = last.Sub(start)
	return r
}

// The scenario measures what BenchmarkQuietWait says, at a small backlog: rota hands out
// every quiet item in the first cycle, right after the noisy tenant's first (it was due
// first); River starts them behind the backlog — it works jobs in insertion order within
// one priority, tenants unknown to it.
func TestQuietWaitScenario(t *testing.T) {
	const backlog = 3000
	rota := quietWaitRota(t, backlog)
	if rota.cycles != 1 || rota.handed != quietTenants+1 {
		t.Errorf("rota: last quiet item in cycle %d after %d items, want cycle 1 after %d", rota.cycles, rota.handed, quietTenants+1)
	}
	rv := quietWaitRiver(t, backlog)
	// Jobs of one fetch start concurrently, so the last quiet job may start before some
	// noisy jobs of the last fetch; never before the fetches that held only noisy jobs.
	if rv.handed < backlog+quietTenants-pgBatch || rv.cycles < 3 {
		t.Errorf("river: last quiet job started after %d jobs (%d fetches), want after at least %d", rv.handed, rv.cycles, backlog+quietTenants-pgBatch)
	}
}
