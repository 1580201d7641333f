package rotasqs_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/rotaworks/rota/bridge"
	"github.com/rotaworks/rota/dispatch"
	"github.com/rotaworks/rota/duework"
	"github.com/rotaworks/rota/internal/fleettest"
	rotasqs "github.com/rotaworks/rota/sqs"
)

// item returns an item of lane for user's entry key, claimed with token until until.
func item(lane dispatch.Lane, user, key string, token uint64, until time.Time) dispatch.Item {
	return dispatch.Item{Lane: lane, Claim: duework.Claim{Token: token, Until: until,
		Entry: duework.Entry{UserID: user, WorkKey: key, Tier: "hot", DueAt: until.Add(-time.Hour)}}}
}

// laneConfig is a dispatch.Config with lanes pro and "free tier" and ClaimFor claimFor.
func laneConfig(claimFor time.Duration) dispatch.Config {
	return dispatch.Config{Lanes: []dispatch.LaneCapacity{{Lane: "pro", PerUserLimit: 1, PerCycleLimit: 10},
		{Lane: "free tier", PerUserLimit: 1, PerCycleLimit: 10}}, ClaimFor: claimFor, MaxClockSkew: 50 * time.Millisecond}
}

func newSink(t *testing.T, dc dispatch.Config, cfg rotasqs.Config) *rotasqs.Sink {
	t.Helper()
	return newSinkOn(t, client(), dc, cfg)
}

func newSinkOn(t *testing.T, c rotasqs.Client, dc dispatch.Config, cfg rotasqs.Config) *rotasqs.Sink {
	t.Helper()
	cfg.Logger = quiet
	s, err := rotasqs.NewSink(c, dc, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func room(t *testing.T, s *rotasqs.Sink) dispatch.Take {
	t.Helper()
	take, err := s.Room(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return take
}

// receive receives up to n messages of the queue named name, leaving them in flight for
// a minute, as a worker holding them would.
func receive(t *testing.T, name string, n int32) []types.Message {
	t.Helper()
	out, err := client().ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{QueueUrl: aws.String(queueURL(t, name)),
		MaxNumberOfMessages: n, VisibilityTimeout: 60, WaitTimeSeconds: 1})
	if err != nil {
		t.Fatal(err)
	}
	return out.Messages
}

// Room gives an empty lane its capacity, creating its queue; a lane that holds messages
// its capacity less what it holds, visible and in flight; and a lane whose messages are
// all visible, none in flight — no worker takes them — none.
func TestSinkRoom(t *testing.T) {
	cfg := fresh(t, rotasqs.Config{InFlight: 10})
	s := newSink(t, laneConfig(time.Minute), cfg)
	if take := room(t, s); take.Total != 20 || take.PerLane["pro"] != 10 || take.PerLane["free tier"] != 10 || len(take.PerLane) != 2 {
		t.Fatalf("empty lanes: %+v, want 10 each", take)
	}
	if v, _, _ := depth(t, cfg.QueueName("free tier")); v != 0 {
		t.Fatalf("the free tier queue holds %d", v)
	}
	ctx := context.Background()
	now := time.Now()
	var items []dispatch.Item
	for i := range 3 {
		items = append(items, item("pro", "ana", strconv.Itoa(i), uint64(i+1), now.Add(time.Minute)))
	}
	if err := s.Send(ctx, "pro", items); err != nil {
		t.Fatal(err)
	}
	if take := room(t, s); take.PerLane["pro"] != 0 || take.PerLane["free tier"] != 10 || take.Total != 10 {
		t.Fatalf("3 visible in pro, none in flight: %+v, want pro 0", take)
	}
	if got := receive(t, cfg.QueueName("pro"), 1); len(got) != 1 {
		t.Fatalf("received %d messages, want 1", len(got))
	}
	if take := room(t, s); take.PerLane["pro"] != 7 || take.Total != 17 {
		t.Fatalf("2 visible in pro and 1 in flight: %+v, want pro 7", take)
	}
	receive(t, cfg.QueueName("pro"), 2)
	if take := room(t, s); take.PerLane["pro"] != 7 {
		t.Fatalf("3 in flight in pro: %+v, want pro 7", take)
	}
}

// RunTime multiplies a lane's capacity by the rounds its slots can start before the claims
// end: InFlight × (ClaimFor − margin) / RunTime.
func TestSinkRoomWithRunTime(t *testing.T) {
	cfg := fresh(t, rotasqs.Config{InFlight: 4, RunTime: 10 * time.Second})
	s := newSink(t, laneConfig(time.Minute), cfg)
	// margin min(5s, 15s) = 5s: 55s / 10s = 5 rounds.
	if take := room(t, s); take.PerLane["pro"] != 20 {
		t.Fatalf("%+v, want 20 a lane", take)
	}
}

// Send sends each item with its tenant as its message group, its body bridge.EncodeItem's,
// in batches of ten; it refuses an unknown lane, and sends the rest when some items are
// bad.
func TestSinkSend(t *testing.T) {
	cfg := fresh(t, rotasqs.Config{})
	rec := &sendRecorder{Client: client()}
	s := newSinkOn(t, rec, laneConfig(time.Minute), cfg)
	ctx := context.Background()
	until := time.Now().Add(time.Minute).UTC()
	var items []dispatch.Item
	for i := range 25 {
		items = append(items, item("pro", fmt.Sprintf("user%d", i%3), fmt.Sprintf("src%02d", i), uint64(i+1), until))
	}
	if err := s.Send(ctx, "pro", items); err != nil {
		t.Fatal(err)
	}
	if v, _, _ := depth(t, cfg.QueueName("pro")); v != 25 {
		t.Fatalf("the queue holds %d messages, want 25", v)
	}
	if sizes := rec.sizes(); fmt.Sprint(sizes) != "[5 10 10]" {
		t.Errorf("batches of %v entries, want 10, 10 and 5", rec.sizes())
	}
	for _, b := range rec.batches {
		for _, e := range b {
			it, err := bridge.DecodeItem([]byte(aws.ToString(e.MessageBody)))
			if err != nil || aws.ToString(e.MessageGroupId) != it.Claim.Entry.UserID {
				t.Errorf("%s sent with message group %q (%v), want its tenant", it.Claim.Entry.WorkKey, aws.ToString(e.MessageGroupId), err)
			}
		}
	}
	url := queueURL(t, cfg.QueueName("pro"))
	got := map[string]bool{}
	for len(got) < 25 {
		out, err := client().ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(url), MaxNumberOfMessages: 10,
			VisibilityTimeout: 60, WaitTimeSeconds: 1})
		if err != nil || len(out.Messages) == 0 {
			t.Fatalf("receive: %d messages, %v; have %d of 25", len(out.Messages), err, len(got))
		}
		for _, m := range out.Messages {
			it, err := bridge.DecodeItem([]byte(aws.ToString(m.Body)))
			if err != nil {
				t.Fatal(err)
			}
			if !it.Claim.Until.Equal(until) || it.Lane != "pro" {
				t.Errorf("decoded %+v", it)
			}
			got[it.Claim.Entry.WorkKey] = true
		}
		// A FIFO queue hands out nothing more of a message group while one of its messages
		// is in flight: delete what came, or the rest of its tenant's items never come.
		var done []types.DeleteMessageBatchRequestEntry
		for i, m := range out.Messages {
			done = append(done, types.DeleteMessageBatchRequestEntry{Id: aws.String(fmt.Sprint(i)), ReceiptHandle: m.ReceiptHandle})
		}
		if res, err := client().DeleteMessageBatch(ctx, &sqs.DeleteMessageBatchInput{QueueUrl: aws.String(url), Entries: done}); err != nil || len(res.Failed) > 0 {
			t.Fatalf("delete the received messages: %v, %v", err, res)
		}
	}

	if err := s.Send(ctx, "gold", items[:1]); !errors.Is(err, rotasqs.ErrUnknownLane) {
		t.Errorf("Send to an unknown lane = %v, want ErrUnknownLane", err)
	}
	bad := items[0]
	bad.Claim.Until = time.Time{}
	if err := s.Send(ctx, "pro", []dispatch.Item{bad}); !errors.Is(err, duework.ErrInvalid) {
		t.Errorf("Send of an item with no Until = %v, want duework.ErrInvalid", err)
	}
	if err := s.Send(ctx, "free tier", items[:1]); err == nil {
		t.Error("Send of a pro item to the free tier = nil, want an error")
	}
	// When some are sent, Send returns nil: the others stay claimed until their claims
	// end, since a sent one may already be running.
	if err := s.Send(ctx, "pro", []dispatch.Item{bad, items[1]}); err != nil {
		t.Errorf("Send of a bad item and a good one = %v, want nil", err)
	}
	if v, _, _ := depth(t, cfg.QueueName("pro")); v != 1 {
		t.Errorf("the queue holds %d visible messages, want 1", v)
	}
}

// A queue deleted under a Sink is created again by the next call.
func TestSinkCreatesAGoneQueueAgain(t *testing.T) {
	cfg := fresh(t, rotasqs.Config{})
	s := newSink(t, laneConfig(time.Minute), cfg)
	room(t, s)
	ctx := context.Background()
	if _, err := client().DeleteQueue(ctx, &sqs.DeleteQueueInput{QueueUrl: aws.String(queueURL(t, cfg.QueueName("pro")))}); err != nil {
		t.Fatal(err)
	}
	it := item("pro", "ana", "jobs", 1, time.Now().Add(time.Minute))
	if err := s.Send(ctx, "pro", []dispatch.Item{it}); err == nil {
		t.Log("the first Send after the deletion went through") // a Sink may learn of it from Room instead
	}
	fleettest.WaitFor(t, 5*time.Second, "the queue is back", func() bool {
		_, err := s.Room(ctx)
		return err == nil
	})
	if err := s.Send(ctx, "pro", []dispatch.Item{it}); err != nil {
		t.Fatalf("Send after the queue came back = %v", err)
	}
	if v, _, _ := depth(t, cfg.QueueName("pro")); v < 1 {
		t.Fatalf("the queue holds %d messages, want at least 1", v)
	}
}

// sendRecorder records the entries of every SendMessageBatch.
type sendRecorder struct {
	rotasqs.Client
	mu      sync.Mutex
	batches [][]types.SendMessageBatchRequestEntry
}

func (r *sendRecorder) SendMessageBatch(ctx context.Context, in *sqs.SendMessageBatchInput, o ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error) {
	r.mu.Lock()
	r.batches = append(r.batches, in.Entries)
	r.mu.Unlock()
	return r.Client.SendMessageBatch(ctx, in, o...)
}

// sizes returns the batches' sizes, sorted.
func (r *sendRecorder) sizes() []int {
	var n []int
	for _, b := range r.batches {
		n = append(n, len(b))
	}
	slices.Sort(n)
	return n
}
