package rotanats_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/rotaworks/rota/bridge"
	"github.com/rotaworks/rota/dispatch"
	"github.com/rotaworks/rota/duework"
	rotanats "github.com/rotaworks/rota/nats"
	"github.com/rotaworks/rota/tenancy"
)

// fleet is one dispatcher feeding a stream and the workers consuming it.
type fleet struct {
	t       *testing.T
	s       *store
	d       *dispatch.Dispatcher
	dc      dispatch.Config // the Dispatcher's, which the workers share
	cfg     rotanats.Config
	js      jetstream.JetStream // the tests' own connection, for reading the stream
	sink    *watchedSink
	runs    *runLog
	workers []*worker
	cancel  context.CancelFunc
	fed     sync.WaitGroup
}

func newFleet(t *testing.T, s *store, claimFor time.Duration, cfg rotanats.Config) *fleet {
	t.Helper()
	f := &fleet{t: t, s: s, d: s.dispatcher(claimFor), dc: s.dispatchConfig(claimFor), cfg: freshQueue(t, cfg), runs: newRunLog(t)}
	_, f.js = connect(t)
	_, js := connect(t)
	sinkCfg := f.cfg
	sinkCfg.Logger = quiet
	sk, err := rotanats.NewSink(js, f.d, sinkCfg)
	if err != nil {
		t.Fatal(err)
	}
	f.sink = &watchedSink{Sink: sk}
	return f
}

// startFeeding starts the dispatcher: a Dispatcher over the store fed into the sink.
func (f *fleet) startFeeding(interval time.Duration) {
	feeder, err := bridge.NewFeeder(f.d, f.sink, bridge.FeederConfig{Interval: interval, Logger: quiet})
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

// queued returns the messages each lane holds in the stream, and the messages of any
// entry the stream holds more than once.
func (f *fleet) queued(ctx context.Context) (perLane map[dispatch.Lane]int, twice []string, err error) {
	st, err := f.js.Stream(ctx, f.cfg.Stream)
	if err != nil {
		return nil, nil, err
	}
	info, err := st.Info(ctx)
	if err != nil {
		return nil, nil, err
	}
	perLane = map[dispatch.Lane]int{}
	seen := map[string]uint64{}
	for seq := info.State.FirstSeq; info.State.Msgs > 0 && seq <= info.State.LastSeq; seq++ {
		raw, err := st.GetMsg(ctx, seq)
		if err != nil {
			continue // acknowledged meanwhile, or a gap
		}
		item, err := decode(raw.Data)
		if err != nil {
			return nil, nil, err
		}
		perLane[item.Lane]++
		key := item.Claim.Entry.UserID + "/" + item.Claim.Entry.WorkKey
		if first, ok := seen[key]; ok {
			twice = append(twice, fmt.Sprintf("%s at %d and %d", key, first, seq))
		}
		seen[key] = seq
	}
	return perLane, twice, nil
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

// checkLogs checks that no worker logged above Info.
func checkLogs(t *testing.T, ws ...*worker) {
	t.Helper()
	for _, w := range ws {
		if l := w.logs.String(); strings.Contains(l, "level=WARN") || strings.Contains(l, "level=ERROR") {
			t.Errorf("worker %d logged above Info:\n%s", w.id, l)
		}
	}
}

// A dispatcher and three workers, each on a connection of its own, run for a few seconds
// through JetStream over one index: ten paid tenants and twenty free ones with two
// sources each, and one free tenant with a hundred and fifty, every source due again
// 200 ms after it runs. Afterwards every source ran, no two runs of a source overlapped,
// every run's completion is in the index and nothing is left claimed, each worker did a
// share of the runs, the quiet tenants of both lanes were served alike (Jain's index over
// their run counts ≥ 0.9), and no lane was ever sent more than the room the sink
// reported.
func TestWorkersThroughNATS(t *testing.T) {
	requireNATS(t)
	const paid, free, noisySources = 10, 20, 150
	s := newStore(t)
	for i := range paid {
		s.watch(fmt.Sprintf("paid%02d", i), "pro", 2)
	}
	for i := range free {
		s.watch(fmt.Sprintf("free%02d", i), tenancy.PlanFree, 2)
	}
	s.watch("noisy", tenancy.PlanFree, noisySources)
	f := newFleet(t, s, 5*time.Second, rotanats.Config{MaxAckPending: 24, InHand: 4, FetchWait: 200 * time.Millisecond})
	var all []*worker
	for i := range 3 {
		all = append(all, startWorker(t, s, f.dc, f.cfg, i, f.runs, nil))
	}
	f.workers = all
	start := time.Now()
	f.startFeeding(20 * time.Millisecond)
	for {
		time.Sleep(100 * time.Millisecond)
		ran, of := f.runs.ranSince(s.sources, start)
		if ran == of && time.Since(start) > 3*time.Second {
			break
		}
		if time.Since(start) > 20*time.Second {
			t.Fatalf("after 20 s %d of %d sources had run", ran, of)
		}
	}
	f.stopFeeding()
	waitStreamEmpty(t, f.js, f.cfg.Stream, 10*time.Second)
	f.stopWorkers()
	checkLogs(t, all...)

	runs := f.runs.all()
	checkEachRanAlone(t, s.sources, runs)
	s.checkNothingLost(f.runs.written())
	perWorker := make([]int, 3)
	var quiet []int
	perTenant := map[string]int{}
	for _, r := range runs {
		perWorker[r.worker]++
		perTenant[r.key.UserID]++
	}
	for user, n := range perTenant {
		if user != "noisy" {
			quiet = append(quiet, n)
		}
	}
	for i, n := range perWorker {
		if 6*n < len(runs) {
			t.Errorf("worker %d did %d of %d runs, less than a sixth", i, n, len(runs))
		}
	}
	if j := jain(quiet); j < 0.9 {
		t.Errorf("Jain's index over the quiet tenants' runs = %.3f, want ≥ 0.9; runs per tenant %v", j, perTenant)
	}
	if len(f.sink.overSent) > 0 {
		t.Errorf("lanes sent more than their room: %v", f.sink.overSent)
	}
	t.Logf("%d runs in %v: per worker %v; noisy %d; quiet tenants Jain %.3f", len(runs), time.Since(start).Round(time.Millisecond),
		perWorker, perTenant["noisy"], jain(quiet))
}

// watchQueue samples the stream every 50 ms until ctx ends and reports, at the end, each
// time a lane held more messages than its capacity or an entry was in the stream twice.
func (f *fleet) watchQueue(ctx context.Context, capacity int) (wait func() (problems []string, samples int)) {
	var problems []string
	samples := 0
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			perLane, twice, err := f.queued(ctx)
			if err == nil {
				samples++
				for lane, n := range perLane {
					if n > capacity {
						problems = append(problems, fmt.Sprintf("lane %q held %d messages, more than its capacity %d", lane, n, capacity))
					}
				}
				for _, tw := range twice {
					problems = append(problems, "twice in the stream: "+tw)
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

// waitRanSince waits until every source has run since t, for at most bound.
func (f *fleet) waitRanSince(t time.Time, bound time.Duration) {
	f.t.Helper()
	deadline := time.Now().Add(bound)
	for {
		ran, of := f.runs.ranSince(f.s.sources, t)
		if ran == of {
			return
		}
		if time.Now().After(deadline) {
			f.t.Fatalf("%v after %v: %d of %d sources had run", bound, t.Format(time.StampMilli), ran, of)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// A fleet of three workers loses one mid-run — its connection closed and its index
// calls failing, as when its process is killed, so it acknowledges nothing more — and
// later every worker stops, for longer than ClaimFor, while the dispatcher runs on. Then
// three new workers start. Throughout, no lane holds more messages than its capacity (the
// room the sink reports on an empty lane) and no entry is in the stream twice; during the
// outage claiming stops once the lanes are full; once the workers are back every source
// runs, and no two runs of a source ever overlapped. After a clean stop nothing is
// claimed and every written run is in the index.
func TestWorkerKilledAndStalled(t *testing.T) {
	requireNATS(t)
	s := newStore(t)
	for i := range 5 {
		s.watch(fmt.Sprintf("paid%02d", i), "pro", 2)
	}
	for i := range 10 {
		s.watch(fmt.Sprintf("free%02d", i), tenancy.PlanFree, 2)
	}
	s.watch("noisy", tenancy.PlanFree, 30)
	const claimFor, capacity = 2 * time.Second, 16
	f := newFleet(t, s, claimFor, rotanats.Config{MaxAckPending: capacity, InHand: 4, FetchWait: 200 * time.Millisecond})
	watchCtx, stopWatching := context.WithCancel(context.Background())
	defer stopWatching()
	watched := f.watchQueue(watchCtx, capacity)

	// The victim runs normally until armed; then each of its runs waits for its death.
	var armed sync.Once
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
	armed.Do(func() { close(arm) })
	select {
	case <-blocked:
	case <-time.After(10 * time.Second):
		t.Fatal("the victim started no run in 10 s")
	}
	time.Sleep(100 * time.Millisecond)
	victim.idx.dead.Store(true)
	victim.nc.Close()
	close(kill)
	victim.cancel()
	killedAt := time.Now()

	// The survivors run on until the victim's messages come back, their claims ended.
	time.Sleep(claimFor + rotanats.AckSlack + claimFor/4)
	f.workers = f.workers[1:]
	survivors := f.workers
	f.stopWorkers()
	stalledAt, sentBefore := time.Now(), f.sink.sentInAll()
	time.Sleep(claimFor + rotanats.AckSlack + claimFor/2)
	sentInStall := f.sink.sentInAll() - sentBefore
	if limit := capacity * len(testLanes); sentInStall > limit {
		t.Errorf("with no worker for %v the dispatcher sent %d items, more than the lanes' capacity %d", time.Since(stalledAt), sentInStall, limit)
	}

	backAt := time.Now()
	for i := range 3 {
		f.workers = append(f.workers, startWorker(t, s, f.dc, f.cfg, 3+i, f.runs, nil))
	}
	back := f.workers
	f.waitRanSince(backAt, 15*time.Second)
	f.stopFeeding()
	waitStreamEmpty(t, f.js, f.cfg.Stream, 10*time.Second)
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
	t.Logf("%d runs, %d of them killed at %v; %d items sent during the %v outage; back at %v; %d samples of the stream",
		len(runs), killed, killedAt.Format(time.StampMilli), sentInStall, backAt.Sub(stalledAt).Round(time.Millisecond),
		backAt.Format(time.StampMilli), samples)
}
