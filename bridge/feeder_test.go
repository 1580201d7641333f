package bridge_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/rotaworks/rota/bridge"
	"github.com/rotaworks/rota/dispatch"
	"github.com/rotaworks/rota/duework"
	"github.com/rotaworks/rota/tenancy"
)

// memSink is an in-memory queue with one FIFO per lane, holding items in their wire
// form, as a host's queue would. Its Room is what the lane's active consumers can start
// before the claims end (perConsumer each), less every item sent and not acknowledged;
// before it answers, it drops the items whose claims end within the workers' margin. It
// records every breach of the Feeder's guarantee: more sent than the last Room allowed,
// or an entry queued twice.
type memSink struct {
	t           *testing.T
	margin      time.Duration
	perConsumer int

	mu         sync.Mutex
	changed    chan struct{}
	queue      map[dispatch.Lane][][]byte
	queued     map[duework.Key]bool
	inflight   map[dispatch.Lane]int
	consumers  map[dispatch.Lane]int
	room       dispatch.Take
	sentSince  map[dispatch.Lane]int
	sends      int
	dropped    int
	maxPending int
	failLane   dispatch.Lane // Send fails for this lane
}

func newMemSink(t *testing.T, margin time.Duration, perConsumer int) *memSink {
	return &memSink{t: t, margin: margin, perConsumer: perConsumer, changed: make(chan struct{}),
		queue: map[dispatch.Lane][][]byte{}, queued: map[duework.Key]bool{}, inflight: map[dispatch.Lane]int{},
		consumers: map[dispatch.Lane]int{}, sentSince: map[dispatch.Lane]int{}}
}

func (s *memSink) notify() {
	close(s.changed)
	s.changed = make(chan struct{})
}

func (s *memSink) decode(msg []byte) dispatch.Item {
	it, err := bridge.DecodeItem(msg)
	if err != nil {
		s.t.Errorf("a queued message does not decode: %v", err)
	}
	return it
}

func (s *memSink) Room(ctx context.Context) (dispatch.Take, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	take := dispatch.Take{PerLane: map[dispatch.Lane]int{}}
	for _, lane := range []dispatch.Lane{"pro", "free"} {
		s.queue[lane] = slices.DeleteFunc(s.queue[lane], func(msg []byte) bool {
			it := s.decode(msg)
			if now.Before(it.Claim.Until.Add(-s.margin)) {
				return false
			}
			delete(s.queued, it.Claim.Entry.Key())
			s.dropped++
			return true
		})
		n := max(0, s.consumers[lane]*s.perConsumer-len(s.queue[lane])-s.inflight[lane])
		take.PerLane[lane] = n
		take.Total += n
	}
	s.room = take
	clear(s.sentSince)
	return take, nil
}

func (s *memSink) Send(ctx context.Context, lane dispatch.Lane, items []dispatch.Item) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if lane == s.failLane {
		return errBoom
	}
	s.sentSince[lane] += len(items)
	total := 0
	for _, n := range s.sentSince {
		total += n
	}
	if s.sentSince[lane] > s.room.PerLane[lane] || total > s.room.Total {
		s.t.Errorf("sent %d items of %s (%d in all) since Room said %+v", s.sentSince[lane], lane, total, s.room)
	}
	for _, it := range items {
		if it.Lane != lane {
			s.t.Errorf("an item of lane %s sent as %s", it.Lane, lane)
		}
		k := it.Claim.Entry.Key()
		if s.queued[k] {
			s.t.Errorf("%v queued twice", k)
		}
		s.queued[k] = true
		msg, err := bridge.EncodeItem(it)
		if err != nil {
			s.t.Errorf("EncodeItem: %v", err)
		}
		s.queue[lane] = append(s.queue[lane], msg)
	}
	s.sends += len(items)
	pending := 0
	for l := range s.queue {
		pending += len(s.queue[l]) + s.inflight[l]
	}
	s.maxPending = max(s.maxPending, pending)
	s.notify()
	return nil
}

// pull takes the next message of lane, or reports false once ctx ends.
func (s *memSink) pull(ctx context.Context, lane dispatch.Lane) ([]byte, bool) {
	for ctx.Err() == nil {
		s.mu.Lock()
		if q := s.queue[lane]; len(q) > 0 {
			msg := q[0]
			s.queue[lane] = q[1:]
			delete(s.queued, s.decode(msg).Claim.Entry.Key())
			s.inflight[lane]++
			s.mu.Unlock()
			return msg, true
		}
		changed := s.changed
		s.mu.Unlock()
		select {
		case <-ctx.Done():
		case <-changed:
		}
	}
	return nil, false
}

func (s *memSink) ack(lane dispatch.Lane) {
	s.mu.Lock()
	s.inflight[lane]--
	s.mu.Unlock()
}

func (s *memSink) consumer(lane dispatch.Lane, delta int) {
	s.mu.Lock()
	s.consumers[lane] += delta
	s.mu.Unlock()
}

func (s *memSink) stats() (sends, dropped, maxPending int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sends, s.dropped, s.maxPending
}

// consume runs one consumer of lane until ctx ends: it decodes each message, runs it on wk
// and acknowledges it once Do returns, whatever the status.
func consume(ctx context.Context, s *memSink, lane dispatch.Lane, wk *bridge.Worker, reps chan<- bridge.ItemReport) {
	s.consumer(lane, 1)
	defer s.consumer(lane, -1)
	for {
		msg, ok := s.pull(ctx, lane)
		if !ok {
			return
		}
		item, err := bridge.DecodeItem(msg)
		if err == nil {
			rep := wk.Do(context.Background(), item, time.Now())
			select {
			case reps <- rep:
			default:
				panic(fmt.Sprintf("too many reports; last %+v", rep))
			}
		}
		s.ack(lane)
	}
}

// runLog is a pipeline that takes a while, fails the test when two runs of one source
// overlap, and records when each source ran.
type runLog struct {
	t     *testing.T
	takes time.Duration
	mu    sync.Mutex
	live  map[string]bool
	ran   map[string][]time.Time
}

func (p *runLog) Run(ctx context.Context, tc tenancy.Context, e tenancy.WatchlistEntry) (bridge.Result, error) {
	key := tc.UserID() + "/" + e.Slug
	p.mu.Lock()
	if p.live[key] {
		p.t.Errorf("%s runs twice at once", key)
	}
	p.live[key] = true
	p.ran[key] = append(p.ran[key], time.Now())
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		delete(p.live, key)
		p.mu.Unlock()
	}()
	select {
	case <-ctx.Done():
		return bridge.Result{}, ctx.Err()
	case <-time.After(p.takes):
		return hit, nil
	}
}

// TestFeederUnderAWorkerOutage: a Feeder, an in-memory queue and one consumer per lane on
// a Worker, too slow for the work due, with every consumer stopped for three times
// ClaimFor. Throughout, nothing is sent beyond
// the room the queue last reported, no entry is queued twice and no source runs twice at
// once; while the consumers are away nothing is claimed; once they are back every source
// runs again, and none is lost.
func TestFeederUnderAWorkerOutage(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		pipe := &runLog{t: t, takes: 3 * time.Second, live: map[string]bool{}, ran: map[string][]time.Time{}}
		idx := newCountingIndex()
		w := newWorld(t, worldConfig{idx: idx, pipe: pipe, claimFor: time.Minute, global: 40, lanes: []dispatch.LaneCapacity{
			{Lane: "pro", PerUserLimit: 2, PerCycleLimit: 20},
			{Lane: "free", PerUserLimit: 1, PerCycleLimit: 20},
		}})
		var keys []string
		for u := range 30 {
			plan := []tenancy.PlanID{"pro", tenancy.PlanFree}[u%2]
			for s := range 3 {
				user, slug := fmt.Sprintf("u%02d", u), fmt.Sprintf("s%d", s)
				w.add(t, user, plan, slug, "fast", start)
				keys = append(keys, user+"/"+slug)
			}
		}
		const margin = 10 * time.Second
		sink := newMemSink(t, margin, 4)
		f, err := bridge.NewFeeder(w.d, sink, bridge.FeederConfig{Logger: slog.New(slog.NewTextHandler(w.out, nil))})
		if err != nil {
			t.Fatal(err)
		}
		wk := w.worker(t, bridge.WorkerConfig{Workers: 2, ClaimMargin: margin})
		reps := make(chan bridge.ItemReport, 2000)
		feedCtx, stopFeed := context.WithCancel(context.Background())
		fed := make(chan error, 1)
		go func() { fed <- f.Run(feedCtx) }()
		startConsumers := func() (stop func()) {
			ctx, cancel := context.WithCancel(context.Background())
			var wg sync.WaitGroup
			for _, lane := range []dispatch.Lane{"pro", "free"} {
				wg.Go(func() { consume(ctx, sink, lane, wk, reps) })
			}
			return func() { cancel(); wg.Wait() }
		}

		stop := startConsumers()
		time.Sleep(3 * time.Minute)
		stop()
		away := time.Now()
		time.Sleep(time.Second) // the next Room sees no consumer
		sendsBefore, _, _ := sink.stats()
		claimsBefore := idx.n("Claim")
		time.Sleep(3 * time.Minute)
		if sends, _, _ := sink.stats(); sends != sendsBefore || idx.n("Claim") != claimsBefore {
			t.Errorf("while the consumers were away %d items were sent and %d Claims made, want none", sends-sendsBefore, idx.n("Claim")-claimsBefore)
		}
		back := time.Now()
		stop = startConsumers()
		time.Sleep(4 * time.Minute)
		stop()
		stopFeed()
		if err := <-fed; err != nil {
			t.Fatalf("Feeder.Run = %v, want nil", err)
		}
		if err := wk.Stop(context.Background()); err != nil {
			t.Fatal(err)
		}

		sends, dropped, maxPending := sink.stats()
		if maxPending > 2*4 {
			t.Errorf("up to %d items were queued or in flight, beyond the consumers' room of %d", maxPending, 8)
		}
		if sends < 2*len(keys) || dropped == 0 {
			t.Errorf("%d items sent and %d stale ones dropped: the scenario did not load the queue", sends, dropped)
		}
		pipe.mu.Lock()
		defer pipe.mu.Unlock()
		for _, k := range keys {
			runs := pipe.ran[k]
			if len(runs) == 0 || !runs[len(runs)-1].After(back) {
				t.Errorf("%s did not run once the consumers were back (runs %v; away at +%v, back at +%v)", k, runs, away.Sub(start), back.Sub(start))
			}
		}
		for _, k := range keys {
			user, slug, _ := strings.Cut(k, "/")
			get(t, idx.Memory, user, slug) // nothing lost
		}
	})
}

// stubSink reports a fixed room and records what it is sent.
type stubSink struct {
	mu   sync.Mutex
	room dispatch.Take
	err  error
	sent map[dispatch.Lane]int
	fail dispatch.Lane
}

func (s *stubSink) Room(context.Context) (dispatch.Take, error) { return s.room, s.err }

func (s *stubSink) Send(_ context.Context, lane dispatch.Lane, items []dispatch.Item) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if lane == s.fail {
		return errBoom
	}
	if s.sent == nil {
		s.sent = map[dispatch.Lane]int{}
	}
	s.sent[lane] += len(items)
	return nil
}

// feedOnce runs a Feeder over w with sink for its first round and stops it.
func feedOnce(t *testing.T, w *world, sink bridge.Sink) {
	t.Helper()
	f, err := bridge.NewFeeder(w.d, sink, bridge.FeederConfig{Interval: time.Hour, Logger: slog.New(slog.NewTextHandler(w.out, nil))})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- f.Run(ctx) }()
	synctest.Wait()
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// feedWorld is a world of four pro and four free tenants with three sources each, all due
// now.
func feedWorld(t *testing.T) (*world, *countingIndex) {
	idx := newCountingIndex()
	w := newWorld(t, worldConfig{idx: idx, pipe: newStub()})
	now := time.Now()
	for u := range 4 {
		for s := range 3 {
			w.add(t, fmt.Sprintf("p%d", u), "pro", fmt.Sprintf("s%d", s), "hot", now)
			w.add(t, fmt.Sprintf("f%d", u), tenancy.PlanFree, fmt.Sprintf("s%d", s), "hot", now)
		}
	}
	return w, idx
}

// TestFeederTakesNoMoreThanTheRoom: a round dispatches at most the room in all and per
// lane, higher lanes first; no room, or a failing Room, claims nothing.
func TestFeederTakesNoMoreThanTheRoom(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w, idx := feedWorld(t)
		sink := &stubSink{room: dispatch.Take{Total: 5, PerLane: map[dispatch.Lane]int{"pro": 2}}}
		feedOnce(t, w, sink)
		if fmt.Sprint(sink.sent) != "map[free:3 pro:2]" {
			t.Errorf("sent %v, want 2 of pro and the room left, 3, of free", sink.sent)
		}
		for _, room := range []*stubSink{{}, {room: dispatch.Take{Total: 0}}, {room: dispatch.Take{Total: 9}, err: errBoom}} {
			before := idx.n("Claim")
			feedOnce(t, w, room)
			if idx.n("Claim") != before || room.sent != nil {
				t.Errorf("with room %+v (err %v): %d Claims, sent %v; want nothing", room.room, room.err, idx.n("Claim")-before, room.sent)
			}
		}
	})
}

// TestFeederHandsBackWhatASendFails: items a Send fails are handed back with Unclaim: due
// at once, unchanged; the other lanes' items are sent.
func TestFeederHandsBackWhatASendFails(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w, idx := feedWorld(t)
		now := time.Now()
		sink := &stubSink{room: dispatch.Take{Total: 100}, fail: "free"}
		feedOnce(t, w, sink)
		if sink.sent["pro"] != 12 || idx.n("Unclaim") != 1 {
			t.Fatalf("sent %v with %d Unclaims, want pro's 12 sent and free's handed back in one call", sink.sent, idx.n("Unclaim"))
		}
		due, err := idx.DueBefore(context.Background(), now, 100)
		if err != nil || len(due) != 12 {
			t.Fatalf("%d entries due after the hand-back (%v), want free's 12", len(due), err)
		}
		for _, e := range due {
			if !strings.HasPrefix(e.UserID, "f") || !e.DueAt.Equal(now) {
				t.Errorf("after the hand-back: %+v", e)
			}
		}
	})
}

func TestNewFeederRefusesBadConfig(t *testing.T) {
	w := newWorld(t, worldConfig{pipe: newStub()})
	for _, tc := range []struct {
		name, field string
		d           *dispatch.Dispatcher
		sink        bridge.Sink
		cfg         bridge.FeederConfig
	}{
		{"nil dispatcher", "Dispatcher", nil, &stubSink{}, bridge.FeederConfig{}},
		{"nil sink", "Sink", w.d, nil, bridge.FeederConfig{}},
		{"1ns interval", "FeederConfig.Interval", w.d, &stubSink{}, bridge.FeederConfig{Interval: 1}},
		{"negative interval", "FeederConfig.Interval", w.d, &stubSink{}, bridge.FeederConfig{Interval: -time.Second}},
	} {
		f, err := bridge.NewFeeder(tc.d, tc.sink, tc.cfg)
		if f != nil || !errors.Is(err, bridge.ErrInvalidConfig) || !strings.Contains(err.Error(), tc.field) {
			t.Errorf("%s: NewFeeder = %v, %v; want ErrInvalidConfig naming %s", tc.name, f, err, tc.field)
		}
	}
}

// logTo returns a logger at Debug that writes into a buffer, and a function that returns
// what it holds.
func logTo() (*slog.Logger, func() string) {
	out := &syncWriter{w: &bytes.Buffer{}}
	read := func() string {
		out.mu.Lock()
		defer out.mu.Unlock()
		return out.w.String()
	}
	return slog.New(slog.NewTextHandler(out, &slog.HandlerOptions{Level: slog.LevelDebug})), read
}

// noWarnings fails t when logs hold a line above Info.
func noWarnings(t *testing.T, logs string) {
	t.Helper()
	if strings.Contains(logs, "level=WARN") || strings.Contains(logs, "level=ERROR") {
		t.Errorf("logged above Info:\n%s", logs)
	}
}

// TestFeedIsOneRound: Feed asks for room, dispatches at most that and sends each lane's
// items, returning the batch; a Room that fails claims nothing and is the error.
func TestFeedIsOneRound(t *testing.T) {
	w, idx := feedWorld(t)
	logger, logs := logTo()
	sink := &stubSink{room: dispatch.Take{Total: 5, PerLane: map[dispatch.Lane]int{"pro": 2}}}
	f, err := bridge.NewFeeder(w.d, sink, bridge.FeederConfig{Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	b, err := f.Feed(context.Background(), now)
	if err != nil || len(b.Items) != 5 || fmt.Sprint(sink.sent) != "map[free:3 pro:2]" {
		t.Fatalf("Feed = %d items, %v; sent %v; want 5 items, 2 of pro and 3 of free sent", len(b.Items), err, sink.sent)
	}
	for _, it := range b.Items {
		if !it.Claim.Until.Equal(now.Add(claimFor)) {
			t.Errorf("item %+v: claimed until %v, want now+ClaimFor", it, it.Claim.Until)
		}
	}
	if !strings.Contains(logs(), `msg="rota: feed"`) {
		t.Errorf("no feed line:\n%s", logs())
	}
	claims := idx.n("Claim")
	sink.err = errBoom
	if b, err := f.Feed(context.Background(), now); !errors.Is(err, errBoom) || len(b.Items) != 0 || idx.n("Claim") != claims {
		t.Errorf("Feed with a failing Room = %d items, %v, %d Claims; want none and errBoom", len(b.Items), err, idx.n("Claim")-claims)
	}
}

// cancellingSink cancels a context in its first Send, as a deadline that passes while the
// round sends, and fails that Send with the context's error.
type cancellingSink struct {
	stubSink
	cancel context.CancelFunc
	sends  []dispatch.Lane
}

func (s *cancellingSink) Send(ctx context.Context, lane dispatch.Lane, items []dispatch.Item) error {
	s.sends = append(s.sends, lane)
	s.cancel()
	return ctx.Err()
}

// TestFeedHandsBackWhatItCannotSend: when ctx ends during the first lane's Send, that
// lane's items and the next lane's, not sent at all, are handed back — due at once,
// unchanged — and the error names both lanes; a stop logs nothing above Info.
func TestFeedHandsBackWhatItCannotSend(t *testing.T) {
	w, idx := feedWorld(t)
	logger, logs := logTo()
	ctx, cancel := context.WithCancel(context.Background())
	sink := &cancellingSink{stubSink: stubSink{room: dispatch.Take{Total: 100}}, cancel: cancel}
	f, err := bridge.NewFeeder(w.d, sink, bridge.FeederConfig{Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	b, err := f.Feed(ctx, now)
	if len(b.Items) != 24 || !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), `lane "pro"`) ||
		!strings.Contains(err.Error(), `lane "free"`) {
		t.Fatalf("Feed = %d items, %v; want 24 and an error naming pro and free", len(b.Items), err)
	}
	if fmt.Sprint(sink.sends) != "[pro]" {
		t.Errorf("sends %v, want pro's only: free's come after ctx ended", sink.sends)
	}
	due, err := idx.DueBefore(context.Background(), now, 100)
	if err != nil || len(due) != 24 {
		t.Fatalf("%d entries due after the hand-back (%v), want all 24", len(due), err)
	}
	noWarnings(t, logs())
}

// blockingSink answers Room and Send as stubSink does, but each call first waits until
// the test lets it go.
type blockingSink struct {
	stubSink
	entered chan string
	release chan struct{}
}

func (s *blockingSink) Room(ctx context.Context) (dispatch.Take, error) {
	s.entered <- "room"
	<-s.release
	return s.stubSink.Room(ctx)
}

func (s *blockingSink) Send(ctx context.Context, lane dispatch.Lane, items []dispatch.Item) error {
	s.entered <- "send " + string(lane)
	<-s.release
	return s.stubSink.Send(ctx, lane, items)
}

// TestFeederCleanStopLogsNoWarning: a Run stopped while its round asks for room, and one
// stopped while it sends the first lane's items, returns nil, hands back what it did not
// send and logs nothing above Info.
func TestFeederCleanStopLogsNoWarning(t *testing.T) {
	for _, stopAt := range []string{"room", "send pro"} {
		t.Run(stopAt, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				w, idx := feedWorld(t)
				logger, logs := logTo()
				sink := &blockingSink{stubSink: stubSink{room: dispatch.Take{Total: 100}}, entered: make(chan string), release: make(chan struct{})}
				f, err := bridge.NewFeeder(w.d, sink, bridge.FeederConfig{Logger: logger})
				if err != nil {
					t.Fatal(err)
				}
				ctx, cancel := context.WithCancel(context.Background())
				done := make(chan error)
				go func() { done <- f.Run(ctx) }()
				for call := <-sink.entered; call != stopAt; call = <-sink.entered {
					sink.release <- struct{}{}
				}
				cancel()
				sink.release <- struct{}{}
				if err := <-done; err != nil {
					t.Fatalf("Run = %v, want nil", err)
				}
				sent := sink.sent["pro"] + sink.sent["free"]
				due, err := idx.DueBefore(context.Background(), time.Now(), 100)
				if err != nil || sent+len(due) != 24 {
					t.Errorf("%d sent and %d due again (%v), want 24 in all", sent, len(due), err)
				}
				noWarnings(t, logs())
			})
		})
	}
}

// TestFeederSaysWhenNoWorkerTakesALane: a lane whose room stays zero while work waits in
// it makes one Warn line once three rounds and ClaimFor have passed, however long it
// lasts, and one Info line when it has room again; a lane with no room and nothing
// waiting, and a lane with room, make none.
func TestFeederSaysWhenNoWorkerTakesALane(t *testing.T) {
	w, _ := feedWorld(t)
	logger, logs := logTo()
	sink := &stubSink{room: dispatch.Take{Total: 100, PerLane: map[dispatch.Lane]int{"free": 0, "plus": 0}}}
	f, err := bridge.NewFeeder(w.d, sink, bridge.FeederConfig{Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	feed := func(at time.Duration) {
		t.Helper()
		if _, err := f.Feed(context.Background(), start.Add(at)); err != nil {
			t.Fatal(err)
		}
	}
	const warn = `level=WARN msg="rota: no worker is taking lane" lane=free`
	for at := time.Duration(0); at < claimFor; at += claimFor / 4 {
		feed(at)
	}
	if strings.Contains(logs(), "level=WARN") {
		t.Fatalf("a Warn line before ClaimFor had passed:\n%s", logs())
	}
	for at := claimFor; at < 3*claimFor; at += claimFor / 4 {
		feed(at)
	}
	if strings.Count(logs(), "level=WARN") != 1 || !strings.Contains(logs(), warn) {
		t.Fatalf("want one Warn line for lane free:\n%s", logs())
	}
	sink.room.PerLane["free"] = 100
	feed(3 * claimFor)
	feed(3*claimFor + time.Second)
	if strings.Count(logs(), `msg="rota: lane taken again" lane=free`) != 1 {
		t.Fatalf("want one Info line for lane free taken again:\n%s", logs())
	}
	// A new episode warns again, and a single round at zero room does not.
	sink.room.PerLane["free"] = 0
	w.add(t, "f0", tenancy.PlanFree, "late", "hot", start.Add(3*claimFor))
	feed(4 * claimFor)
	sink.room.PerLane["free"] = 100
	feed(4*claimFor + time.Second)
	if strings.Count(logs(), "level=WARN") != 1 || strings.Count(logs(), "lane taken again") != 1 {
		t.Errorf("after one round at zero room:\n%s", logs())
	}
}

// TestFeedNamesWeightsALaneCannotHold: the Feeder, like the Runner, logs once per lane a
// tenant whose weight times PerUserLimit exceeds the lane's configured PerCycleLimit, even
// when the round's room is smaller.
func TestFeedNamesWeightsALaneCannotHold(t *testing.T) {
	w := newWorld(t, worldConfig{pipe: newStub(), lanes: []dispatch.LaneCapacity{{Lane: "pro", PerUserLimit: 2, PerCycleLimit: 5}},
		limits: func(context.Context, string) (duework.Limits, error) { return duework.Limits{Weight: 3}, nil }})
	now := time.Now()
	w.add(t, "heavy", "pro", "s1", "hot", now)
	logger, logs := logTo()
	sink := &stubSink{room: dispatch.Take{Total: 1}}
	f, err := bridge.NewFeeder(w.d, sink, bridge.FeederConfig{Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if _, err := f.Feed(context.Background(), now); err != nil {
			t.Fatal(err)
		}
	}
	want := `level=WARN msg="rota: setting has no effect" lane=pro setting=Weight users=1 per_user_limit=2 capped_by=PerCycleLimit cap=5`
	if strings.Count(logs(), want) != 1 || strings.Count(logs(), "level=WARN") != 1 {
		t.Errorf("want exactly one line %s in:\n%s", want, logs())
	}
}
