package rotanats_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/rotaworks/rota/bridge"
	"github.com/rotaworks/rota/dispatch"
	"github.com/rotaworks/rota/duework"
	"github.com/rotaworks/rota/internal/fleettest"
	rotanats "github.com/rotaworks/rota/nats"
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

// store is the state the dispatcher and the workers share — the index, the watchlist and
// the plans in one PostgreSQL schema, the tests' on a pool of their own — and the sources
// the tenants watch; each worker process reaches the schema on a pool of its own.
type store struct {
	*fleettest.Store
	be *backend
}

func newStore(tb testing.TB) *store {
	tb.Helper()
	be, idx, wl, plans := newBackend(tb)
	return &store{Store: fleettest.NewStore(tb, idx, wl, plans), be: be}
}

func laneNames() []dispatch.Lane {
	var ls []dispatch.Lane
	for _, l := range fleettest.Lanes {
		ls = append(ls, l.Lane)
	}
	return ls
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

// startWorker starts worker id's Consumer over s, for a Dispatcher configured with dc,
// with cfg: a connection and a pool of its own; its pipeline records into runs, calling
// hold while each run is under way. Its Worker's claim margin is ClaimFor/4, its slots 4.
// Killing it closes its connection.
func startWorker(t testing.TB, s *store, dc dispatch.Config, cfg rotanats.Config, id int, runs *fleettest.RunLog, hold fleettest.Hold) *fleettest.Worker {
	t.Helper()
	return startWorkerWith(t, s, dc, cfg, 4, id, runs, hold)
}

// startWorkerWith is startWorker with a Worker of slots slots.
func startWorkerWith(t testing.TB, s *store, dc dispatch.Config, cfg rotanats.Config, slots, id int, runs *fleettest.RunLog,
	hold fleettest.Hold) *fleettest.Worker {
	t.Helper()
	nc, js := connect(t)
	idx, wl := s.be.process(t)
	w := fleettest.NewWorker(t, id, bridge.Bridge{Index: idx, Watchlist: wl, Pipeline: runs.Pipeline(id, hold), Tiers: s.Tiers},
		bridge.WorkerConfig{Workers: slots, ClaimMargin: dc.ClaimFor / 4, MaxClockSkew: 100 * time.Millisecond, FlushInterval: 20 * time.Millisecond})
	w.OnKill = nc.Close
	cfg.Logger = w.Logger
	c, err := rotanats.NewConsumer(js, w.Bridge, dc, cfg)
	if err != nil {
		t.Fatal(err)
	}
	w.Start(c.Run)
	return w
}

// decode is bridge.DecodeItem.
func decode(b []byte) (dispatch.Item, error) { return bridge.DecodeItem(b) }
