package rotasqs_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/rotaworks/rota/bridge"
	"github.com/rotaworks/rota/dispatch"
	"github.com/rotaworks/rota/internal/fleettest"
	rotasqs "github.com/rotaworks/rota/sqs"
	"github.com/rotaworks/rota/tenancy"
)

// waitEmpty waits until the queue named name holds nothing, visible or in flight, for
// at most 10 s.
func waitEmpty(t *testing.T, name string) {
	t.Helper()
	fleettest.WaitFor(t, 10*time.Second, "queue "+name+" is not empty", func() bool {
		v, f, d := depth(t, name)
		return v+f+d == 0
	})
}

// A Consumer runs a current item and deletes its message once its completion is
// written, and deletes unrun, logging each kind once, a message whose claim has ended, a forged one
// and garbage. It logs nothing at Error.
func TestConsumerRunsAndDrops(t *testing.T) {
	s := newStore(t)
	s.Watch("ana", "pro", 4)
	dc := s.DispatchConfig(time.Minute)
	cfg := fresh(t, rotasqs.Config{WaitTime: time.Second})
	sink := newSink(t, dc, cfg)
	runs := fleettest.NewRunLog(t, "worker")
	now := time.Now()
	good := s.Claimed("paid", "ana", "s000", now.Add(time.Minute))
	ended := item("paid", "ana", "s001", 7, now.Add(-time.Second))
	forged := item("paid", "ana", "s002", 42, now.Add(time.Minute))
	if err := sink.Send(context.Background(), "paid", []dispatch.Item{good, ended, forged}); err != nil {
		t.Fatal(err)
	}
	sendRaw(t, cfg.QueueName("paid"), "not json", `{"v":1}`, `{"v":9}`)
	w := startWorker(t, s, dc, cfg, 0, runs, nil)
	waitEmpty(t, cfg.QueueName("paid"))
	w.Stop(t)

	if got := runs.All(); len(got) != 1 || got[0].Key.WorkKey != "s000" {
		t.Fatalf("runs %+v, want one of s000", got)
	}
	if until, e := s.State("ana", "s000"); !until.IsZero() || e.LastRunAt.IsZero() {
		t.Errorf("s000 after its run: claimed until %v, last run %v; want unclaimed and run", until, e.LastRunAt)
	}
	for _, key := range []string{"s001", "s002"} {
		if until, e := s.State("ana", key); !until.IsZero() || !e.LastRunAt.IsZero() {
			t.Errorf("%s: claimed until %v, last run %v; want unclaimed and never run", key, until, e.LastRunAt)
		}
	}
	logs := w.Logs.String()
	for _, want := range []string{
		`level=INFO msg="rota: message dropped" queue=` + cfg.QueueName("paid") + ` reason="claim ended" user_id=ana work_key=s001`,
		`level=WARN msg="rota: item not run, its claim is not current" user_id=ana work_key=s002`,
	} {
		if strings.Count(logs, want) != 1 {
			t.Errorf("want one line %s:\n%s", want, logs)
		}
	}
	if strings.Count(logs, `level=WARN msg="rota: message dropped" queue=`+cfg.QueueName("paid")+` reason=garbled`) != 1 {
		t.Errorf("want one line for the three garbled messages:\n%s", logs)
	}
	if strings.Contains(logs, "level=ERROR") {
		t.Errorf("logged an Error:\n%s", logs)
	}
}

// A Consumer drains a queue under its prefix that is no lane's — an item it runs,
// garbage it drops — with one Warn line, and leaves alone a queue whose name does not
// read as a lane's.
func TestConsumerDrainsStrayQueues(t *testing.T) {
	s := newStore(t)
	s.Watch("ana", "pro", 1)
	dc := s.DispatchConfig(time.Minute)
	cfg := fresh(t, rotasqs.Config{WaitTime: time.Second, ScanEvery: 100 * time.Millisecond})
	gone := cfg
	old := dc
	old.Lanes = append(old.Lanes, dispatch.LaneCapacity{Lane: "gold", PerUserLimit: 1, PerCycleLimit: 1})
	oldSink := newSink(t, old, gone)
	it := s.Claimed("gold", "ana", "s000", time.Now().Add(time.Minute))
	if err := oldSink.Send(context.Background(), "gold", []dispatch.Item{it}); err != nil {
		t.Fatal(err)
	}
	sendRaw(t, cfg.QueueName("gold"), "garbage")
	other := cfg.Prefix + "other.fifo"
	out, err := client().CreateQueue(context.Background(), &sqs.CreateQueueInput{QueueName: aws.String(other),
		Attributes: map[string]string{"FifoQueue": "true", "ContentBasedDeduplication": "true"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := client().SendMessage(context.Background(), &sqs.SendMessageInput{QueueUrl: out.QueueUrl, MessageBody: aws.String("theirs"),
		MessageGroupId: aws.String("g")}); err != nil {
		t.Fatal(err)
	}
	runs := fleettest.NewRunLog(t, "worker")
	w := startWorker(t, s, dc, cfg, 0, runs, nil)
	waitEmpty(t, cfg.QueueName("gold"))
	fleettest.WaitFor(t, 5*time.Second, "s000 did not run", func() bool { return len(runs.All()) == 1 })
	time.Sleep(300 * time.Millisecond) // three more scans
	w.Stop(t)
	if v, _, _ := depth(t, other); v != 1 {
		t.Errorf("the queue %s holds %d messages, want its 1 left alone", other, v)
	}
	logs := w.Logs.String()
	if strings.Count(logs, `msg="rota: queue is not a lane" queue=`+cfg.QueueName("gold")) != 1 || strings.Contains(logs, other) {
		t.Errorf("want one Warn line for the stray queue, none for %s:\n%s", other, logs)
	}
}

// visibilityRecorder records the visibility timeouts a Consumer asks for.
type visibilityRecorder struct {
	rotasqs.Client
	mu       sync.Mutex
	receives []int32
	changes  []int32
}

func (r *visibilityRecorder) ReceiveMessage(ctx context.Context, in *sqs.ReceiveMessageInput, o ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error) {
	out, err := r.Client.ReceiveMessage(ctx, in, o...)
	if err == nil && len(out.Messages) > 0 {
		r.mu.Lock()
		r.receives = append(r.receives, in.VisibilityTimeout)
		r.mu.Unlock()
	}
	return out, err
}

func (r *visibilityRecorder) ChangeMessageVisibilityBatch(ctx context.Context, in *sqs.ChangeMessageVisibilityBatchInput, o ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityBatchOutput, error) {
	r.mu.Lock()
	for _, e := range in.Entries {
		r.changes = append(r.changes, e.VisibilityTimeout)
	}
	r.mu.Unlock()
	return r.Client.ChangeMessageVisibilityBatch(ctx, in, o...)
}

// A received message is invisible for ClaimFor + MaxClockSkew + VisibilitySlack, in
// whole seconds up; one whose claim ends more than a quarter of ClaimFor sooner is made
// visible again VisibilitySlack + MaxClockSkew after its claim ends. A queue a Consumer
// creates has that visibility timeout for receivers that set none.
func TestConsumerSetsVisibilityFromTheClaim(t *testing.T) {
	s := newStore(t)
	s.Watch("ana", "pro", 2)
	dc := s.DispatchConfig(time.Minute) // MaxClockSkew 50 ms: 62 s
	cfg := fresh(t, rotasqs.Config{WaitTime: time.Second, Logger: quiet})
	sink := newSink(t, dc, cfg)
	now := time.Now()
	fresh := s.Claimed("paid", "ana", "s000", now.Add(time.Minute))
	short := s.Claimed("paid", "ana", "s001", now.Add(10*time.Second))
	if err := sink.Send(context.Background(), "paid", []dispatch.Item{fresh, short}); err != nil {
		t.Fatal(err)
	}
	rec := &visibilityRecorder{Client: client()}
	block := make(chan struct{})
	w := newBareWorker(t, s, func(ctx context.Context) {
		select {
		case <-block:
		case <-ctx.Done():
		}
	})
	c, err := rotasqs.NewConsumer(rec, w, dc, cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	fleettest.WaitFor(t, 5*time.Second, "two messages in flight", func() bool {
		_, f, _ := depth(t, cfg.QueueName("paid"))
		rec.mu.Lock()
		defer rec.mu.Unlock()
		return f == 2 && len(rec.changes) == 1
	})
	cancel()
	close(block)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if err := w.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	rec.mu.Lock()
	if len(rec.receives) == 0 || rec.receives[0] != 62 || len(rec.changes) != 1 || rec.changes[0] < 11 || rec.changes[0] > 12 {
		t.Errorf("receives with visibility %v, changes to %v; want 62 and one change to 11 or 12", rec.receives, rec.changes)
	}
	rec.mu.Unlock()
	attrs, err := client().GetQueueAttributes(context.Background(), &sqs.GetQueueAttributesInput{
		QueueUrl: aws.String(queueURL(t, cfg.QueueName("free tier"))), AttributeNames: []types.QueueAttributeName{"VisibilityTimeout"}})
	if err != nil || attrs.Attributes["VisibilityTimeout"] != "62" {
		t.Errorf("the queue's visibility timeout is %v (%v), want 62", attrs.Attributes, err)
	}
}

// newBareWorker returns a Worker over s whose pipeline calls run and finds nothing new.
func newBareWorker(t *testing.T, s *fleettest.Store, run func(ctx context.Context)) *bridge.Worker {
	t.Helper()
	b := &bridge.Bridge{Index: s.Index, Watchlist: s.Watchlist, Tiers: s.Tiers,
		Pipeline: bridge.PipelineFunc(func(ctx context.Context, _ tenancy.Context, _ tenancy.WatchlistEntry) (bridge.Result, error) {
			run(ctx)
			return bridge.Result{}, nil
		})}
	w, err := bridge.NewWorker(b, bridge.WorkerConfig{ClaimMargin: workerMargin, MaxClockSkew: testSkew, FlushInterval: 20 * time.Millisecond, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	return w
}
