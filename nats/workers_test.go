package rotanats_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/rotaworks/rota/dispatch"
	"github.com/rotaworks/rota/internal/fleettest"
	rotanats "github.com/rotaworks/rota/nats"
)

// fleet is one dispatcher feeding a stream and the workers consuming it.
type fleet struct {
	*fleettest.Fleet
	d   *dispatch.Dispatcher
	dc  dispatch.Config // the Dispatcher's, which the workers share
	cfg rotanats.Config
	js  jetstream.JetStream // the tests' own connection, for reading the stream
}

func newFleet(t *testing.T, s *store, claimFor time.Duration, cfg rotanats.Config) *fleet {
	t.Helper()
	dc := s.DispatchConfig(claimFor)
	f := &fleet{d: s.Dispatcher(dc), dc: dc, cfg: freshQueue(t, cfg)}
	_, f.js = connect(t)
	_, js := connect(t)
	sinkCfg := f.cfg
	sinkCfg.Logger = quiet
	sk, err := rotanats.NewSink(js, f.d.Config(), sinkCfg)
	if err != nil {
		t.Fatal(err)
	}
	f.Fleet = fleettest.NewFleet(t, s.Store, sk)
	f.StartWorker = func(id int, hold fleettest.Hold) *fleettest.Worker {
		return startWorker(t, s, f.dc, f.cfg, id, f.Runs, hold)
	}
	return f
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
			twice = append(twice, fmt.Sprintf("twice in the stream: %s at %d and %d", key, first, seq))
		}
		seen[key] = seq
	}
	return perLane, twice, nil
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
	s.WatchMix(paid, free, noisySources)
	f := newFleet(t, s, 5*time.Second, rotanats.Config{MaxAckPending: 24, InHand: 4, FetchWait: 200 * time.Millisecond})
	all := f.AddWorkers(0, 3)
	start := time.Now()
	f.StartFeeding(f.d, 20*time.Millisecond)
	fleettest.WaitFor(t, 20*time.Second, "not every source ran", func() bool {
		ran, of := f.Runs.RanSince(s.Sources, start)
		return ran == of && time.Since(start) > 3*time.Second
	})
	f.StopFeeding()
	waitStreamEmpty(t, f.js, f.cfg.Stream, 10*time.Second)
	f.StopWorkers()
	fleettest.CheckLogs(t, all...)

	runs := f.CheckRuns()
	perWorker, perTenant, quietJain := fleettest.CheckShares(t, runs, 3, "noisy")
	t.Logf("%d runs in %v: per worker %v; noisy %d; quiet tenants Jain %.3f", len(runs), time.Since(start).Round(time.Millisecond),
		perWorker, perTenant["noisy"], quietJain)
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
	s.WatchMix(5, 10, 30)
	const claimFor, capacity = 2 * time.Second, 16
	f := newFleet(t, s, claimFor, rotanats.Config{MaxAckPending: capacity, InHand: 4, FetchWait: 200 * time.Millisecond})
	watchCtx, stopWatching := context.WithCancel(context.Background())
	defer stopWatching()
	watched := f.WatchQueue(watchCtx, capacity, f.queued)

	// The victim runs normally until armed; then each of its runs waits for its death.
	v := fleettest.NewVictim(t)
	victim := f.StartWorker(0, v.Hold)
	f.Workers = []*fleettest.Worker{victim}
	f.AddWorkers(1, 2)
	f.StartFeeding(f.d, 20*time.Millisecond)
	time.Sleep(time.Second)
	v.KillMidRun(victim)
	killedAt := time.Now()

	// The survivors run on until the victim's messages come back, their claims ended.
	time.Sleep(claimFor + rotanats.AckSlack + claimFor/4)
	f.Workers = f.Workers[1:]
	survivors := f.Workers
	f.StopWorkers()
	stalledAt, sentBefore := time.Now(), f.Sink.SentInAll()
	time.Sleep(claimFor + rotanats.AckSlack + claimFor/2)
	sentInStall := f.Sink.SentInAll() - sentBefore
	if limit := capacity * len(fleettest.Lanes); sentInStall > limit {
		t.Errorf("with no worker for %v the dispatcher sent %d items, more than the lanes' capacity %d", time.Since(stalledAt), sentInStall, limit)
	}

	backAt := time.Now()
	back := f.AddWorkers(3, 3)
	f.WaitRanSince(backAt, 15*time.Second)
	f.StopFeeding()
	waitStreamEmpty(t, f.js, f.cfg.Stream, 10*time.Second)
	f.StopWorkers()
	stopWatching()
	problems, samples := watched()
	for _, p := range problems {
		t.Error(p)
	}
	<-victim.Done()
	fleettest.CheckLogs(t, append(survivors, back...)...)

	runs := f.CheckRuns()
	t.Logf("%d runs, %d of them killed at %v; %d items sent during the %v outage; back at %v; %d samples of the stream",
		len(runs), fleettest.Killed(runs), killedAt.Format(time.StampMilli), sentInStall, backAt.Sub(stalledAt).Round(time.Millisecond),
		backAt.Format(time.StampMilli), samples)
}
