package rotasqs_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/rotaworks/rota/bridge"
	"github.com/rotaworks/rota/dispatch"
	"github.com/rotaworks/rota/duework"
	"github.com/rotaworks/rota/internal/fleettest"
	rotasqs "github.com/rotaworks/rota/sqs"
	"github.com/rotaworks/rota/tenancy"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// endpoint is the SQS endpoint the tests use: ROTA_TEST_SQS_ENDPOINT, or the local
// emulator CI starts.
func endpoint() string {
	if e := os.Getenv("ROTA_TEST_SQS_ENDPOINT"); e != "" {
		return e
	}
	return "http://127.0.0.1:4566"
}

var (
	reachOnce sync.Once
	reachErr  error
)

// requireSQS skips tb when no SQS endpoint answers — except under CI (CI=true), where it
// fails tb.
func requireSQS(tb testing.TB) {
	tb.Helper()
	reachOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		_, reachErr = client().ListQueues(ctx, &sqs.ListQueuesInput{MaxResults: aws.Int32(1)})
	})
	if reachErr == nil {
		return
	}
	if os.Getenv("CI") == "true" {
		tb.Fatalf("no SQS endpoint at %s: %v (CI=true: the tests must run)", endpoint(), reachErr)
	}
	tb.Skipf("no SQS endpoint at %s (%v); start the emulator (.ci/services) or set ROTA_TEST_SQS_ENDPOINT", endpoint(), reachErr)
}

// client returns a client of its own, as one more process would have.
func client() *sqs.Client {
	return sqs.New(sqs.Options{Region: "us-east-1", BaseEndpoint: aws.String(endpoint()),
		Credentials: credentials.NewStaticCredentialsProvider("rota", "rota", "")})
}

// fresh returns cfg with a queue prefix of tb's own, whose queues are deleted when tb
// ends.
func fresh(tb testing.TB, cfg rotasqs.Config) rotasqs.Config {
	tb.Helper()
	requireSQS(tb)
	var r [5]byte
	if _, err := rand.Read(r[:]); err != nil {
		tb.Fatal(err)
	}
	cfg.Prefix = "rt" + hex.EncodeToString(r[:]) + "-"
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		c := client()
		out, err := c.ListQueues(ctx, &sqs.ListQueuesInput{QueueNamePrefix: aws.String(cfg.Prefix)})
		if err != nil {
			tb.Errorf("list queues %s*: %v", cfg.Prefix, err)
			return
		}
		for _, u := range out.QueueUrls {
			if _, err := c.DeleteQueue(ctx, &sqs.DeleteQueueInput{QueueUrl: aws.String(u)}); err != nil {
				tb.Errorf("delete queue %s: %v", u, err)
			}
		}
	})
	return cfg
}

// queueURL returns the URL of the queue named name, creating it when missing.
func queueURL(tb testing.TB, name string) string {
	tb.Helper()
	if got, err := client().GetQueueUrl(context.Background(), &sqs.GetQueueUrlInput{QueueName: aws.String(name)}); err == nil {
		return aws.ToString(got.QueueUrl)
	}
	out, err := client().CreateQueue(context.Background(), &sqs.CreateQueueInput{QueueName: aws.String(name)})
	if err != nil {
		tb.Fatal(err)
	}
	return aws.ToString(out.QueueUrl)
}

// depth is what the queue named name holds: visible, in flight and delayed.
func depth(tb testing.TB, name string) (visible, inFlight, delayed int) {
	tb.Helper()
	n, err := readDepth(name)
	if err != nil {
		tb.Fatal(err)
	}
	return n[0], n[1], n[2]
}

// readDepth reads what the queue named name holds: visible, in flight and delayed.
func readDepth(name string) ([3]int, error) {
	ctx := context.Background()
	c := client()
	var n [3]int
	u, err := c.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String(name)})
	if err != nil {
		return n, err
	}
	out, err := c.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: u.QueueUrl, AttributeNames: []types.QueueAttributeName{"All"}})
	if err != nil {
		return n, err
	}
	for i, a := range []string{"ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible", "ApproximateNumberOfMessagesDelayed"} {
		if n[i], err = strconv.Atoi(out.Attributes[a]); err != nil {
			return n, fmt.Errorf("queue %s: %s = %q", name, a, out.Attributes[a])
		}
	}
	return n, nil
}

// sendRaw sends bodies to the queue named name as they are.
func sendRaw(tb testing.TB, name string, bodies ...string) {
	tb.Helper()
	url := queueURL(tb, name)
	for _, b := range bodies {
		if _, err := client().SendMessage(context.Background(), &sqs.SendMessageInput{QueueUrl: aws.String(url), MessageBody: aws.String(b)}); err != nil {
			tb.Fatal(err)
		}
	}
}

// workerMargin is the claim margin of the tests' Workers, and testSkew the clock skew
// the tests' dispatchers and Workers allow: the claims last seconds.
const (
	workerMargin = 500 * time.Millisecond
	testSkew     = 50 * time.Millisecond
)

// newStore returns the state the dispatcher and the workers share — the index, the
// watchlist and the plans, in memory — with no tenant yet. Its dispatch configuration
// allows testSkew, and an ended claim may stay on an entry after a clean stop: a Consumer
// deletes the message of an ended claim without handing the claim back.
func newStore(tb testing.TB) *fleettest.Store {
	tb.Helper()
	s := fleettest.NewStore(tb, duework.NewMemory(), tenancy.NewMemoryWatchlist(), tenancy.NewMemoryEntitlements())
	s.MaxClockSkew, s.EndedClaimsStay = testSkew, true
	return s
}

// startWorker starts worker id's Consumer over s with dc and cfg, on an SQS client of its
// own that dies with the worker's index; its pipeline records into runs, calling hold
// while each run is under way.
func startWorker(t testing.TB, s *fleettest.Store, dc dispatch.Config, cfg rotasqs.Config, id int, runs *fleettest.RunLog, hold fleettest.Hold) *fleettest.Worker {
	t.Helper()
	w := fleettest.NewWorker(t, id, bridge.Bridge{Index: s.Index, Watchlist: s.Watchlist, Pipeline: runs.Pipeline(id, hold), Tiers: s.Tiers},
		bridge.WorkerConfig{Workers: 4, ClaimMargin: workerMargin, MaxClockSkew: testSkew, FlushInterval: 20 * time.Millisecond})
	cfg.Logger = w.Logger
	c, err := rotasqs.NewConsumer(&mortalClient{Client: client(), index: w.Index}, w.Bridge, dc, cfg)
	if err != nil {
		t.Fatal(err)
	}
	w.Start(c.Run)
	return w
}

// mortalClient is SQS as a worker process reaches it: once its index is killed, every
// call fails.
type mortalClient struct {
	rotasqs.Client
	index *fleettest.MortalIndex
}

func (m *mortalClient) ReceiveMessage(ctx context.Context, in *sqs.ReceiveMessageInput, o ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error) {
	if m.index.Dead() {
		return nil, fleettest.ErrDead
	}
	out, err := m.Client.ReceiveMessage(ctx, in, o...)
	if m.index.Dead() {
		return nil, fleettest.ErrDead // it died during the poll: what it received comes back after its visibility
	}
	return out, err
}

func (m *mortalClient) DeleteMessageBatch(ctx context.Context, in *sqs.DeleteMessageBatchInput, o ...func(*sqs.Options)) (*sqs.DeleteMessageBatchOutput, error) {
	if m.index.Dead() {
		return nil, fleettest.ErrDead
	}
	return m.Client.DeleteMessageBatch(ctx, in, o...)
}

func (m *mortalClient) ChangeMessageVisibilityBatch(ctx context.Context, in *sqs.ChangeMessageVisibilityBatchInput, o ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityBatchOutput, error) {
	if m.index.Dead() {
		return nil, fleettest.ErrDead
	}
	return m.Client.ChangeMessageVisibilityBatch(ctx, in, o...)
}

// queueName is the last part of a queue's URL.
func queueName(url string) string { return path.Base(url) }
