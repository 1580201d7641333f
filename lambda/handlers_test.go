package rotalambda_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/rotaworks/rota/bridge"
	"github.com/rotaworks/rota/cadence"
	"github.com/rotaworks/rota/dispatch"
	"github.com/rotaworks/rota/duework"
	rotalambda "github.com/rotaworks/rota/lambda"
	"github.com/rotaworks/rota/tenancy"
)

// margin is the Workers' claim margin, and skew the clock skew the Dispatcher and the
// Workers allow.
const (
	margin = time.Second
	skew   = 100 * time.Millisecond
)

// world is an in-memory deployment: an index and a watchlist shared by the functions, a
// pipeline that records its runs, and a Dispatcher with one lane.
type world struct {
	t    *testing.T
	idx  duework.Index
	mem  *duework.Memory
	wl   *tenancy.MemoryWatchlist
	runs *runs
	d    *dispatch.Dispatcher
}

// runs records each run's source and its context's deadline; a run waits for hold, when
// not nil, or for its context to end.
type runs struct {
	mu        sync.Mutex
	ran       []string
	deadlines []time.Time
	active    map[string]bool
	overlaps  []string
	hold      chan struct{}
	fail      map[string]bool
}

func (r *runs) Run(ctx context.Context, tc tenancy.Context, e tenancy.WatchlistEntry) (bridge.Result, error) {
	key := tc.UserID() + "/" + e.Slug
	dl, _ := ctx.Deadline()
	r.mu.Lock()
	if r.active[key] {
		r.overlaps = append(r.overlaps, key)
	}
	r.active[key] = true
	r.ran = append(r.ran, key)
	r.deadlines = append(r.deadlines, dl)
	hold, fail := r.hold, r.fail[e.Slug]
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		delete(r.active, key)
		r.mu.Unlock()
	}()
	if hold != nil {
		select {
		case <-hold:
		case <-ctx.Done():
			return bridge.Result{}, context.Cause(ctx)
		}
	}
	if fail {
		return bridge.Result{}, errors.New("upstream down")
	}
	return bridge.Result{}, nil
}

func (r *runs) list() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.ran...)
}

func newWorld(t *testing.T, idx duework.Index) *world {
	t.Helper()
	mem := duework.NewMemory()
	if idx == nil {
		idx = mem
	}
	w := &world{t: t, idx: idx, mem: mem, wl: tenancy.NewMemoryWatchlist(), runs: &runs{active: map[string]bool{}, fail: map[string]bool{}}}
	lanes := []dispatch.LaneCapacity{{Lane: "free", PerUserLimit: 10, PerCycleLimit: 100}}
	d, err := dispatch.New(idx, dispatch.Config{Lanes: lanes, GlobalBatchLimit: 100, ClaimFor: time.Minute, MaxClockSkew: skew,
		LaneFor: func(context.Context, string) (dispatch.Lane, error) { return "free", nil }})
	if err != nil {
		t.Fatal(err)
	}
	w.d = d
	return w
}

// watch has user watch slugs, due at once.
func (w *world) watch(user string, slugs ...string) {
	w.t.Helper()
	tc, err := tenancy.NewContext(user)
	if err != nil {
		w.t.Fatal(err)
	}
	var es []tenancy.WatchlistEntry
	var due []duework.Entry
	now := time.Now()
	for _, s := range slugs {
		es = append(es, tenancy.WatchlistEntry{UserID: user, Slug: s, Tier: "hot", AddedAt: now})
		due = append(due, duework.Entry{UserID: user, WorkKey: s, Tier: "hot", DueAt: now})
	}
	if err := w.wl.AddMany(context.Background(), tc, es); err != nil {
		w.t.Fatal(err)
	}
	if _, err := w.idx.ScheduleMissing(context.Background(), tc, due); err != nil {
		w.t.Fatal(err)
	}
}

// claimed claims user's entry key until until and returns it as an item.
func (w *world) claimed(user, key string, until time.Time) dispatch.Item {
	w.t.Helper()
	cs, err := w.idx.Claim(context.Background(), []duework.Key{{UserID: user, WorkKey: key}}, time.Now(), until)
	if err != nil || len(cs) != 1 {
		w.t.Fatalf("claim %s/%s: %v, %v", user, key, cs, err)
	}
	return dispatch.Item{Lane: "free", Claim: cs[0]}
}

// state reads when user's entry key is claimed until (zero when it is not) and the entry.
func (w *world) state(user, key string) (time.Time, duework.Entry) {
	w.t.Helper()
	states, err := w.idx.Entries(context.Background(), user, "", duework.MaxLimit)
	if err != nil {
		w.t.Fatal(err)
	}
	for _, st := range states {
		if st.Entry.WorkKey == key {
			return st.ClaimedUntil, st.Entry
		}
	}
	w.t.Fatalf("%s/%s is not scheduled", user, key)
	return time.Time{}, duework.Entry{}
}

func (w *world) worker(workers int) *bridge.Worker {
	w.t.Helper()
	tiers := cadence.NewRegistry()
	bw, err := bridge.NewWorker(&bridge.Bridge{Index: w.idx, Watchlist: w.wl, Pipeline: w.runs, Tiers: tiers},
		bridge.WorkerConfig{Workers: workers, ClaimMargin: margin, MaxClockSkew: skew, FlushInterval: 20 * time.Millisecond})
	if err != nil {
		w.t.Fatal(err)
	}
	return bw
}

var discard = slog.New(slog.DiscardHandler)

// record is an SQS message of the item, as an event source mapping delivers it.
func record(t *testing.T, id string, it dispatch.Item) events.SQSMessage {
	t.Helper()
	body, err := bridge.EncodeItem(it)
	if err != nil {
		t.Fatal(err)
	}
	return events.SQSMessage{MessageId: id, Body: string(body), EventSourceARN: "arn:aws:sqs:us-east-1:1:rota-free"}
}

// logged sets slog.Default to a buffer until t ends and returns the buffer's reader.
func logged(t *testing.T) func() string {
	var mu sync.Mutex
	var buf bytes.Buffer
	old := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(writerFunc(func(p []byte) (int, error) {
		mu.Lock()
		defer mu.Unlock()
		return buf.Write(p)
	}), nil)))
	t.Cleanup(func() { slog.SetDefault(old) })
	return func() string {
		mu.Lock()
		defer mu.Unlock()
		return buf.String()
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

func failures(resp events.SQSEventResponse) []string {
	var ids []string
	for _, f := range resp.BatchItemFailures {
		ids = append(ids, f.ItemIdentifier)
	}
	return ids
}

// The worker handler runs a current item and writes its completion; a garbled message,
// an item whose claim has ended, a forged one and a late one are done with — logged, not
// run, not named in the response.
func TestWorkerHandlerRunsAndDrops(t *testing.T) {
	logs := logged(t)
	w := newWorld(t, nil)
	w.watch("ana", "s0", "s1", "s2", "s3")
	now := time.Now()
	ev := events.SQSEvent{Records: []events.SQSMessage{
		record(t, "good", w.claimed("ana", "s0", now.Add(time.Minute))),
		{MessageId: "garbled", Body: `{"v":1`, EventSourceARN: "arn:aws:sqs:us-east-1:1:rota-free"},
		record(t, "ended", dispatch.Item{Lane: "free", Claim: duework.Claim{Token: 7, Until: now.Add(-time.Second),
			Entry: duework.Entry{UserID: "ana", WorkKey: "s1", Tier: "hot", DueAt: now}}}),
		record(t, "forged", dispatch.Item{Lane: "free", Claim: duework.Claim{Token: 42, Until: now.Add(time.Minute),
			Entry: duework.Entry{UserID: "ana", WorkKey: "s2", Tier: "hot", DueAt: now}}}),
		record(t, "late", w.claimed("ana", "s3", now.Add(margin/2))),
	}}
	resp, err := rotalambda.WorkerHandler(w.worker(4))(context.Background(), ev)
	if err != nil || len(resp.BatchItemFailures) != 0 {
		t.Fatalf("WorkerHandler = %v, %v; want no failures", failures(resp), err)
	}
	if got := w.runs.list(); len(got) != 1 || got[0] != "ana/s0" {
		t.Fatalf("ran %v, want ana/s0 alone", got)
	}
	if until, e := w.state("ana", "s0"); !until.IsZero() || e.LastRunAt.IsZero() {
		t.Errorf("s0: claimed until %v, last run %v; want its completion written", until, e.LastRunAt)
	}
	for _, want := range []string{"message_id=garbled queue=arn:aws:sqs:us-east-1:1:rota-free reason=garbled",
		`message_id=ended queue=arn:aws:sqs:us-east-1:1:rota-free reason="claim ended"`,
		`level=WARN msg="rota: item not run, its claim is not current" user_id=ana work_key=s2`,
		`level=INFO msg="rota: item not run, its claim was ending" user_id=ana work_key=s3`} {
		if !strings.Contains(logs(), want) {
			t.Errorf("no line with %s:\n%s", want, logs())
		}
	}
}

// failingIndex fails every CompleteMany: a run's completion is never written.
type failingIndex struct{ *duework.Memory }

func (failingIndex) CompleteMany(context.Context, []duework.Done) ([]error, error) {
	return nil, errors.New("the index is down")
}

// The response names the messages whose completion was not written, and only those; a
// pipeline error whose retry is written is not one. (The Worker retries a failed write
// while the claim lasts: the bubble's clock makes that minute pass at once.)
func TestWorkerHandlerNamesWhatWasNotWritten(t *testing.T) {
	synctest.Test(t, testNamesWhatWasNotWritten)
}

func testNamesWhatWasNotWritten(t *testing.T) {
	logged(t)
	mem := duework.NewMemory()
	w := newWorld(t, failingIndex{mem})
	w.watch("ana", "s0")
	ok := newWorld(t, nil)
	ok.watch("bo", "s0", "s1")
	ok.runs.fail["s1"] = true
	now := time.Now()
	resp, err := rotalambda.WorkerHandler(w.worker(4))(context.Background(), events.SQSEvent{Records: []events.SQSMessage{
		record(t, "unwritten", w.claimed("ana", "s0", now.Add(time.Minute))),
		{MessageId: "garbled", Body: "{}"},
	}})
	if err != nil || fmt.Sprint(failures(resp)) != "[unwritten]" {
		t.Errorf("with the index down: failures %v, %v; want [unwritten]", failures(resp), err)
	}
	resp, err = rotalambda.WorkerHandler(ok.worker(4))(context.Background(), events.SQSEvent{Records: []events.SQSMessage{
		record(t, "hit", ok.claimed("bo", "s0", now.Add(time.Minute))),
		record(t, "failed", ok.claimed("bo", "s1", now.Add(time.Minute))),
	}})
	if err != nil || len(resp.BatchItemFailures) != 0 {
		t.Errorf("a pipeline error, written: failures %v, %v; want none", failures(resp), err)
	}
	if until, e := ok.state("bo", "s1"); !until.IsZero() || e.DueAt.Before(now.Add(30*time.Second)) {
		t.Errorf("bo/s1 after a failed run: claimed until %v, %+v; want its retry written", until, e)
	}
}

// Every pipeline's context ends before the invocation's deadline, less the reserve; an
// item still waiting for a slot then is handed back unstarted; both outcomes are written,
// so neither message is named, and the handler returns before its deadline.
func TestWorkerHandlerKeepsToTheDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		logged(t)
		w := newWorld(t, nil)
		w.watch("ana", "s0", "s1")
		w.runs.hold = make(chan struct{}) // never closed: each run lasts until its context ends
		now := time.Now()
		deadline := now.Add(8 * time.Second)
		ctx, cancel := context.WithDeadline(context.Background(), deadline)
		defer cancel()
		resp, err := rotalambda.WorkerHandler(w.worker(1))(ctx, events.SQSEvent{Records: []events.SQSMessage{
			record(t, "a", w.claimed("ana", "s0", now.Add(time.Minute))),
			record(t, "b", w.claimed("ana", "s1", now.Add(time.Minute))),
		}})
		if err != nil || len(resp.BatchItemFailures) != 0 {
			t.Errorf("failures %v, %v; want none", failures(resp), err)
		}
		if !time.Now().Before(deadline) {
			t.Errorf("the handler returned at %v, past its deadline %v", time.Now(), deadline)
		}
		w.runs.mu.Lock()
		defer w.runs.mu.Unlock()
		if len(w.runs.deadlines) != 1 || !w.runs.deadlines[0].Equal(deadline.Add(-2*time.Second)) {
			t.Fatalf("one run with deadline %v wanted, got %v", deadline.Add(-2*time.Second), w.runs.deadlines)
		}
		ran := strings.TrimPrefix(w.runs.ran[0], "ana/")
		other := map[string]string{"s0": "s1", "s1": "s0"}[ran]
		if until, e := w.state("ana", ran); !until.IsZero() || e.DueAt.Before(now.Add(30*time.Second)) {
			t.Errorf("%s, cut short: claimed until %v, %+v; want its retry written", ran, until, e)
		}
		if until, e := w.state("ana", other); !until.IsZero() || !e.LastRunAt.IsZero() || e.DueAt.After(now) {
			t.Errorf("%s, never started: claimed until %v, %+v; want handed back", other, until, e)
		}
	})
}

// Two copies of one item in one batch run once; a copy delivered again after the item
// ran is done with.
func TestWorkerHandlerRunsACopyOnce(t *testing.T) {
	synctest.Test(t, testRunsACopyOnce)
}

func testRunsACopyOnce(t *testing.T) {
	logged(t)
	w := newWorld(t, nil)
	w.watch("ana", "s0")
	w.runs.hold = make(chan struct{})
	it := w.claimed("ana", "s0", time.Now().Add(time.Minute))
	handler := rotalambda.WorkerHandler(w.worker(4))
	go func() {
		time.Sleep(200 * time.Millisecond) // both copies are in hand by then
		close(w.runs.hold)
	}()
	resp, err := handler(context.Background(), events.SQSEvent{Records: []events.SQSMessage{record(t, "a", it), record(t, "b", it)}})
	if err != nil || len(resp.BatchItemFailures) != 0 {
		t.Errorf("failures %v, %v; want none", failures(resp), err)
	}
	resp, err = handler(context.Background(), events.SQSEvent{Records: []events.SQSMessage{record(t, "a", it)}})
	if err != nil || len(resp.BatchItemFailures) != 0 {
		t.Errorf("delivered again: failures %v, %v; want none", failures(resp), err)
	}
	if got := w.runs.list(); len(got) != 1 {
		t.Errorf("the item ran %d times (%v), want once", len(got), got)
	}
}

// stubSink reports a fixed room and records what it is sent.
type stubSink struct {
	room dispatch.Take
	err  error
	sent []dispatch.Item
}

func (s *stubSink) Room(context.Context) (dispatch.Take, error) { return s.room, s.err }

func (s *stubSink) Send(_ context.Context, _ dispatch.Lane, items []dispatch.Item) error {
	s.sent = append(s.sent, items...)
	return nil
}

// One invocation of the dispatch handler is one Feed round within the Sink's room; a
// Room that fails claims nothing and fails the invocation.
func TestDispatchHandler(t *testing.T) {
	w := newWorld(t, nil)
	w.watch("ana", "s0", "s1", "s2")
	sink := &stubSink{room: dispatch.Take{Total: 2}}
	f, err := bridge.NewFeeder(w.d, sink, bridge.FeederConfig{Logger: discard})
	if err != nil {
		t.Fatal(err)
	}
	handler := rotalambda.DispatchHandler(f)
	if err := handler(context.Background(), events.EventBridgeEvent{}); err != nil || len(sink.sent) != 2 {
		t.Fatalf("first invocation: %v, %d sent; want 2", err, len(sink.sent))
	}
	sink.room, sink.err = dispatch.Take{Total: 5}, errors.New("queue unreachable")
	if err := handler(context.Background(), events.EventBridgeEvent{}); err == nil || len(sink.sent) != 2 {
		t.Fatalf("with Room failing: %v, %d sent; want an error and none more", err, len(sink.sent))
	}
	sink.err = nil
	if err := handler(context.Background(), events.EventBridgeEvent{}); err != nil || len(sink.sent) != 3 {
		t.Fatalf("third invocation: %v, %d sent; want the last one", err, len(sink.sent))
	}
}

// brokenIndex fails every Ready: no cycle can dispatch.
type brokenIndex struct{ *duework.Memory }

func (brokenIndex) Ready(context.Context, duework.ReadyQuery) (duework.ReadyPage, error) {
	return duework.ReadyPage{}, errors.New("the index is down")
}

// One invocation of the run handler is one cycle: every due item runs and is written; a
// failing source does not fail the invocation, a failing dispatch does.
func TestRunHandler(t *testing.T) {
	w := newWorld(t, nil)
	w.watch("ana", "s0", "s1")
	w.runs.fail["s1"] = true
	r, err := bridge.NewRunner(&bridge.Bridge{Index: w.idx, Watchlist: w.wl, Pipeline: w.runs, Tiers: cadence.NewRegistry()}, w.d,
		bridge.RunnerConfig{Logger: discard})
	if err != nil {
		t.Fatal(err)
	}
	if err := rotalambda.RunHandler(r)(context.Background(), events.EventBridgeEvent{}); err != nil || len(w.runs.list()) != 2 {
		t.Fatalf("RunHandler = %v after %v; want nil after both ran", err, w.runs.list())
	}
	if until, e := w.state("ana", "s1"); !until.IsZero() || e.DueAt.Before(time.Now().Add(30*time.Second)) {
		t.Errorf("ana/s1 after its failed run: claimed until %v, %+v; want its retry written", until, e)
	}
	broken := newWorld(t, brokenIndex{duework.NewMemory()})
	br, err := bridge.NewRunner(&bridge.Bridge{Index: broken.idx, Watchlist: broken.wl, Pipeline: broken.runs, Tiers: cadence.NewRegistry()}, broken.d,
		bridge.RunnerConfig{Logger: discard})
	if err != nil {
		t.Fatal(err)
	}
	if err := rotalambda.RunHandler(br)(context.Background(), events.EventBridgeEvent{}); err == nil {
		t.Error("RunHandler over a broken index = nil, want the dispatch's error")
	}
}

func TestHandlersRefuseNil(t *testing.T) {
	for name, f := range map[string]func(){
		"DispatchHandler": func() { rotalambda.DispatchHandler(nil) },
		"RunHandler":      func() { rotalambda.RunHandler(nil) },
		"WorkerHandler":   func() { rotalambda.WorkerHandler(nil) },
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s(nil) did not panic", name)
				}
			}()
			f()
		}()
	}
}
