package rotasqs_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"path"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/rotaworks/rota/bridge"
	"github.com/rotaworks/rota/cadence"
	"github.com/rotaworks/rota/dispatch"
	"github.com/rotaworks/rota/duework"
	rotasqs "github.com/rotaworks/rota/sqs"
	"github.com/rotaworks/rota/tenancy"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// endpoint is the SQS endpoint the tests use: ROTA_TEST_SQS_ENDPOINT, or the local
// emulator CI starts.
func endpoint() string {
	if e := os.Getenv("ROTA_TEST_SQS_ENDPOINT"); e != "" {
		return e
	}
	return "http://127.0.0.1:4566"
}

var (
	reachOnce sync.Once
	reachErr  error
)

// requireSQS skips tb when no SQS endpoint answers — except under CI (CI=true), where it
// fails tb.
func requireSQS(tb testing.TB) {
	tb.Helper()
	reachOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		_, reachErr = client().ListQueues(ctx, &sqs.ListQueuesInput{MaxResults: aws.Int32(1)})
	})
	if reachErr == nil {
		return
	}
	if os.Getenv("CI") == "true" {
		tb.Fatalf("no SQS endpoint at %s: %v (CI=true: the tests must run)", endpoint(), reachErr)
	}
	tb.Skipf("no SQS endpoint at %s (%v); start the emulator (.ci/services) or set ROTA_TEST_SQS_ENDPOINT", endpoint(), reachErr)
}

// client returns a client of its own, as one more process would have.
func client() *sqs.Client {
	return sqs.New(sqs.Options{Region: "us-east-1", BaseEndpoint: aws.String(endpoint()),
		Credentials: credentials.NewStaticCredentialsProvider("rota", "rota", "")})
}

// fresh returns cfg with a queue prefix of tb's own, whose queues are deleted when tb
// ends.
func fresh(tb testing.TB, cfg rotasqs.Config) rotasqs.Config {
	tb.Helper()
	requireSQS(tb)
	var r [5]byte
	if _, err := rand.Read(r[:]); err != nil {
		tb.Fatal(err)
	}
	cfg.Prefix = "rt" + hex.EncodeToString(r[:]) + "-"
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		c := client()
		out, err := c.ListQueues(ctx, &sqs.ListQueuesInput{QueueNamePrefix: aws.String(cfg.Prefix)})
		if err != nil {
			tb.Errorf("list queues %s*: %v", cfg.Prefix, err)
			return
		}
		for _, u := range out.QueueUrls {
			if _, err := c.DeleteQueue(ctx, &sqs.DeleteQueueInput{QueueUrl: aws.String(u)}); err != nil {
				tb.Errorf("delete queue %s: %v", u, err)
			}
		}
	})
	return cfg
}

// queueURL returns the URL of the queue named name, creating it when missing.
func queueURL(tb testing.TB, name string) string {
	tb.Helper()
	if got, err := client().GetQueueUrl(context.Background(), &sqs.GetQueueUrlInput{QueueName: aws.String(name)}); err == nil {
		return aws.ToString(got.QueueUrl)
	}
	out, err := client().CreateQueue(context.Background(), &sqs.CreateQueueInput{QueueName: aws.String(name)})
	if err != nil {
		tb.Fatal(err)
	}
	return aws.ToString(out.QueueUrl)
}

// depth is what the queue named name holds: visible, in flight and delayed.
func depth(tb testing.TB, name string) (visible, inFlight, delayed int) {
	tb.Helper()
	n, err := readDepth(name)
	if err != nil {
		tb.Fatal(err)
	}
	return n[0], n[1], n[2]
}

// readDepth reads what the queue named name holds: visible, in flight and delayed.
func readDepth(name string) ([3]int, error) {
	ctx := context.Background()
	c := client()
	var n [3]int
	u, err := c.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String(name)})
	if err != nil {
		return n, err
	}
	out, err := c.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: u.QueueUrl, AttributeNames: []types.QueueAttributeName{"All"}})
	if err != nil {
		return n, err
	}
	for i, a := range []string{"ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible", "ApproximateNumberOfMessagesDelayed"} {
		if n[i], err = strconv.Atoi(out.Attributes[a]); err != nil {
			return n, fmt.Errorf("queue %s: %s = %q", name, a, out.Attributes[a])
		}
	}
	return n, nil
}

// sendRaw sends bodies to the queue named name as they are.
func sendRaw(tb testing.TB, name string, bodies ...string) {
	tb.Helper()
	url := queueURL(tb, name)
	for _, b := range bodies {
		if _, err := client().SendMessage(context.Background(), &sqs.SendMessageInput{QueueUrl: aws.String(url), MessageBody: aws.String(b)}); err != nil {
			tb.Fatal(err)
		}
	}
}

// fastTier is the cadence of every source: due again 200 ms after each run, hit or miss.
const fastTier = "fast"

// lanes of the tests: paid users first, two items each and twenty a cycle per lane.
var testLanes = []dispatch.LaneCapacity{
	{Lane: "paid", PerUserLimit: 2, PerCycleLimit: 20},
	{Lane: "free tier", PerUserLimit: 2, PerCycleLimit: 20},
}

// store is the state the dispatcher and the workers share — the index, the watchlist and
// the plans — and the sources the tenants watch.
type store struct {
	t       testing.TB
	idx     *duework.Memory
	wl      *tenancy.MemoryWatchlist
	plans   *tenancy.MemoryEntitlements
	tiers   *cadence.Registry
	tenants map[string]tenancy.Context
	sources map[duework.Key]bool
}

func newStore(tb testing.TB) *store {
	tb.Helper()
	s := &store{t: tb, idx: duework.NewMemory(), wl: tenancy.NewMemoryWatchlist(), plans: tenancy.NewMemoryEntitlements(),
		tiers: cadence.NewRegistry(), tenants: map[string]tenancy.Context{}, sources: map[duework.Key]bool{}}
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

// dispatchConfig is the Dispatcher's configuration the dispatcher and the workers share.
func (s *store) dispatchConfig(claimFor time.Duration) dispatch.Config {
	s.t.Helper()
	laneFor, err := bridge.PlanLanes(s.plans, map[tenancy.PlanID]dispatch.Lane{
		tenancy.PlanFree: "free tier", "plus": "paid", "pro": "paid",
	}, testLanes)
	if err != nil {
		s.t.Fatal(err)
	}
	return dispatch.Config{Lanes: testLanes, GlobalBatchLimit: 30, LaneFor: laneFor, ClaimFor: claimFor, MaxClockSkew: testSkew}
}

// dispatcher returns a Dispatcher over the store's index with dc.
func (s *store) dispatcher(dc dispatch.Config) *dispatch.Dispatcher {
	s.t.Helper()
	d, err := dispatch.New(s.idx, dc)
	if err != nil {
		s.t.Fatal(err)
	}
	return d
}

// claimed claims user's entry key until until and returns it as an item of lane.
func (s *store) claimed(lane dispatch.Lane, user, key string, until time.Time) dispatch.Item {
	s.t.Helper()
	cs, err := s.idx.Claim(context.Background(), []duework.Key{{UserID: user, WorkKey: key}}, time.Now(), until)
	if err != nil || len(cs) != 1 {
		s.t.Fatalf("claim %s/%s: %v, %v", user, key, cs, err)
	}
	return dispatch.Item{Lane: lane, Claim: cs[0]}
}

// state reads user's entry key: when it is claimed until (zero when it is not) and the
// entry.
func (s *store) state(user, key string) (time.Time, duework.Entry) {
	s.t.Helper()
	states, err := s.idx.Entries(context.Background(), user, "", duework.MaxLimit)
	if err != nil {
		s.t.Fatal(err)
	}
	for _, st := range states {
		if st.Entry.WorkKey == key {
			return st.ClaimedUntil, st.Entry
		}
	}
	s.t.Fatalf("%s/%s is not scheduled", user, key)
	return time.Time{}, duework.Entry{}
}

// checkNothingLost checks each source after a clean stop: it is scheduled, unclaimed,
// and, every run being a miss, its streak is the number of its runs whose completion was
// written.
func (s *store) checkNothingLost(written map[duework.Key]int) {
	s.t.Helper()
	for _, k := range slices.SortedFunc(maps.Keys(s.sources), func(a, b duework.Key) int {
		return cmpKeys(a, b)
	}) {
		until, e := s.state(k.UserID, k.WorkKey)
		if !until.IsZero() && until.After(time.Now()) {
			s.t.Errorf("%s/%s still claimed until %v after a clean stop", k.UserID, k.WorkKey, until)
		}
		if e.MissStreak != written[k] {
			s.t.Errorf("%s/%s: streak %d after %d written runs", k.UserID, k.WorkKey, e.MissStreak, written[k])
		}
	}
}

func cmpKeys(a, b duework.Key) int {
	if a.UserID != b.UserID {
		if a.UserID < b.UserID {
			return -1
		}
		return 1
	}
	switch {
	case a.WorkKey < b.WorkKey:
		return -1
	case a.WorkKey > b.WorkKey:
		return 1
	}
	return 0
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

func newRunLog(t testing.TB) *runLog { return &runLog{t: t, active: map[duework.Key]int{}} }

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

// ranSince reports how many of sources have a run that started at or after t.
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

// workerMargin is the claim margin of the tests' Workers, and testSkew the clock skew
// the tests' dispatchers and Workers allow: the claims last seconds.
const (
	workerMargin = 500 * time.Millisecond
	testSkew     = 50 * time.Millisecond
)

// worker is one worker process: an SQS client and an index of its own, both of which it
// can lose (dead), a bridge.Worker and a Consumer.
type worker struct {
	id       int
	bw       *bridge.Worker
	consumer *rotasqs.Consumer
	dead     *atomic.Bool
	logs     *syncBuffer
	cancel   context.CancelFunc
	done     chan error
}

// startWorker starts worker id's Consumer over s with dc and cfg; its pipeline records
// into runs, calling hold while each run is under way.
func startWorker(t testing.TB, s *store, dc dispatch.Config, cfg rotasqs.Config, id int, runs *runLog, hold func(context.Context, duework.Key) bool) *worker {
	t.Helper()
	w := &worker{id: id, dead: &atomic.Bool{}, logs: &syncBuffer{}, done: make(chan error, 1)}
	logger := slog.New(slog.NewTextHandler(w.logs, nil))
	b := &bridge.Bridge{Index: &mortalIndex{Index: s.idx, dead: w.dead}, Watchlist: s.wl, Pipeline: runs.pipeline(id, hold), Tiers: s.tiers}
	var err error
	w.bw, err = bridge.NewWorker(b, bridge.WorkerConfig{Workers: 4, ClaimMargin: workerMargin, MaxClockSkew: testSkew,
		FlushInterval: 20 * time.Millisecond, Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	cfg.Logger = logger
	if w.consumer, err = rotasqs.NewConsumer(&mortalClient{Client: client(), dead: w.dead}, w.bw, dc, cfg); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	w.cancel = cancel
	go func() { w.done <- w.consumer.Run(ctx) }()
	return w
}

// stop stops the worker cleanly: its Consumer, then its Worker.
func (w *worker) stop(t testing.TB) {
	t.Helper()
	w.cancel()
	if err := <-w.done; err != nil {
		t.Errorf("worker %d: Run = %v", w.id, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := w.bw.Stop(ctx); err != nil {
		t.Errorf("worker %d: Stop = %v", w.id, err)
	}
}

// kill kills the worker as a SIGKILL would: from now on its index and SQS calls fail, so
// it writes, deletes and gives back nothing more.
func (w *worker) kill() {
	w.dead.Store(true)
	w.cancel()
}

var errDead = errors.New("the worker process is dead")

// mortalIndex is the index as a worker process reaches it: once dead, every call that
// writes or checks a claim fails, as a killed process makes no more calls.
type mortalIndex struct {
	duework.Index
	dead *atomic.Bool
}

// claimStarter is the Index's claim check, by either of the names it has had.
type claimStarter interface {
	StartClaims(ctx context.Context, cs []duework.Unclaim) ([]error, error)
}

type claimChecker interface {
	CheckClaims(ctx context.Context, cs []duework.Unclaim) ([]error, error)
}

func (m *mortalIndex) StartClaims(ctx context.Context, cs []duework.Unclaim) ([]error, error) {
	if m.dead.Load() {
		return nil, errDead
	}
	return m.Index.(claimStarter).StartClaims(ctx, cs)
}

func (m *mortalIndex) CheckClaims(ctx context.Context, cs []duework.Unclaim) ([]error, error) {
	if m.dead.Load() {
		return nil, errDead
	}
	return m.Index.(claimChecker).CheckClaims(ctx, cs)
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
	return m.Index.Unclaim(ctx, cs)
}

func (m *mortalIndex) UnscheduleClaimed(ctx context.Context, tc tenancy.Context, c duework.Claim) error {
	if m.dead.Load() {
		return errDead
	}
	return m.Index.UnscheduleClaimed(ctx, tc, c)
}

// mortalClient is SQS as a worker process reaches it: once dead, every call fails.
type mortalClient struct {
	rotasqs.Client
	dead *atomic.Bool
}

func (m *mortalClient) ReceiveMessage(ctx context.Context, in *sqs.ReceiveMessageInput, o ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error) {
	if m.dead.Load() {
		return nil, errDead
	}
	out, err := m.Client.ReceiveMessage(ctx, in, o...)
	if m.dead.Load() {
		return nil, errDead // it died during the poll: what it received comes back after its visibility
	}
	return out, err
}

func (m *mortalClient) DeleteMessageBatch(ctx context.Context, in *sqs.DeleteMessageBatchInput, o ...func(*sqs.Options)) (*sqs.DeleteMessageBatchOutput, error) {
	if m.dead.Load() {
		return nil, errDead
	}
	return m.Client.DeleteMessageBatch(ctx, in, o...)
}

func (m *mortalClient) ChangeMessageVisibilityBatch(ctx context.Context, in *sqs.ChangeMessageVisibilityBatchInput, o ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityBatchOutput, error) {
	if m.dead.Load() {
		return nil, errDead
	}
	return m.Client.ChangeMessageVisibilityBatch(ctx, in, o...)
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

// queueName is the last part of a queue's URL.
func queueName(url string) string { return path.Base(url) }

// waitFor polls cond every 20 ms until it holds, failing tb after bound.
func waitFor(tb testing.TB, bound time.Duration, what string, cond func() bool) {
	tb.Helper()
	for deadline := time.Now().Add(bound); !cond(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			tb.Fatalf("after %v: %s", bound, what)
		}
	}
}
