package rotanats_test

import (
	"testing"
	"time"

	"github.com/rotaworks/rota/bridge"
	"github.com/rotaworks/rota/dispatch"
	"github.com/rotaworks/rota/internal/fleettest"
	rotanats "github.com/rotaworks/rota/nats"
)

// BenchmarkWorkersThroughNATS runs every source of the bed once per round through
// JetStream — one dispatcher feeding a Sink, three worker processes on connections of
// their own — and then, over the same data, through the in-process bridge.Runner with as
// many worker slots. It reports jobs/s through NATS and nats/in-process, the ratio of the
// two throughputs measured in the same run.
func BenchmarkWorkersThroughNATS(b *testing.B) {
	requireNATS(b)
	s := newStore(b)
	bed := fleettest.NewBenchBed(b, s.Store)
	const claimFor = 30 * time.Second
	const procs, slots = fleettest.BenchProcs, fleettest.BenchSlots
	cfg := freshQueue(b, rotanats.Config{RunTime: fleettest.BenchRun, MaxAckPending: procs * slots * 4, InHand: slots * 4,
		FetchWait: 100 * time.Millisecond, Logger: quiet})
	dc := bed.DispatchConfig(b, claimFor)
	d, err := dispatch.New(s.Index, dc)
	if err != nil {
		b.Fatal(err)
	}
	_, js := connect(b)
	sink, err := rotanats.NewSink(js, d.Config(), cfg)
	if err != nil {
		b.Fatal(err)
	}
	for range procs {
		_, wjs := connect(b)
		idx, wl := s.be.process(b)
		br := &bridge.Bridge{Index: idx, Watchlist: wl, Pipeline: bed.Pipeline, Tiers: s.Tiers}
		w, err := bridge.NewWorker(br, bridge.WorkerConfig{Workers: slots, Logger: quiet})
		if err != nil {
			b.Fatal(err)
		}
		c, err := rotanats.NewConsumer(wjs, w, d.Config(), cfg)
		if err != nil {
			b.Fatal(err)
		}
		fleettest.Background(b, c.Run)
	}
	ridx, rwl := s.be.process(b)
	rd, err := dispatch.New(ridx, dc)
	if err != nil {
		b.Fatal(err)
	}
	runner, err := bridge.NewRunner(&bridge.Bridge{Index: ridx, Watchlist: rwl, Pipeline: bed.Pipeline, Tiers: s.Tiers},
		rd, bridge.RunnerConfig{Interval: 20 * time.Millisecond, Workers: procs * slots, Logger: quiet})
	if err != nil {
		b.Fatal(err)
	}
	feeder, err := bridge.NewFeeder(d, sink, bridge.FeederConfig{Interval: 20 * time.Millisecond, Logger: quiet})
	if err != nil {
		b.Fatal(err)
	}

	var throughNATS, inProcess time.Duration
	b.ResetTimer()
	for range b.N {
		// every item acknowledged, so its completion written
		throughNATS += bed.Round(b, feeder.Run, func() { waitStreamEmpty(b, js, cfg.Stream, time.Minute) })
		inProcess += bed.Round(b, runner.Run, func() {})
	}
	jobs := float64(b.N * len(s.Sources))
	natsRate, procRate := jobs/throughNATS.Seconds(), jobs/inProcess.Seconds()
	b.ReportMetric(natsRate, "jobs/s")
	b.ReportMetric(natsRate/procRate, "nats/in-process")
}
