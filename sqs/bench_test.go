package rotasqs_test

import (
	"context"
	"testing"
	"time"

	"github.com/rotaworks/rota/bridge"
	"github.com/rotaworks/rota/dispatch"
	"github.com/rotaworks/rota/internal/fleettest"
	rotasqs "github.com/rotaworks/rota/sqs"
)

// waitQueuesEmpty waits until every lane's queue holds nothing: every item deleted, so its
// completion written.
func waitQueuesEmpty(b *testing.B, cfg rotasqs.Config) {
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(time.Millisecond) {
		held := 0
		for _, lc := range fleettest.BenchLanes {
			n, err := readDepth(cfg.QueueName(lc.Lane))
			if err != nil {
				b.Fatal(err)
			}
			held += n[0] + n[1] + n[2]
		}
		if held == 0 {
			return
		}
		if time.Now().After(deadline) {
			b.Fatalf("the queues still hold %d messages after a minute", held)
		}
	}
}

// BenchmarkWorkersThroughSQS runs every source of the bed once per round through the lane
// queues — one dispatcher feeding a Sink, three worker processes with SQS clients of their
// own — and then, over the same data, through the in-process bridge.Runner with as many
// worker slots; both over one in-memory index, so that the difference is the queue's. It
// reports jobs/s through SQS and sqs/in-process, the ratio of the two throughputs measured
// in the same run.
func BenchmarkWorkersThroughSQS(b *testing.B) {
	s := newStore(b)
	bed := fleettest.NewBenchBed(b, s)
	const claimFor = 30 * time.Second
	const procs, slots = fleettest.BenchProcs, fleettest.BenchSlots
	dc := bed.DispatchConfig(b, claimFor)
	cfg := fresh(b, rotasqs.Config{InFlight: procs * slots, RunTime: fleettest.BenchRun, InHand: slots * 2, WaitTime: time.Second, Logger: quiet})
	sink, err := rotasqs.NewSink(client(), dc, cfg)
	if err != nil {
		b.Fatal(err)
	}
	for range procs {
		br := &bridge.Bridge{Index: s.Index, Watchlist: s.Watchlist, Pipeline: bed.Pipeline, Tiers: s.Tiers}
		w, err := bridge.NewWorker(br, bridge.WorkerConfig{Workers: slots, ClaimMargin: 2 * time.Second, Logger: quiet})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = w.Stop(context.Background()) }) // after its consumer's Run has returned
		c, err := rotasqs.NewConsumer(client(), w, dc, cfg)
		if err != nil {
			b.Fatal(err)
		}
		fleettest.Background(b, c.Run)
	}
	d, err := dispatch.New(s.Index, dc)
	if err != nil {
		b.Fatal(err)
	}
	runner, err := bridge.NewRunner(&bridge.Bridge{Index: s.Index, Watchlist: s.Watchlist, Pipeline: bed.Pipeline, Tiers: s.Tiers},
		d, bridge.RunnerConfig{Interval: 20 * time.Millisecond, Workers: procs * slots, Logger: quiet})
	if err != nil {
		b.Fatal(err)
	}
	feeder, err := bridge.NewFeeder(d, sink, bridge.FeederConfig{Interval: 20 * time.Millisecond, Logger: quiet})
	if err != nil {
		b.Fatal(err)
	}

	var throughSQS, inProcess time.Duration
	b.ResetTimer()
	for range b.N {
		throughSQS += bed.Round(b, feeder.Run, func() { waitQueuesEmpty(b, cfg) })
		inProcess += bed.Round(b, runner.Run, func() {})
	}
	jobs := float64(b.N * len(s.Sources))
	sqsRate, procRate := jobs/throughSQS.Seconds(), jobs/inProcess.Seconds()
	b.ReportMetric(sqsRate, "jobs/s")
	b.ReportMetric(sqsRate/procRate, "sqs/in-process")
}
