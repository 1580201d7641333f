package rotanats_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/rotaworks/rota/bridge"
	"github.com/rotaworks/rota/duework"
	rotanats "github.com/rotaworks/rota/nats"
	"github.com/rotaworks/rota/tenancy"
)

// A fleet's processes start together: its dispatcher's Sink and its workers' Consumers
// all declare the stream at once, each on a connection of its own. Every one of them
// gets it, whoever created it; none fails because another's create was under way.
func TestProcessesDeclareTheStreamAtOnce(t *testing.T) {
	const sinks, consumers = 3, 3
	d := memDispatcher(t, time.Minute, "paid", "free")
	for range 4 {
		cfg := freshQueue(t, rotanats.Config{FetchWait: 100 * time.Millisecond, Logger: quiet})
		// The Consumers run until ctx ends, long after they declared the stream, however
		// slow the machine; the Sinks' Room returns once it has.
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		var (
			wg   sync.WaitGroup
			mu   sync.Mutex
			errs []error
		)
		note := func(err error) {
			mu.Lock()
			errs = append(errs, err)
			mu.Unlock()
		}
		for range sinks {
			s, _ := newSink(t, d, cfg)
			wg.Go(func() {
				_, err := s.Room(context.Background())
				note(err)
			})
		}
		for range consumers {
			_, js := connect(t)
			w, err := bridge.NewWorker(&bridge.Bridge{Index: duework.NewMemory(), Watchlist: tenancy.NewMemoryWatchlist(),
				Pipeline: bridge.PipelineFunc(func(context.Context, tenancy.Context, tenancy.WatchlistEntry) (bridge.Result, error) {
					return bridge.Result{}, nil
				})}, bridge.WorkerConfig{Logger: quiet})
			if err != nil {
				t.Fatal(err)
			}
			c, err := rotanats.NewConsumer(js, w, d.Config(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			wg.Go(func() { note(c.Run(ctx)) })
		}
		wg.Wait()
		cancel()
		if err := errors.Join(errs...); err != nil {
			t.Fatalf("processes declaring the stream at once: %v", err)
		}
	}
}
