package rotanats_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/rotaworks/rota/bridge"
	"github.com/rotaworks/rota/dispatch"
	"github.com/rotaworks/rota/duework"
	rotanats "github.com/rotaworks/rota/nats"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// item returns an item of lane for user's entry key, claimed with token until until.
func item(lane dispatch.Lane, user, key string, token uint64, until time.Time) dispatch.Item {
	return dispatch.Item{Lane: lane, Claim: duework.Claim{Token: token, Until: until,
		Entry: duework.Entry{UserID: user, WorkKey: key, Tier: "hot", DueAt: until.Add(-time.Hour)}}}
}

// declareLanes creates cfg's stream and lane consumers as a Consumer's Run does, and
// when pulling is set keeps a pull waiting on each lane, as live workers do, until the
// test ends.
func declareLanes(t *testing.T, js jetstream.JetStream, cfg rotanats.Config, pulling bool) map[dispatch.Lane]jetstream.Consumer {
	t.Helper()
	ctx := context.Background()
	st, err := js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{Name: cfg.Stream, Subjects: []string{cfg.Subject + ".*"},
		Retention: jetstream.WorkQueuePolicy, Duplicates: cfg.ClaimFor})
	if err != nil {
		t.Fatal(err)
	}
	cons := map[dispatch.Lane]jetstream.Consumer{}
	for _, l := range cfg.Lanes {
		c, err := st.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{Durable: rotanats.LaneToken(l),
			FilterSubject: cfg.Subject + "." + rotanats.LaneToken(l), AckPolicy: jetstream.AckExplicitPolicy,
			AckWait: cfg.ClaimFor + rotanats.AckSlack, MaxAckPending: cfg.MaxAckPending, MaxDeliver: -1})
		if err != nil {
			t.Fatal(err)
		}
		cons[l] = c
		if pulling {
			// A pull for more than the test sends, so it waits until the test ends; what
			// it takes stays unacknowledged, as with a worker that holds its messages.
			b, err := c.Fetch(100, jetstream.FetchMaxWait(time.Minute))
			if err != nil {
				t.Fatal(err)
			}
			_ = b
		}
	}
	return cons
}

func newSink(t *testing.T, cfg rotanats.Config) (*rotanats.Sink, jetstream.JetStream) {
	t.Helper()
	_, js := connect(t)
	cfg.Logger = quiet
	s, err := rotanats.NewSink(js, cfg)
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
func TestSinkRoom(t *testing.T) {
	cfg := freshQueue(t, rotanats.Config{Lanes: []dispatch.Lane{"pro", "free tier"}, ClaimFor: time.Minute,
		ClaimMargin: 5 * time.Second, MaxAckPending: 10})
	s, js := newSink(t, cfg)
	if take := room(t, s); take.Total != 0 || take.PerLane["pro"] != 0 || take.PerLane["free tier"] != 0 || len(take.PerLane) != 2 {
		t.Fatalf("before any consumer: %+v, want 0 everywhere", take)
	}
	declareLanes(t, js, cfg, false)
	if take := room(t, s); take.Total != 0 {
		t.Fatalf("with consumers but no worker pulling: %+v, want 0", take)
	}
	_, pjs := connect(t)
	declareLanes(t, pjs, cfg, true)
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
	cfg := freshQueue(t, rotanats.Config{Lanes: []dispatch.Lane{"pro"}, ClaimFor: time.Minute})
	s, js := newSink(t, cfg)
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
	cfg2 := cfg
	cfg2.Lanes = []dispatch.Lane{"pro", "free"}
	s2, _ := newSink(t, cfg2)
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
	if _, err := rotanats.NewSink(nil, rotanats.Config{Lanes: []dispatch.Lane{"pro"}, ClaimFor: time.Minute}); !errors.Is(err, rotanats.ErrInvalidConfig) {
		t.Errorf("NewSink(nil) = %v, want ErrInvalidConfig", err)
	}
	if _, err := rotanats.NewConsumer(nil, nil, rotanats.Config{}); !errors.Is(err, rotanats.ErrInvalidConfig) {
		t.Errorf("NewConsumer(nil, nil, zero) = %v, want ErrInvalidConfig", err)
	}
}
