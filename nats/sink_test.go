package rotanats_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/rotaworks/rota/bridge"
	"github.com/rotaworks/rota/dispatch"
	"github.com/rotaworks/rota/duework"
	"github.com/rotaworks/rota/internal/fleettest"
	rotanats "github.com/rotaworks/rota/nats"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// item returns an item of lane for user's entry key, claimed with token until until.
func item(lane dispatch.Lane, user, key string, token uint64, until time.Time) dispatch.Item {
	return dispatch.Item{Lane: lane, Claim: duework.Claim{Token: token, Until: until,
		Entry: duework.Entry{UserID: user, WorkKey: key, Tier: "hot", DueAt: until.Add(-time.Hour)}}}
}

// lanesOf describes the lane consumers declareLanes makes: those of lanes, with claims of
// claimFor and MaxAckPending maxAck, on cfg's stream.
type lanesOf struct {
	cfg      rotanats.Config
	lanes    []dispatch.Lane
	claimFor time.Duration
	maxAck   int
}

// declareLanes creates the stream and the lane consumers as a Consumer's Run does, and
// when pulling is set keeps a pull waiting on each lane, as live workers do, until the
// test ends.
func declareLanes(t *testing.T, js jetstream.JetStream, q lanesOf, pulling bool) map[dispatch.Lane]jetstream.Consumer {
	t.Helper()
	ctx := context.Background()
	st, err := js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{Name: q.cfg.Stream, Subjects: []string{q.cfg.Subject + ".*"},
		Retention: jetstream.WorkQueuePolicy, Duplicates: q.claimFor})
	if err != nil {
		t.Fatal(err)
	}
	cons := map[dispatch.Lane]jetstream.Consumer{}
	for _, l := range q.lanes {
		c, err := st.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{Durable: rotanats.LaneToken(l),
			FilterSubject: q.cfg.Subject + "." + rotanats.LaneToken(l), AckPolicy: jetstream.AckExplicitPolicy,
			AckWait: q.claimFor + rotanats.AckSlack, MaxAckPending: q.maxAck, MaxDeliver: -1})
		if err != nil {
			t.Fatal(err)
		}
		cons[l] = c
		if pulling {
			// A pull for more than the test sends, so it waits until the test ends; what
			// it takes stays unacknowledged, as with a worker that holds its messages.
			if _, err := c.Fetch(100, jetstream.FetchMaxWait(time.Minute)); err != nil {
				t.Fatal(err)
			}
			// Fetch sends its pull request without waiting for the server: the pull counts
			// (NumWaiting) only once the server has it.
			waitPulling(t, c)
		}
	}
	return cons
}

// waitPulling waits until the server counts a pull waiting on c.
func waitPulling(t *testing.T, c jetstream.Consumer) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		info, err := c.Info(context.Background())
		if err == nil && info.NumWaiting > 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no pull waiting on %s after 10 s (%v)", c.CachedInfo().Name, err)
		}
	}
}

func newSink(t *testing.T, d *dispatch.Dispatcher, cfg rotanats.Config) (*rotanats.Sink, jetstream.JetStream) {
	t.Helper()
	_, js := connect(t)
	if cfg.Logger == nil {
		cfg.Logger = quiet
	}
	s, err := rotanats.NewSink(js, d.Config(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s, js
}

func room(t *testing.T, s *rotanats.Sink) dispatch.Take {
	t.Helper()
	take, err := s.Room(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return take
}

// Room gives a lane no room until a worker declares its consumer and pulls from it; then
// its capacity less what it holds; it drops stale messages without counting them.
//
// The margin is min(bridge.DefaultClaimMargin, ClaimFor/4): 5 s for claims of a minute.
func TestSinkRoom(t *testing.T) {
	cfg := freshQueue(t, rotanats.Config{})
	lanes := lanesOf{cfg: cfg, lanes: []dispatch.Lane{"pro", "free tier"}, claimFor: time.Minute, maxAck: 10}
	s, js := newSink(t, memDispatcher(t, lanes.claimFor, lanes.lanes...), cfg)
	if take := room(t, s); take.Total != 0 || take.PerLane["pro"] != 0 || take.PerLane["free tier"] != 0 || len(take.PerLane) != 2 {
		t.Fatalf("before any consumer: %+v, want 0 everywhere", take)
	}
	declareLanes(t, js, lanes, false)
	if take := room(t, s); take.Total != 0 {
		t.Fatalf("with consumers but no worker pulling: %+v, want 0", take)
	}
	_, pjs := connect(t)
	declareLanes(t, pjs, lanes, true)
	if take := room(t, s); take.Total != 20 || take.PerLane["pro"] != 10 {
		t.Fatalf("with workers pulling: %+v, want 10 a lane", take)
	}
	now := time.Now()
	ctx := context.Background()
	var items []dispatch.Item
	for i := range 3 {
		items = append(items, item("pro", "ana", string(rune('a'+i)), uint64(i+1), now.Add(time.Minute)))
	}
	if err := s.Send(ctx, "pro", items); err != nil {
		t.Fatal(err)
	}
	if take := room(t, s); take.PerLane["pro"] != 7 || take.PerLane["free tier"] != 10 || take.Total != 17 {
		t.Fatalf("with 3 sent: %+v, want pro 7", take)
	}
	// Two stale items ahead of a fresh one: one whose claim ended, one that ends within
	// the margin. Room drops both, and only them.
	stale := []dispatch.Item{item("free tier", "bo", "x", 10, now.Add(-time.Second)), item("free tier", "bo", "y", 11, now.Add(4*time.Second)),
		item("free tier", "bo", "z", 12, now.Add(time.Minute))}
	if err := s.Send(ctx, "free tier", stale); err != nil {
		t.Fatal(err)
	}
	if take := room(t, s); take.PerLane["free tier"] != 9 {
		t.Fatalf("after two stale items and a fresh one: %+v, want free tier 9", take)
	}
	st, err := js.Stream(ctx, cfg.Stream)
	if err != nil {
		t.Fatal(err)
	}
	if info, err := st.Info(ctx); err != nil || info.State.Msgs != 4 {
		t.Fatalf("the stream holds %v messages (%v), want 4", info.State.Msgs, err)
	}
}

// A publish retried for the same claim is stored once; another claim of the entry is a
// new message. Items of another lane, and unknown lanes, are refused.
func TestSinkSend(t *testing.T) {
	cfg := freshQueue(t, rotanats.Config{})
	s, js := newSink(t, memDispatcher(t, time.Minute, "pro"), cfg)
	ctx := context.Background()
	until := time.Now().Add(time.Minute)
	it := item("pro", "ana", "jobs", 1, until)
	for range 2 {
		if err := s.Send(ctx, "pro", []dispatch.Item{it}); err != nil {
			t.Fatal(err)
		}
	}
	again := it
	again.Claim.Token = 2
	if err := s.Send(ctx, "pro", []dispatch.Item{again}); err != nil {
		t.Fatal(err)
	}
	st, err := js.Stream(ctx, cfg.Stream)
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(ctx)
	if err != nil || info.State.Msgs != 2 {
		t.Fatalf("the stream holds %d messages (%v), want 2", info.State.Msgs, err)
	}
	raw, err := st.GetMsg(ctx, info.State.FirstSeq)
	if err != nil {
		t.Fatal(err)
	}
	got, err := bridge.DecodeItem(raw.Data)
	if err != nil || got.Claim.Token != 1 || !got.Claim.Until.Equal(until) || raw.Subject != cfg.Subject+".pro" {
		t.Errorf("the first message is %q on %s: %+v, %v", raw.Data, raw.Subject, got, err)
	}
	if err := s.Send(ctx, "free", []dispatch.Item{it}); !errors.Is(err, rotanats.ErrUnknownLane) {
		t.Errorf("Send to an unknown lane = %v, want ErrUnknownLane", err)
	}
	s2, _ := newSink(t, memDispatcher(t, time.Minute, "pro", "free"), cfg)
	if err := s2.Send(ctx, "free", []dispatch.Item{it}); err == nil {
		t.Error("Send of a pro item to lane free = nil, want an error")
	}
	bad := it
	bad.Claim.Until = time.Time{}
	if err := s.Send(ctx, "pro", []dispatch.Item{bad}); !errors.Is(err, duework.ErrInvalid) {
		t.Errorf("Send of an item with no Until = %v, want duework.ErrInvalid", err)
	}
	// When some are stored, Send returns nil: the others stay claimed until their claims
	// end, since a stored one may already be running.
	third := item("pro", "ana", "news", 3, until)
	if err := s.Send(ctx, "pro", []dispatch.Item{bad, third}); err != nil {
		t.Errorf("Send of a bad item and a good one = %v, want nil", err)
	}
	if info, err := st.Info(ctx); err != nil || info.State.Msgs != 3 {
		t.Errorf("the stream holds %d messages (%v), want 3", info.State.Msgs, err)
	}
}

func TestNewSinkRefuses(t *testing.T) {
	if _, err := rotanats.NewSink(nil, dispatch.Config{}, rotanats.Config{}); !errors.Is(err, rotanats.ErrInvalidConfig) ||
		!strings.Contains(err.Error(), "js") || !strings.Contains(err.Error(), "Lanes") || !strings.Contains(err.Error(), "ClaimFor") {
		t.Errorf("NewSink(nil, zero dispatch.Config) = %v, want ErrInvalidConfig naming js, Lanes and ClaimFor", err)
	}
	_, js := connect(t)
	if _, err := rotanats.NewSink(js, memDispatcher(t, time.Minute, "pro").Config(), rotanats.Config{InHand: -1}); !errors.Is(err, rotanats.ErrInvalidConfig) {
		t.Errorf("NewSink with a negative InHand = %v, want ErrInvalidConfig", err)
	}
}

// manualClock is a Clock that moves only when the test says.
type manualClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *manualClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *manualClock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// streamMsgs is how many messages stream holds.
func streamMsgs(tb testing.TB, js jetstream.JetStream, stream string) uint64 {
	tb.Helper()
	ctx := context.Background()
	st, err := js.Stream(ctx, stream)
	if err != nil {
		tb.Fatal(err)
	}
	info, err := st.Info(ctx)
	if err != nil {
		tb.Fatal(err)
	}
	return info.State.Msgs
}

// Messages on a subject of the stream that is no lane's are found by Room at most once
// per StrayCheckEvery on the Sink's clock, named with their number in one Warn line, and
// purged; a lane's messages stay.
func TestSinkPurgesStraySubjects(t *testing.T) {
	clk := &manualClock{now: time.Now()}
	logs := &fleettest.Buffer{}
	cfg := freshQueue(t, rotanats.Config{Clock: clk, Logger: slog.New(slog.NewTextHandler(logs, nil))})
	s, js := newSink(t, memDispatcher(t, time.Minute, "pro"), cfg)
	ctx := context.Background()
	room(t, s) // declares the stream, and finds nothing stray
	if err := s.Send(ctx, "pro", []dispatch.Item{item("pro", "ana", "jobs", 1, clk.Now().Add(time.Hour))}); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if _, err := js.Publish(ctx, cfg.Subject+".bogus", []byte("hello")); err != nil {
			t.Fatal(err)
		}
	}
	clk.advance(rotanats.StrayCheckEvery - time.Second)
	room(t, s)
	if n := streamMsgs(t, js, cfg.Stream); n != 4 || strings.Contains(logs.String(), "level=WARN") {
		t.Fatalf("within StrayCheckEvery of the last search: %d messages, want 4 and no Warn line:\n%s", n, logs)
	}
	clk.advance(time.Second)
	room(t, s)
	if n := streamMsgs(t, js, cfg.Stream); n != 1 {
		t.Errorf("after the search the stream holds %d messages, want the lane's 1", n)
	}
	want := fmt.Sprintf(`level=WARN msg="rota: stray messages purged, their subject is no lane's" subject=%s.bogus messages=3`, cfg.Subject)
	if l := logs.String(); strings.Count(l, "level=WARN") != 1 || !strings.Contains(l, want) {
		t.Errorf("want one Warn line %s, got:\n%s", want, l)
	}
}
