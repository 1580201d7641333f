package rotasqs_test

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rotaworks/rota/bridge"
	"github.com/rotaworks/rota/dispatch"
	"github.com/rotaworks/rota/duework"
	rotasqs "github.com/rotaworks/rota/sqs"
	"github.com/rotaworks/rota/tenancy"
)

// fleet is one dispatcher feeding the lane queues and the workers consuming them.
type fleet struct {
	t       *testing.T
	s       *store
	dc      dispatch.Config
	cfg     rotasqs.Config
	sink    *watchedSink
	runs    *runLog
	workers []*worker
	feedLog syncBuffer
	cancel  context.CancelFunc
	fed     sync.WaitGroup
}

func newFleet(t *testing.T, s *store, claimFor time.Duration, cfg rotasqs.Config) *fleet {
	t.Helper()
	f := &fleet{t: t, s: s, dc: s.dispatchConfig(claimFor), cfg: fresh(t, cfg), runs: newRunLog(t)}
	f.sink = &watchedSink{Sink: newSink(t, f.dc, f.cfg)}
	return f
}

// startFeeding starts the dispatcher: a Dispatcher over the store fed into the sink.
func (f *fleet) startFeeding(interval time.Duration) {
	feeder, err := bridge.NewFeeder(f.s.dispatcher(f.dc), f.sink, bridge.FeederConfig{Interval: interval,
		Logger: slog.New(slog.NewTextHandler(&f.feedLog, nil))})
	if err != nil {
		f.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	f.cancel = cancel
	f.fed.Go(func() {
		if err := feeder.Run(ctx); err != nil {
			f.t.Errorf("Feeder.Run = %v", err)
		}
	})
}

// stopFeeding stops the dispatcher and waits for it.
func (f *fleet) stopFeeding() {
	f.cancel()
	f.fed.Wait()
}

// held returns what each lane's queue holds, visible, in flight or delayed; a lane whose
// queue does not exist yet holds nothing.
func (f *fleet) held() (map[dispatch.Lane]int, error) {
	n := map[dispatch.Lane]int{}
	for _, lc := range f.dc.Lanes {
		d, err := readDepth(f.cfg.QueueName(lc.Lane))
		if err != nil {
			return nil, err
		}
		n[lc.Lane] = d[0] + d[1] + d[2]
	}
	return n, nil
}

// waitDrained waits until every lane's queue holds nothing, for at most bound.
func (f *fleet) waitDrained(bound time.Duration) {
	f.t.Helper()
	waitFor(f.t, bound, "the queues are not empty", func() bool {
		held, err := f.held()
		if err != nil {
			f.t.Fatal(err)
		}
		for _, n := range held {
			if n > 0 {
				return false
			}
		}
		return true
	})
}

// stopWorkers stops every live worker cleanly.
func (f *fleet) stopWorkers() {
	f.t.Helper()
	var wg sync.WaitGroup
	for _, w := range f.workers {
		wg.Go(func() { w.stop(f.t) })
	}
	wg.Wait()
	f.workers = nil
}

// waitRanSince waits until every source has run since t, for at most bound.
func (f *fleet) waitRanSince(t time.Time, bound time.Duration) {
	f.t.Helper()
	waitFor(f.t, bound, "not every source ran since "+t.Format(time.StampMilli), func() bool {
		ran, of := f.runs.ranSince(f.s.sources, t)
		return ran == of
	})
}

// checkLogs checks that no worker logged above Info.
func checkLogs(t *testing.T, ws ...*worker) {
	t.Helper()
	for _, w := range ws {
		if l := w.logs.String(); strings.Contains(l, "level=WARN") || strings.Contains(l, "level=ERROR") {
			t.Errorf("worker %d logged above Info:\n%s", w.id, l)
		}
	}
}

// A dispatcher and three workers, each with an SQS client of its own, run for a few
// seconds through the lane queues over one index: ten paid tenants and twenty free ones
// with two sources each, and one free tenant with a hundred and fifty, every source due
// again 200 ms after it runs. Afterwards every source ran, no two runs of a source
// overlapped, every run's completion is in the index and nothing is left claimed, each
// worker did a share of the runs, the quiet tenants of both lanes were served alike
// (Jain's index over their run counts ≥ 0.9), and no lane was ever sent more than the
// room the sink reported.
func TestWorkersThroughSQS(t *testing.T) {
	requireSQS(t)
	const paid, free, noisySources = 10, 20, 150
	s := newStore(t)
	for i := range paid {
		s.watch(fmt.Sprintf("paid%02d", i), "pro", 2)
	}
	for i := range free {
		s.watch(fmt.Sprintf("free%02d", i), tenancy.PlanFree, 2)
	}
	s.watch("noisy", tenancy.PlanFree, noisySources)
	f := newFleet(t, s, 5*time.Second, rotasqs.Config{InFlight: 24, InHand: 4, WaitTime: time.Second})
	for i := range 3 {
		f.workers = append(f.workers, startWorker(t, s, f.dc, f.cfg, i, f.runs, nil))
	}
	all := f.workers
	start := time.Now()
	f.startFeeding(20 * time.Millisecond)
	waitFor(t, 20*time.Second, "not every source ran", func() bool {
		ran, of := f.runs.ranSince(s.sources, start)
		return ran == of && time.Since(start) > 3*time.Second
	})
	f.stopFeeding()
	f.waitDrained(10 * time.Second)
	f.stopWorkers()
	checkLogs(t, all...)

	runs := f.runs.all()
	checkEachRanAlone(t, s.sources, runs)
	s.checkNothingLost(f.runs.written())
	perWorker := make([]int, 3)
	var quietRuns []int
	perTenant := map[string]int{}
	for _, r := range runs {
		perWorker[r.worker]++
		perTenant[r.key.UserID]++
	}
	for user, n := range perTenant {
		if user != "noisy" {
			quietRuns = append(quietRuns, n)
		}
	}
	for i, n := range perWorker {
		if 6*n < len(runs) {
			t.Errorf("worker %d did %d of %d runs, less than a sixth", i, n, len(runs))
		}
	}
	if j := jain(quietRuns); j < 0.9 {
		t.Errorf("Jain's index over the quiet tenants' runs = %.3f, want ≥ 0.9; runs per tenant %v", j, perTenant)
	}
	if len(f.sink.overSent) > 0 {
		t.Errorf("lanes sent more than their room: %v", f.sink.overSent)
	}
	t.Logf("%d runs in %v: per worker %v; noisy %d; quiet tenants Jain %.3f", len(runs), time.Since(start).Round(time.Millisecond),
		perWorker, perTenant["noisy"], jain(quietRuns))
}

// watchQueues samples the lane queues every 50 ms until ctx ends and reports, at the end,
// each time a lane held more messages than its capacity.
func (f *fleet) watchQueues(ctx context.Context, capacity int) (wait func() (problems []string, samples int)) {
	var problems []string
	samples := 0
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			held, err := f.held()
			if err == nil {
				samples++
			}
			for lane, n := range held {
				if n > capacity {
					problems = append(problems, fmt.Sprintf("lane %q held %d messages, more than its capacity %d", lane, n, capacity))
				}
			}
			select {
			case <-ctx.Done():
			case <-time.After(50 * time.Millisecond):
			}
		}
	}()
	return func() ([]string, int) {
		<-done
		return problems, samples
	}
}

// A fleet of three workers loses one mid-run — its index and SQS calls failing, as when
// its process is killed, so it deletes and gives back nothing more — and later every
// worker stops, for longer than ClaimFor, while the dispatcher runs on. Then three new
// workers start. Throughout, no lane's queue holds more than its capacity; during the
// outage the dispatcher sends at most what the queues had room for when it began, and then
// stops claiming; the killed worker's messages come back once their claims have ended and
// are dropped unrun; once the workers are back every source runs, and no two runs of a
// source ever overlapped. After a clean stop nothing is claimed and every written run is
// in the index.
func TestWorkerKilledAndStalled(t *testing.T) {
	requireSQS(t)
	s := newStore(t)
	for i := range 5 {
		s.watch(fmt.Sprintf("paid%02d", i), "pro", 2)
	}
	for i := range 10 {
		s.watch(fmt.Sprintf("free%02d", i), tenancy.PlanFree, 2)
	}
	s.watch("noisy", tenancy.PlanFree, 30)
	const claimFor, capacity = 2 * time.Second, 16
	f := newFleet(t, s, claimFor, rotasqs.Config{InFlight: capacity, InHand: 4, WaitTime: time.Second})
	watchCtx, stopWatching := context.WithCancel(context.Background())
	defer stopWatching()
	watched := f.watchQueues(watchCtx, capacity)

	// The victim runs normally until armed; then each of its runs waits for its death.
	arm, kill, blocked := make(chan struct{}), make(chan struct{}), make(chan struct{}, 100)
	victimHold := func(ctx context.Context, _ duework.Key) bool {
		select {
		case <-arm:
		default:
			return false
		}
		blocked <- struct{}{}
		select {
		case <-kill:
		case <-ctx.Done():
			t.Errorf("a run of the killed worker reached its claim margin before the kill")
		}
		return true
	}
	victim := startWorker(t, s, f.dc, f.cfg, 0, f.runs, victimHold)
	f.workers = []*worker{victim, startWorker(t, s, f.dc, f.cfg, 1, f.runs, nil), startWorker(t, s, f.dc, f.cfg, 2, f.runs, nil)}
	f.startFeeding(20 * time.Millisecond)
	time.Sleep(time.Second)
	close(arm)
	select {
	case <-blocked:
	case <-time.After(10 * time.Second):
		t.Fatal("the victim started no run in 10 s")
	}
	time.Sleep(100 * time.Millisecond)
	victim.kill()
	close(kill)

	// The survivors run on until the victim's messages come back, their claims ended.
	time.Sleep(claimFor + rotasqs.VisibilitySlack + 2*time.Second)
	survivors := f.workers[1:]
	f.workers = survivors
	f.stopWorkers()
	stalledAt, sentBefore := time.Now(), f.sink.sentInAll()
	time.Sleep(2*claimFor + rotasqs.VisibilitySlack)
	sentInStall := f.sink.sentInAll() - sentBefore
	if limit := capacity * len(testLanes); sentInStall > limit {
		t.Errorf("with no worker for %v the dispatcher sent %d items, more than the lanes' capacity %d", time.Since(stalledAt), sentInStall, limit)
	}
	sentLate := f.sink.sentInAll()
	time.Sleep(claimFor)
	if n := f.sink.sentInAll() - sentLate; n > 0 {
		t.Errorf("with no worker for %v the dispatcher still claims: %d items sent in the last %v", time.Since(stalledAt), n, claimFor)
	}
	if l := f.feedLog.String(); !strings.Contains(l, `level=WARN msg="rota: no worker is taking lane"`) {
		t.Errorf("with no worker for %v the dispatcher did not say so:\n%s", time.Since(stalledAt), l)
	}

	backAt := time.Now()
	for i := range 3 {
		f.workers = append(f.workers, startWorker(t, s, f.dc, f.cfg, 3+i, f.runs, nil))
	}
	back := f.workers
	f.waitRanSince(backAt, 15*time.Second)
	f.stopFeeding()
	if l := f.feedLog.String(); !strings.Contains(l, `level=INFO msg="rota: lane taken again"`) {
		t.Errorf("once the workers were back the dispatcher did not say so:\n%s", l)
	}
	f.waitDrained(10 * time.Second)
	f.stopWorkers()
	stopWatching()
	problems, samples := watched()
	for _, p := range problems {
		t.Error(p)
	}
	<-victim.done
	checkLogs(t, append(survivors, back...)...)

	runs := f.runs.all()
	checkEachRanAlone(t, s.sources, runs)
	s.checkNothingLost(f.runs.written())
	if len(f.sink.overSent) > 0 {
		t.Errorf("lanes sent more than their room: %v", f.sink.overSent)
	}
	killed := 0
	for _, r := range runs {
		if r.killed {
			killed++
		}
	}
	dropped := 0
	for _, w := range append(survivors, back...) {
		dropped += strings.Count(w.logs.String(), `reason="claim ended"`)
	}
	if killed == 0 || dropped == 0 {
		t.Errorf("%d runs killed and %d stale messages dropped: the scenario did not happen", killed, dropped)
	}
	t.Logf("%d runs, %d of them killed; %d items sent during the %v outage; %d stale messages logged dropped; %d samples of the queues",
		len(runs), killed, sentInStall, backAt.Sub(stalledAt).Round(time.Millisecond), dropped, samples)
}

// Two copies of one item whose claim is current — a duplicate of an at-least-once queue,
// or a redelivery while the first copy runs — reach two workers at once: the item runs
// once, and both messages are deleted.
func TestDuplicateDeliveryRunsOnce(t *testing.T) {
	s := newStore(t)
	s.watch("ana", "pro", 1)
	dc := s.dispatchConfig(30 * time.Second)
	cfg := fresh(t, rotasqs.Config{InHand: 1, WaitTime: time.Second})
	sink := newSink(t, dc, cfg)
	it := s.claimed("paid", "ana", "s000", time.Now().Add(30*time.Second))
	if err := sink.Send(context.Background(), "paid", []dispatch.Item{it, it}); err != nil {
		t.Fatal(err)
	}
	runs := newRunLog(t)
	hold := func(ctx context.Context, _ duework.Key) bool {
		time.Sleep(500 * time.Millisecond) // long enough for the other copy to arrive
		return false
	}
	ws := []*worker{startWorker(t, s, dc, cfg, 0, runs, hold), startWorker(t, s, dc, cfg, 1, runs, hold)}
	waitEmpty(t, cfg.QueueName("paid"))
	for _, w := range ws {
		w.stop(t)
	}
	if got := runs.all(); len(got) != 1 {
		t.Errorf("the item ran %d times, want once: %+v", len(got), got)
	}
	s.checkNothingLost(runs.written())
}
