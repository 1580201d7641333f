package rotanats_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/rotaworks/rota/bridge"
	"github.com/rotaworks/rota/dispatch"
	"github.com/rotaworks/rota/duework"
	"github.com/rotaworks/rota/internal/fleettest"
	rotanats "github.com/rotaworks/rota/nats"
)

// A Consumer runs a current item and acknowledges it once its completion is written;
// hands back unrun an item whose claim ends within the Worker's margin and drops its
// message; and terminates messages that do not decode, with one Warn line for the two of
// them and no Error line.
func TestConsumerRunsDropsAndTerminates(t *testing.T) {
	s := newStore(t)
	s.Watch("ana", "pro", 2)
	dc := s.DispatchConfig(time.Minute) // the Worker's margin: 15 s
	cfg := freshQueue(t, rotanats.Config{FetchWait: 200 * time.Millisecond})
	runs := fleettest.NewRunLog(t, "worker")
	w := startWorker(t, s, dc, cfg, 0, runs, nil)
	sink, js := newSink(t, s.Dispatcher(dc), cfg)
	ctx := context.Background()
	now := time.Now()
	good := s.Claimed("paid", "ana", "s000", now.Add(time.Minute))
	late := s.Claimed("paid", "ana", "s001", now.Add(10*time.Second))
	if err := sink.Send(ctx, "paid", []dispatch.Item{good, late}); err != nil {
		t.Fatal(err)
	}
	for _, garbled := range []string{`{"v":1}`, "not JSON"} {
		if _, err := js.Publish(ctx, cfg.Subject+".paid", []byte(garbled)); err != nil {
			t.Fatal(err)
		}
	}
	waitStreamEmpty(t, js, cfg.Stream, 10*time.Second)
	w.Stop(t)

	got := runs.All()
	if len(got) != 1 || got[0].Key.WorkKey != "s000" {
		t.Fatalf("runs %+v, want one of s000", got)
	}
	if until, e := s.State("ana", "s000"); !until.IsZero() || e.LastRunAt.IsZero() {
		t.Errorf("s000 after its run: claimed until %v, last run %v; want unclaimed and run", until, e.LastRunAt)
	}
	if until, e := s.State("ana", "s001"); !until.IsZero() || !e.LastRunAt.IsZero() {
		t.Errorf("s001, late: claimed until %v, last run %v; want handed back unrun", until, e.LastRunAt)
	}
	logs := w.Logs.String()
	if strings.Contains(logs, "level=ERROR") || strings.Count(logs, `level=WARN msg="rota: message terminated, it does not decode"`) != 1 {
		t.Errorf("want one Warn line for the two messages that do not decode, and no Error line:\n%s", logs)
	}
}

// waitStreamEmpty waits until stream holds no message, for at most bound.
func waitStreamEmpty(tb testing.TB, js jetstream.JetStream, stream string, bound time.Duration) {
	tb.Helper()
	for deadline := time.Now().Add(bound); ; time.Sleep(5 * time.Millisecond) {
		n := streamMsgs(tb, js, stream)
		if n == 0 {
			return
		}
		if time.Now().After(deadline) {
			tb.Fatalf("the stream still holds %d messages after %v", n, bound)
		}
	}
}

// Run declares each lane's consumer as the Config says: explicit acknowledgement,
// AckWait ClaimFor + AckSlack, MaxAckPending, no delivery limit, the lane's subject.
func TestConsumerDeclaresLanes(t *testing.T) {
	s := newStore(t)
	dc := s.DispatchConfig(30 * time.Second)
	cfg := freshQueue(t, rotanats.Config{MaxAckPending: 12, FetchWait: 100 * time.Millisecond})
	w := startWorker(t, s, dc, cfg, 0, fleettest.NewRunLog(t, "worker"), nil)
	_, js := connect(t)
	ctx := context.Background()
	for _, lane := range laneNames() {
		var info *jetstream.ConsumerInfo
		for deadline := time.Now().Add(5 * time.Second); info == nil; time.Sleep(20 * time.Millisecond) {
			c, err := js.Consumer(ctx, cfg.Stream, rotanats.LaneToken(lane))
			if err == nil {
				info = c.CachedInfo()
			} else if time.Now().After(deadline) {
				t.Fatalf("lane %q: no consumer after 5 s: %v", lane, err)
			}
		}
		c := info.Config
		if c.AckPolicy != jetstream.AckExplicitPolicy || c.AckWait != dc.ClaimFor+rotanats.AckSlack || c.MaxAckPending != 12 ||
			c.MaxDeliver != -1 || c.FilterSubject != cfg.Subject+"."+rotanats.LaneToken(lane) {
			t.Errorf("lane %q: consumer config %+v", lane, c)
		}
	}
	w.Stop(t)
}

// A worker whose dispatch.Config or Subject disagrees with the stream the dispatcher
// declared does not start: Run returns at once an error wrapping ErrStreamMismatch that
// names both values, declares no lane consumer, and has stopped the Worker.
func TestConsumerRefusesAStreamThatDisagrees(t *testing.T) {
	s := newStore(t)
	s.Watch("ana", "pro", 1)
	cfg := freshQueue(t, rotanats.Config{FetchWait: 100 * time.Millisecond})
	sink, js := newSink(t, s.Dispatcher(s.DispatchConfig(30*time.Second)), cfg)
	room(t, sink) // declares the stream, with a duplicate window of 30 s
	ctx := context.Background()
	for _, tt := range []struct {
		name     string
		claimFor time.Duration
		subject  string
		want     []string
	}{
		{"another ClaimFor", 10 * time.Second, cfg.Subject, []string{"30s", "10s"}},
		{"another Subject", 30 * time.Second, cfg.Subject + "x", []string{cfg.Subject + ".*", cfg.Subject + "x.paid"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			wcfg := cfg
			wcfg.Subject = tt.subject
			w := startWorker(t, s, s.DispatchConfig(tt.claimFor), wcfg, 0, fleettest.NewRunLog(t, "worker"), nil)
			var err error
			select {
			case err = <-w.Done():
			case <-time.After(10 * time.Second):
				w.Cancel()
				t.Fatal("Run still runs after 10 s")
			}
			if !errors.Is(err, rotanats.ErrStreamMismatch) {
				t.Fatalf("Run = %v, want ErrStreamMismatch", err)
			}
			for _, v := range tt.want {
				if !strings.Contains(err.Error(), v) {
					t.Errorf("Run = %v, want it to name %s", err, v)
				}
			}
			for _, lane := range laneNames() {
				if _, err := js.Consumer(ctx, cfg.Stream, rotanats.LaneToken(lane)); !errors.Is(err, jetstream.ErrConsumerNotFound) {
					t.Errorf("lane %q: consumer lookup = %v, want none declared", lane, err)
				}
			}
			rep := w.Bridge.Do(ctx, s.Claimed("paid", "ana", "s000", time.Now().Add(time.Minute)), time.Now())
			if !errors.Is(rep.Err, bridge.ErrWorkerStopped) {
				t.Errorf("Do after Run returned: %v, want ErrWorkerStopped", rep.Err)
			}
		})
	}
}

// A clean stop: when its context ends, Run stops pulling, the Worker hands back the items
// still waiting for a slot, the running one ends and is written, every message handed to
// Do is acknowledged, the messages never pulled stay queued, Run returns nil, and nothing
// is logged above Info.
func TestConsumerStopsCleanly(t *testing.T) {
	s := newStore(t)
	s.Watch("ana", "pro", 6)
	dc := s.DispatchConfig(time.Minute)
	cfg := freshQueue(t, rotanats.Config{InHand: 4, FetchWait: 100 * time.Millisecond})
	sink, js := newSink(t, s.Dispatcher(dc), cfg)
	ctx := context.Background()
	var items []dispatch.Item
	for i := range 6 {
		items = append(items, s.Claimed("paid", "ana", fmt.Sprintf("s%03d", i), time.Now().Add(time.Minute)))
	}
	if err := sink.Send(ctx, "paid", items); err != nil {
		t.Fatal(err)
	}
	started, release := make(chan struct{}, 6), make(chan struct{})
	runs := fleettest.NewRunLog(t, "worker")
	// One slot: the first item runs until released, the three others pulled with it wait.
	w := startWorkerWith(t, s, dc, cfg, 1, 0, runs, func(context.Context, duework.Key) bool {
		started <- struct{}{}
		<-release
		return false
	})
	select {
	case <-started:
	case <-time.After(10 * time.Second):
		t.Fatal("no item started in 10 s")
	}
	w.Cancel()
	for deadline := time.Now().Add(10 * time.Second); w.Index.Unclaimed() < 3; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("10 s after the stop %d items were handed back, want the 3 waiting for a slot", w.Index.Unclaimed())
		}
	}
	close(release)
	select {
	case err := <-w.Done():
		if err != nil {
			t.Errorf("Run = %v, want nil", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Run did not return within 30 s")
	}
	if n := streamMsgs(t, js, cfg.Stream); n != 2 {
		t.Errorf("the stream holds %d messages, want the 2 never pulled", n)
	}
	var ran, back, queued []string
	for _, it := range items {
		until, e := s.State("ana", it.Claim.Entry.WorkKey)
		switch {
		case until.IsZero() && !e.LastRunAt.IsZero():
			ran = append(ran, e.WorkKey)
		case until.IsZero():
			back = append(back, e.WorkKey)
		case until.Equal(it.Claim.Until):
			queued = append(queued, e.WorkKey)
		}
	}
	if len(ran) != 1 || len(back) != 3 || len(queued) != 2 || len(runs.All()) != 1 {
		t.Errorf("ran %v, handed back %v, still claimed %v, runs %d: want 1, 3, 2 and 1", ran, back, queued, len(runs.All()))
	}
	fleettest.CheckLogs(t, w)
}

// A claim runs at most once whatever the broker's settings: a lane consumer whose AckWait
// is shorter than the claim redelivers a message while its first copy still runs, and
// the copy — on either worker — is acknowledged unrun. The message leaves the stream
// while the first copy runs; the entry is run and written once.
func TestRedeliveryWhileRunningRunsOnce(t *testing.T) {
	s := newStore(t)
	s.Watch("ana", "pro", 1)
	dc := s.DispatchConfig(30 * time.Second)
	cfg := freshQueue(t, rotanats.Config{FetchWait: 100 * time.Millisecond})
	runs := fleettest.NewRunLog(t, "worker")
	release := make(chan struct{})
	hold := func(context.Context, duework.Key) bool {
		<-release
		return false
	}
	workers := []*fleettest.Worker{startWorker(t, s, dc, cfg, 0, runs, hold), startWorker(t, s, dc, cfg, 1, runs, hold)}
	sink, js := newSink(t, s.Dispatcher(dc), cfg)
	ctx := context.Background()
	// Once both workers pull from the lane (they declared its consumer), its AckWait is
	// cut to a second, far shorter than the claim.
	var cons jetstream.Consumer
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		var err error
		cons, err = js.Consumer(ctx, cfg.Stream, rotanats.LaneToken("paid"))
		if err == nil && cons.CachedInfo().NumWaiting >= 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the workers are not both pulling after 10 s (%v)", err)
		}
	}
	short := cons.CachedInfo().Config
	short.AckWait = time.Second
	if _, err := js.UpdateConsumer(ctx, cfg.Stream, short); err != nil {
		t.Fatal(err)
	}
	if err := sink.Send(ctx, "paid", []dispatch.Item{s.Claimed("paid", "ana", "s000", time.Now().Add(dc.ClaimFor))}); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); streamMsgs(t, js, cfg.Stream) > 0; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Error("10 s on, with an AckWait of 1 s, the copy of the running item is not acknowledged")
			break
		}
	}
	close(release)
	for _, w := range workers {
		w.Stop(t)
	}
	if got := runs.All(); len(got) != 1 {
		var by []int
		for _, r := range got {
			by = append(by, r.Runner)
		}
		t.Errorf("%d runs of the item, by workers %v; want 1", len(got), by)
	}
	if !strings.Contains(workers[0].Logs.String()+workers[1].Logs.String(), `msg="rota: message redelivered"`) {
		t.Error("no worker was redelivered the message")
	}
	if until, e := s.State("ana", "s000"); !until.IsZero() || e.MissStreak != 1 {
		t.Errorf("after the stop: claimed until %v, streak %d; want unclaimed and written once", until, e.MissStreak)
	}
}

func TestNewConsumerRefuses(t *testing.T) {
	_, err := rotanats.NewConsumer(nil, nil, dispatch.Config{}, rotanats.Config{FetchWait: -1})
	for _, want := range []string{"js", "Worker", "dispatch.Config.Lanes", "dispatch.Config.ClaimFor", "Config.FetchWait"} {
		if !errors.Is(err, rotanats.ErrInvalidConfig) || !strings.Contains(err.Error(), want) {
			t.Errorf("NewConsumer(nil, nil, zero, bad) = %v, want ErrInvalidConfig naming %s", err, want)
		}
	}
}
