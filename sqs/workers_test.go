package rotasqs_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/rotaworks/rota/dispatch"
	"github.com/rotaworks/rota/duework"
	"github.com/rotaworks/rota/internal/fleettest"
	rotasqs "github.com/rotaworks/rota/sqs"
)

// fleet is one dispatcher feeding the lane queues and the workers consuming them.
type fleet struct {
	*fleettest.Fleet
	t   *testing.T
	d   *dispatch.Dispatcher
	dc  dispatch.Config // the Dispatcher's, which the workers share
	cfg rotasqs.Config
}

func newFleet(t *testing.T, s *fleettest.Store, claimFor time.Duration, cfg rotasqs.Config) *fleet {
	t.Helper()
	dc := s.DispatchConfig(claimFor)
	f := &fleet{t: t, d: s.Dispatcher(dc), dc: dc, cfg: fresh(t, cfg)}
	f.Fleet = fleettest.NewFleet(t, s, newSink(t, f.dc, f.cfg))
	f.StartWorker = func(id int, hold fleettest.Hold) *fleettest.Worker {
		return startWorker(t, s, f.dc, f.cfg, id, f.Runs, hold)
	}
	return f
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
	fleettest.WaitFor(f.t, bound, "the queues are not empty", func() bool {
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
	s.WatchMix(paid, free, noisySources)
	f := newFleet(t, s, 5*time.Second, rotasqs.Config{InFlight: 24, InHand: 4, WaitTime: time.Second})
	all := f.AddWorkers(0, 3)
	start := time.Now()
	f.StartFeeding(f.d, 20*time.Millisecond)
	fleettest.WaitFor(t, 20*time.Second, "not every source ran", func() bool {
		ran, of := f.Runs.RanSince(s.Sources, start)
		return ran == of && time.Since(start) > 3*time.Second
	})
	f.StopFeeding()
	f.waitDrained(10 * time.Second)
	f.StopWorkers()
	fleettest.CheckLogs(t, all...)

	runs := f.CheckRuns()
	perWorker, perTenant, quietJain := fleettest.CheckShares(t, runs, 3, "noisy")
	t.Logf("%d runs in %v: per worker %v; noisy %d; quiet tenants Jain %.3f", len(runs), time.Since(start).Round(time.Millisecond),
		perWorker, perTenant["noisy"], quietJain)
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
	s.WatchMix(5, 10, 30)
	const claimFor, capacity = 2 * time.Second, 16
	f := newFleet(t, s, claimFor, rotasqs.Config{InFlight: capacity, InHand: 4, WaitTime: time.Second})
	watchCtx, stopWatching := context.WithCancel(context.Background())
	defer stopWatching()
	watched := f.WatchQueue(watchCtx, capacity, func(context.Context) (map[dispatch.Lane]int, []string, error) {
		held, err := f.held()
		return held, nil, err
	})

	// The victim runs normally until armed; then each of its runs waits for its death.
	v := fleettest.NewVictim(t)
	victim := f.StartWorker(0, v.Hold)
	f.Workers = []*fleettest.Worker{victim}
	f.AddWorkers(1, 2)
	f.StartFeeding(f.d, 20*time.Millisecond)
	time.Sleep(time.Second)
	v.KillMidRun(victim)

	// The survivors run on until the victim's messages come back, their claims ended.
	time.Sleep(claimFor + rotasqs.VisibilitySlack + 2*time.Second)
	survivors := f.Workers[1:]
	f.Workers = survivors
	f.StopWorkers()
	stalledAt, sentBefore := time.Now(), f.Sink.SentInAll()
	time.Sleep(2*claimFor + rotasqs.VisibilitySlack)
	sentInStall := f.Sink.SentInAll() - sentBefore
	if limit := capacity * len(fleettest.Lanes); sentInStall > limit {
		t.Errorf("with no worker for %v the dispatcher sent %d items, more than the lanes' capacity %d", time.Since(stalledAt), sentInStall, limit)
	}
	sentLate := f.Sink.SentInAll()
	time.Sleep(claimFor)
	if n := f.Sink.SentInAll() - sentLate; n > 0 {
		t.Errorf("with no worker for %v the dispatcher still claims: %d items sent in the last %v", time.Since(stalledAt), n, claimFor)
	}
	if l := f.FeedLog.String(); !strings.Contains(l, `level=WARN msg="rota: no worker is taking lane"`) {
		t.Errorf("with no worker for %v the dispatcher did not say so:\n%s", time.Since(stalledAt), l)
	}

	backAt := time.Now()
	back := f.AddWorkers(3, 3)
	f.WaitRanSince(backAt, 15*time.Second)
	f.StopFeeding()
	if l := f.FeedLog.String(); !strings.Contains(l, `level=INFO msg="rota: lane taken again"`) {
		t.Errorf("once the workers were back the dispatcher did not say so:\n%s", l)
	}
	f.waitDrained(10 * time.Second)
	f.StopWorkers()
	stopWatching()
	problems, samples := watched()
	for _, p := range problems {
		t.Error(p)
	}
	<-victim.Done()
	fleettest.CheckLogs(t, append(survivors, back...)...)

	runs := f.CheckRuns()
	killed := fleettest.Killed(runs)
	dropped := 0
	for _, w := range append(survivors, back...) {
		dropped += strings.Count(w.Logs.String(), `reason="claim ended"`)
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
	s.Watch("ana", "pro", 1)
	dc := s.DispatchConfig(30 * time.Second)
	cfg := fresh(t, rotasqs.Config{InHand: 1, WaitTime: time.Second})
	sink := newSink(t, dc, cfg)
	it := s.Claimed("paid", "ana", "s000", time.Now().Add(30*time.Second))
	if err := sink.Send(context.Background(), "paid", []dispatch.Item{it, it}); err != nil {
		t.Fatal(err)
	}
	runs := fleettest.NewRunLog(t, "worker")
	hold := func(ctx context.Context, _ duework.Key) bool {
		time.Sleep(500 * time.Millisecond) // long enough for the other copy to arrive
		return false
	}
	ws := []*fleettest.Worker{startWorker(t, s, dc, cfg, 0, runs, hold), startWorker(t, s, dc, cfg, 1, runs, hold)}
	waitEmpty(t, cfg.QueueName("paid"))
	for _, w := range ws {
		w.Stop(t)
	}
	if got := runs.All(); len(got) != 1 {
		t.Errorf("the item ran %d times, want once: %+v", len(got), got)
	}
	s.CheckNothingLost(runs.Written())
}
