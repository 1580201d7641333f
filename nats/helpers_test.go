package rotanats_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/rotaworks/rota/bridge"
	"github.com/rotaworks/rota/cadence"
	"github.com/rotaworks/rota/dispatch"
	"github.com/rotaworks/rota/duework"
	rotanats "github.com/rotaworks/rota/nats"
	"github.com/rotaworks/rota/tenancy"
)

// natsURL is the server the tests use: ROTA_TEST_NATS_URL, or the local one CI starts.
func natsURL() string {
	if u := os.Getenv("ROTA_TEST_NATS_URL"); u != "" {
		return u
	}
	return "nats://127.0.0.1:4222"
}

var (
	reachOnce sync.Once
	reachErr  error
)

// requireNATS skips tb when no JetStream server answers at natsURL — except under CI
// (CI=true), where it fails tb.
func requireNATS(tb testing.TB) {
	tb.Helper()
	reachOnce.Do(func() {
		nc, err := nats.Connect(natsURL(), nats.Timeout(3*time.Second))
		if err != nil {
			reachErr = err
			return
		}
		defer nc.Close()
		js, err := jetstream.New(nc)
		if err == nil {
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			defer cancel()
			_, err = js.AccountInfo(ctx)
		}
		reachErr = err
	})
	if reachErr == nil {
		return
	}
	if os.Getenv("CI") == "true" {
		tb.Fatalf("no NATS JetStream server at %s: %v (CI=true: the tests must run)", natsURL(), reachErr)
	}
	tb.Skipf("no NATS JetStream server at %s (%v); start nats-server -js there or set ROTA_TEST_NATS_URL", natsURL(), reachErr)
}

// connect opens a NATS connection of its own for tb, closed when tb ends.
func connect(tb testing.TB) (*nats.Conn, jetstream.JetStream) {
	tb.Helper()
	requireNATS(tb)
	nc, err := nats.Connect(natsURL(), nats.MaxReconnects(-1))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		tb.Fatal(err)
	}
	return nc, js
}

// freshQueue returns cfg with a stream and subject prefix of tb's own, deleted when tb
// ends.
func freshQueue(tb testing.TB, cfg rotanats.Config) rotanats.Config {
	tb.Helper()
	var r [6]byte
	if _, err := rand.Read(r[:]); err != nil {
		tb.Fatal(err)
	}
	id := hex.EncodeToString(r[:])
	cfg.Stream, cfg.Subject = "ROTA_TEST_"+id, "rotatest."+id
	_, js := connect(tb)
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := js.DeleteStream(ctx, cfg.Stream); err != nil && !errors.Is(err, jetstream.ErrStreamNotFound) {
			tb.Errorf("delete stream %s: %v", cfg.Stream, err)
		}
	})
	return cfg
}

// planStore is where the tests set each tenant's plan.
type planStore interface {
	tenancy.Entitlements
	SetPlan(ctx context.Context, tc tenancy.Context, p tenancy.PlanID) error
}

// fastTier is the cadence of every source: due again 200 ms after each run, hit or miss.
const fastTier = "fast"

// store is the state the dispatcher and the workers share — the index, the watchlist and
// the plans in one PostgreSQL schema, each process on a pool of its own — and the sources
// the tenants watch.
type store struct {
	t       testing.TB
	idx     duework.Index
	wl      tenancy.Watchlist
	plans   planStore
	be      *backend
	tiers   *cadence.Registry
	tenants map[string]tenancy.Context
	sources map[duework.Key]bool
}

func newStore(tb testing.TB) *store {
	tb.Helper()
	s := &store{t: tb, tiers: cadence.NewRegistry(), tenants: map[string]tenancy.Context{}, sources: map[duework.Key]bool{}}
	s.be, s.idx, s.wl, s.plans = newBackend(tb)
	if err := s.tiers.Register(fastTier, cadence.Backoff{Base: 200 * time.Millisecond, Max: 200 * time.Millisecond, Factor: 1}); err != nil {
		tb.Fatal(err)
	}
	return s
}

// watch puts user on plan and has it watch n sources s000, s001, …, due at once.
func (s *store) watch(user string, plan tenancy.PlanID, n int) {
	s.t.Helper()
	ctx := context.Background()
	tc, err := tenancy.NewContext(user)
	if err != nil {
		s.t.Fatal(err)
	}
	s.tenants[user] = tc
	if err := s.plans.SetPlan(ctx, tc, plan); err != nil {
		s.t.Fatal(err)
	}
	entries := make([]tenancy.WatchlistEntry, n)
	due := make([]duework.Entry, n)
	now := time.Now()
	for j := range n {
		entries[j] = tenancy.WatchlistEntry{UserID: user, Slug: fmt.Sprintf("s%03d", j), Tier: fastTier, AddedAt: now}
		due[j] = duework.Entry{UserID: user, WorkKey: entries[j].Slug, Tier: fastTier, DueAt: now}
		s.sources[duework.Key{UserID: user, WorkKey: entries[j].Slug}] = true
	}
	if err := s.wl.AddMany(ctx, tc, entries); err != nil {
		s.t.Fatal(err)
	}
	if _, err := s.idx.ScheduleMissing(ctx, tc, due); err != nil {
		s.t.Fatal(err)
	}
}

// lanes of the tests: paid users first, two items each and twenty a cycle per lane.
var testLanes = []dispatch.LaneCapacity{
	{Lane: "paid", PerUserLimit: 2, PerCycleLimit: 20},
	{Lane: "free tier", PerUserLimit: 2, PerCycleLimit: 20},
}

func laneNames() []dispatch.Lane {
	var ls []dispatch.Lane
	for _, l := range testLanes {
		ls = append(ls, l.Lane)
	}
	return ls
}

// dispatchConfig is the configuration of the tests' Dispatchers, which the workers share:
// the test lanes, users routed by plan, claims of claimFor.
func (s *store) dispatchConfig(claimFor time.Duration) dispatch.Config {
	s.t.Helper()
	laneFor, err := bridge.PlanLanes(s.plans, map[tenancy.PlanID]dispatch.Lane{
		tenancy.PlanFree: "free tier", "plus": "paid", "pro": "paid",
	}, testLanes)
	if err != nil {
		s.t.Fatal(err)
	}
	return dispatch.Config{Lanes: testLanes, GlobalBatchLimit: 30, LaneFor: laneFor, ClaimFor: claimFor}
}

// dispatcher returns a Dispatcher over the store's index with dispatchConfig.
func (s *store) dispatcher(claimFor time.Duration) *dispatch.Dispatcher {
	s.t.Helper()
	d, err := dispatch.New(s.idx, s.dispatchConfig(claimFor))
	if err != nil {
		s.t.Fatal(err)
	}
	return d
}

// memDispatcher returns a Dispatcher over an index of its own with lanes and claims of
// claimFor, every user routed to the first lane: for the tests that only need its
// configuration.
func memDispatcher(tb testing.TB, claimFor time.Duration, lanes ...dispatch.Lane) *dispatch.Dispatcher {
	tb.Helper()
	var lcs []dispatch.LaneCapacity
	for _, l := range lanes {
		lcs = append(lcs, dispatch.LaneCapacity{Lane: l, PerUserLimit: 10, PerCycleLimit: 100})
	}
	d, err := dispatch.New(duework.NewMemory(), dispatch.Config{Lanes: lcs, GlobalBatchLimit: 100, ClaimFor: claimFor,
		LaneFor: func(context.Context, string) (dispatch.Lane, error) { return lanes[0], nil }})
	if err != nil {
		tb.Fatal(err)
	}
	return d
}

// checkNothingLost checks each source after a clean stop: it is scheduled, unclaimed,
// and, every run being a miss, its streak is the number of its runs whose completion was
// written.
func (s *store) checkNothingLost(written map[duework.Key]int) {
	s.t.Helper()
	ctx := context.Background()
	for _, user := range slices.Sorted(maps.Keys(s.tenants)) {
		states, err := s.idx.Entries(ctx, user, "", duework.MaxLimit)
		if err != nil {
			s.t.Fatal(err)
		}
		seen := 0
		for _, st := range states {
			k := st.Entry.Key()
			if !s.sources[k] {
				continue
			}
			seen++
			if !st.ClaimedUntil.IsZero() {
				s.t.Errorf("%s/%s still claimed until %v after a clean stop", k.UserID, k.WorkKey, st.ClaimedUntil)
			}
			if st.Entry.MissStreak != written[k] {
				s.t.Errorf("%s/%s: streak %d after %d written runs", k.UserID, k.WorkKey, st.Entry.MissStreak, written[k])
			}
		}
		if want := len(slices.Collect(func(yield func(duework.Key) bool) {
			for k := range s.sources {
				if k.UserID == user && !yield(k) {
					return
				}
			}
		})); seen != want {
			s.t.Errorf("user %s: %d of its %d sources are scheduled", user, seen, want)
		}
	}
}

// runLog records every run: which worker, which source, when it started and ended. It
// fails the test at once when a run starts while another run of the same source is
// under way.
type runLog struct {
	t      testing.TB
	mu     sync.Mutex
	runs   []pipelineRun
	active map[duework.Key]int
}

type pipelineRun struct {
	key        duework.Key
	worker     int
	start, end time.Time
	killed     bool // the worker died under it: its completion was never written
}

func newRunLog(t testing.TB) *runLog {
	return &runLog{t: t, active: map[duework.Key]int{}}
}

// pipeline returns worker's pipeline: it records the run and finds nothing new. hold,
// when not nil, is called while the run is under way and reports whether the worker died
// under it.
func (l *runLog) pipeline(worker int, hold func(ctx context.Context, k duework.Key) (killed bool)) bridge.Pipeline {
	return bridge.PipelineFunc(func(ctx context.Context, tc tenancy.Context, e tenancy.WatchlistEntry) (bridge.Result, error) {
		k := duework.Key{UserID: tc.UserID(), WorkKey: e.Slug}
		start := time.Now()
		l.mu.Lock()
		if other, ok := l.active[k]; ok {
			l.t.Errorf("%s/%s: worker %d started it while worker %d was running it", k.UserID, k.WorkKey, worker, other)
		}
		l.active[k] = worker
		l.mu.Unlock()
		killed := hold != nil && hold(ctx, k)
		l.mu.Lock()
		defer l.mu.Unlock()
		delete(l.active, k)
		l.runs = append(l.runs, pipelineRun{key: k, worker: worker, start: start, end: time.Now(), killed: killed})
		if killed {
			return bridge.Result{}, errors.New("killed")
		}
		return bridge.Result{}, nil
	})
}

func (l *runLog) all() []pipelineRun {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.runs)
}

// written counts each source's runs whose completion was written.
func (l *runLog) written() map[duework.Key]int {
	n := map[duework.Key]int{}
	for _, r := range l.all() {
		if !r.killed {
			n[r.key]++
		}
	}
	return n
}

// ranSince reports whether every one of sources has a run that started at or after t.
func (l *runLog) ranSince(sources map[duework.Key]bool, t time.Time) (ran, of int) {
	seen := map[duework.Key]bool{}
	for _, r := range l.all() {
		if !r.start.Before(t) && !r.killed {
			seen[r.key] = true
		}
	}
	for k := range sources {
		if seen[k] {
			ran++
		}
	}
	return ran, len(sources)
}

// checkEachRanAlone checks that each of sources ran, and that no run of one started
// before the one before it ended.
func checkEachRanAlone(t testing.TB, sources map[duework.Key]bool, runs []pipelineRun) {
	t.Helper()
	perSource := map[duework.Key][]pipelineRun{}
	for _, r := range runs {
		perSource[r.key] = append(perSource[r.key], r)
	}
	for k := range sources {
		rs := perSource[k]
		if len(rs) == 0 {
			t.Errorf("%s/%s never ran", k.UserID, k.WorkKey)
		}
		slices.SortFunc(rs, func(x, y pipelineRun) int { return x.start.Compare(y.start) })
		for i := 1; i < len(rs); i++ {
			if rs[i].start.Before(rs[i-1].end) {
				t.Errorf("%s/%s: a run by worker %d started before the run by worker %d ended", k.UserID, k.WorkKey, rs[i].worker, rs[i-1].worker)
			}
		}
	}
}

// jain is Jain's fairness index of xs: (Σx)² / (n·Σx²), 1 when all are equal and 1/n
// when one has everything.
func jain(xs []int) float64 {
	var sum, sq float64
	for _, x := range xs {
		sum += float64(x)
		sq += float64(x) * float64(x)
	}
	if sq == 0 {
		return 0
	}
	return sum * sum / (float64(len(xs)) * sq)
}

// worker is one worker process: a NATS connection of its own, a Bridge over the shared
// store whose index it can lose (idx.dead), a bridge.Worker and a Consumer.
type worker struct {
	id       int
	nc       *nats.Conn
	idx      *mortalIndex
	bw       *bridge.Worker
	consumer *rotanats.Consumer
	logs     *syncBuffer
	cancel   context.CancelFunc
	done     chan error
}

// startWorker starts worker id's Consumer over s, for a Dispatcher configured with dc,
// with cfg; its pipeline records into runs, calling hold while each run is under way. Its
// Worker's claim margin is ClaimFor/4, its slots 4.
func startWorker(t testing.TB, s *store, dc dispatch.Config, cfg rotanats.Config, id int, runs *runLog, hold func(context.Context, duework.Key) bool) *worker {
	t.Helper()
	return startWorkerWith(t, s, dc, cfg, 4, id, runs, hold)
}

// startWorkerWith is startWorker with a Worker of slots slots.
func startWorkerWith(t testing.TB, s *store, dc dispatch.Config, cfg rotanats.Config, slots, id int, runs *runLog,
	hold func(context.Context, duework.Key) bool) *worker {
	t.Helper()
	nc, js := connect(t)
	w := &worker{id: id, nc: nc, logs: &syncBuffer{}, done: make(chan error, 1)}
	logger := slog.New(slog.NewTextHandler(w.logs, nil))
	idx, wl := s.be.process(t)
	w.idx = &mortalIndex{Index: idx, dead: &atomic.Bool{}}
	b := &bridge.Bridge{Index: w.idx, Watchlist: wl, Pipeline: runs.pipeline(id, hold), Tiers: s.tiers}
	var err error
	w.bw, err = bridge.NewWorker(b, bridge.WorkerConfig{Workers: slots, ClaimMargin: dc.ClaimFor / 4, MaxClockSkew: 100 * time.Millisecond,
		FlushInterval: 20 * time.Millisecond, Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	cfg.Logger = logger
	if w.consumer, err = rotanats.NewConsumer(js, w.bw, dc, cfg); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	w.cancel = cancel
	go func() { w.done <- w.consumer.Run(ctx) }()
	return w
}

// stop stops the worker cleanly: Run stops its Consumer, then its Worker.
func (w *worker) stop(t testing.TB) {
	t.Helper()
	w.cancel()
	select {
	case err := <-w.done:
		if err != nil {
			t.Errorf("worker %d: Run = %v", w.id, err)
		}
	case <-time.After(30 * time.Second):
		t.Errorf("worker %d: Run did not return within 30 s of its context's end", w.id)
	}
}

// mortalIndex is the index as a worker process reaches it: once dead, every call fails,
// as a killed process writes nothing more. It counts the claims it was asked to hand
// back.
type mortalIndex struct {
	duework.Index
	dead      *atomic.Bool
	unclaimed atomic.Int64
}

var errDead = errors.New("the worker process is dead")

func (m *mortalIndex) CheckClaims(ctx context.Context, cs []duework.Unclaim) ([]error, error) {
	if m.dead.Load() {
		return nil, errDead
	}
	return m.Index.CheckClaims(ctx, cs)
}

func (m *mortalIndex) CompleteMany(ctx context.Context, done []duework.Done) ([]error, error) {
	if m.dead.Load() {
		return nil, errDead
	}
	return m.Index.CompleteMany(ctx, done)
}

func (m *mortalIndex) Unclaim(ctx context.Context, cs []duework.Unclaim) ([]error, error) {
	if m.dead.Load() {
		return nil, errDead
	}
	m.unclaimed.Add(int64(len(cs)))
	return m.Index.Unclaim(ctx, cs)
}

func (m *mortalIndex) UnscheduleClaimed(ctx context.Context, tc tenancy.Context, c duework.Claim) error {
	if m.dead.Load() {
		return errDead
	}
	return m.Index.UnscheduleClaimed(ctx, tc, c)
}

// syncBuffer is a bytes.Buffer safe for concurrent writes and reads.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// decode is bridge.DecodeItem.
func decode(b []byte) (dispatch.Item, error) { return bridge.DecodeItem(b) }
