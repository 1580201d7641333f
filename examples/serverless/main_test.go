package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	dtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/rotaworks/rota/bridge"
	"github.com/rotaworks/rota/duework"
	rotadynamo "github.com/rotaworks/rota/dynamodb"
	"github.com/rotaworks/rota/internal/fleettest"
	rotasqs "github.com/rotaworks/rota/sqs"
	"github.com/rotaworks/rota/tenancy"
)

// emulators returns a config on the test's endpoints (ROTA_TEST_DYNAMODB_ENDPOINT and
// ROTA_TEST_SQS_ENDPOINT, by default DynamoDB Local and fauxqs as .ci/services starts
// them) with a table and a queue prefix of the test's own, which are deleted when t
// ends. Without both endpoints answering, t is skipped, except under CI=true, where it
// fails.
func emulators(t *testing.T) config {
	t.Helper()
	cfg := config{dynamoEndpoint: os.Getenv("ROTA_TEST_DYNAMODB_ENDPOINT"), sqsEndpoint: os.Getenv("ROTA_TEST_SQS_ENDPOINT")}
	if cfg.dynamoEndpoint == "" {
		cfg.dynamoEndpoint = "http://127.0.0.1:8000"
	}
	if cfg.sqsEndpoint == "" {
		cfg.sqsEndpoint = "http://127.0.0.1:4566"
	}
	dy, q := dynamoClient(cfg), sqsClient(cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, errDy := dy.ListTables(ctx, &dynamodb.ListTablesInput{Limit: aws.Int32(1)})
	_, errQ := q.ListQueues(ctx, &sqs.ListQueuesInput{MaxResults: aws.Int32(1)})
	if err := errors.Join(errDy, errQ); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("no DynamoDB at %s or no SQS at %s: %v (CI=true: the tests must run)", cfg.dynamoEndpoint, cfg.sqsEndpoint, err)
		}
		t.Skipf("no DynamoDB at %s or no SQS at %s (%v); .ci/services starts DynamoDB Local and fauxqs there, "+
			"or set ROTA_TEST_DYNAMODB_ENDPOINT and ROTA_TEST_SQS_ENDPOINT", cfg.dynamoEndpoint, cfg.sqsEndpoint, err)
	}
	suffix := randomSuffix()
	cfg.table, cfg.prefix = "rota-sl-test-"+suffix, "rota-sl-test-"+suffix+"-"
	t.Cleanup(func() {
		ctx := context.Background()
		_, err := dy.DeleteTable(ctx, &dynamodb.DeleteTableInput{TableName: aws.String(cfg.table)})
		if missing := (*dtypes.ResourceNotFoundException)(nil); err != nil && !errors.As(err, &missing) {
			t.Logf("delete table %s: %v", cfg.table, err)
		}
		out, err := q.ListQueues(ctx, &sqs.ListQueuesInput{QueueNamePrefix: aws.String(cfg.prefix)})
		if err != nil {
			t.Logf("list queues %s*: %v", cfg.prefix, err)
			return
		}
		for _, u := range out.QueueUrls {
			if _, err := q.DeleteQueue(ctx, &sqs.DeleteQueueInput{QueueUrl: aws.String(u)}); err != nil {
				t.Logf("delete queue %s: %v", u, err)
			}
		}
	})
	return cfg
}

func dynamoClient(cfg config) *dynamodb.Client {
	return dynamodb.New(dynamodb.Options{Region: localRegion, BaseEndpoint: aws.String(cfg.dynamoEndpoint),
		Credentials: credentials.NewStaticCredentialsProvider("local", "local", "")})
}

func sqsClient(cfg config) *sqs.Client {
	return sqs.New(sqs.Options{Region: localRegion, BaseEndpoint: aws.String(cfg.sqsEndpoint),
		Credentials: credentials.NewStaticCredentialsProvider("local", "local", "")})
}

// The demo's size in the tests: two tenants of each plan, on the dev tiers (due again
// 1 to 4 seconds after a run).
const testTenants = 6

// testRunFor is how long each test runs the command: a free tenant's source, first due
// within 2 s, is due again 4 s after that run, so every source runs twice with seconds to
// spare.
const testRunFor = 10 * time.Second

// runLogged runs the command with cfg, its function instances' pipelines recorded in a
// RunLog (each run holds its source 10 ms), and returns the log and what the command
// logged. It fails t when run returns an error.
func runLogged(t *testing.T, cfg config) (*fleettest.RunLog, string) {
	t.Helper()
	runs := fleettest.NewRunLog(t, "instance")
	hold := func(ctx context.Context, _ duework.Key) bool {
		pause(ctx, 10*time.Millisecond)
		return false
	}
	cfg.pipeline = func(n int) bridge.Pipeline { return runs.Pipeline(n, hold) }
	var logs fleettest.Buffer
	start := time.Now()
	if err := run(context.Background(), cfg, slog.New(slog.NewTextHandler(&logs, nil))); err != nil {
		t.Fatalf("run = %v\n%s", err, logs.String())
	}
	t.Logf("ran for %v (%v asked), %d runs", time.Since(start).Round(time.Millisecond), cfg.runFor, len(runs.All()))
	return runs, logs.String()
}

// checkServed checks the stores after a clean stop: every demo source ran at least
// twice, no two runs of a source overlapped, and every source is scheduled and unclaimed
// (with endedClaims, holds no claim that has not ended), its streak counting its runs.
func checkServed(t *testing.T, cfg config, runs *fleettest.RunLog, endedClaims bool) {
	t.Helper()
	st, err := rotadynamo.OpenStores(context.Background(), dynamoClient(cfg), cfg.table, rotadynamo.StoresConfig{})
	if err != nil {
		t.Fatal(err)
	}
	store := fleettest.NewStore(t, st.Index, st.Watchlist, st.Entitlements)
	store.EndedClaimsStay = endedClaims
	for i := range testTenants {
		tc, err := tenancy.NewContext(demoTenant(i))
		if err != nil {
			t.Fatal(err)
		}
		store.Tenants[tc.UserID()] = tc
		for _, slug := range demoSources {
			store.Sources[duework.Key{UserID: tc.UserID(), WorkKey: slug}] = true
		}
	}
	runs.CheckEachRanAlone(store.Sources)
	written := runs.Written()
	store.CheckNothingLost(written)
	perPlan := map[tenancy.PlanID][]int{}
	for i := range testTenants {
		n := 0
		for _, slug := range demoSources {
			k := duework.Key{UserID: demoTenant(i), WorkKey: slug}
			if written[k] < 2 {
				t.Errorf("%s/%s ran %d times, want at least 2: the tenant was not served throughout", k.UserID, k.WorkKey, written[k])
			}
			n += written[k]
		}
		plan := demoPlans[i%len(demoPlans)]
		perPlan[plan] = append(perPlan[plan], n)
	}
	t.Logf("runs per tenant, by plan: %v", perPlan)
}

// checkQuiet fails t when a clean run logged a warning or an error.
func checkQuiet(t *testing.T, logs string) {
	t.Helper()
	for line := range strings.Lines(logs) {
		if strings.Contains(line, "level=WARN") || strings.Contains(line, "level=ERROR") {
			t.Errorf("a clean run logged: %s", line)
		}
	}
}

// The deployment as it runs on AWS, locally: the schedule invokes the dispatch function,
// each lane's mapping invokes two worker instances with the queue's messages. Every
// source runs, repeatedly, no source's runs overlap, and after the stop nothing is lost:
// the queues are empty, every entry is scheduled and unclaimed, and its streak counts its
// runs.
func TestDispatchAndWorkerFunctions(t *testing.T) {
	cfg := emulators(t)
	cfg.tenants, cfg.every, cfg.claimFor, cfg.concurrency, cfg.runFor = testTenants, 250*time.Millisecond, 10*time.Second, 2, testRunFor
	runs, logs := runLogged(t, cfg)
	checkServed(t, cfg, runs, true)
	checkQuiet(t, logs)
	for _, lc := range lanes {
		name := rotasqs.Config{Prefix: cfg.prefix}.QueueName(lc.Lane)
		if v, inFlight := depth(t, cfg, name); v+inFlight != 0 {
			t.Errorf("queue %s holds %d visible and %d in-flight messages after the stop", name, v, inFlight)
		}
	}
	invoked := 0
	for line := range strings.Lines(logs) {
		if strings.Contains(line, `msg="serverless: worker instance stopped"`) && !strings.Contains(line, "invocations=0 ") {
			invoked++
		}
	}
	if invoked < len(lanes) {
		t.Errorf("%d worker instances were invoked, want at least one per lane:\n%s", invoked, logs)
	}
}

// One function that dispatches and runs (RunHandler) on the schedule: every source runs,
// repeatedly, alone, and nothing is left claimed.
func TestSingleFunction(t *testing.T) {
	cfg := emulators(t)
	cfg.tenants, cfg.every, cfg.claimFor, cfg.concurrency, cfg.runFor = testTenants, 250*time.Millisecond, 10*time.Second, 1, testRunFor
	cfg.single = true
	runs, logs := runLogged(t, cfg)
	checkServed(t, cfg, runs, false)
	checkQuiet(t, logs)
}

// depth reads the visible and in-flight counts of the queue named name.
func depth(t *testing.T, cfg config, name string) (visible, inFlight int) {
	t.Helper()
	ctx := context.Background()
	q := sqsClient(cfg)
	url, err := q.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String(name)})
	if err != nil {
		t.Fatal(err)
	}
	out, err := q.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: url.QueueUrl, AttributeNames: []types.QueueAttributeName{
		types.QueueAttributeNameApproximateNumberOfMessages, types.QueueAttributeNameApproximateNumberOfMessagesNotVisible}})
	if err != nil {
		t.Fatal(err)
	}
	visible, errV := strconv.Atoi(out.Attributes[string(types.QueueAttributeNameApproximateNumberOfMessages)])
	inFlight, errF := strconv.Atoi(out.Attributes[string(types.QueueAttributeNameApproximateNumberOfMessagesNotVisible)])
	if err := errors.Join(errV, errF); err != nil {
		t.Fatal(err)
	}
	return visible, inFlight
}

// The mapping does what Lambda does with ReportBatchItemFailures: it deletes every
// message the response does not name, leaves the named ones in flight to come back after
// the visibility timeout, and deletes none when the invocation fails or its response
// names a message the batch does not hold.
func TestMappingDeletesWhatTheResponseDoesNotName(t *testing.T) {
	cfg := emulators(t)
	q := sqsClient(cfg)
	ctx := context.Background()
	for _, tt := range []struct {
		name     string
		handler  func(ev events.SQSEvent) (events.SQSEventResponse, error)
		inFlight int // of three messages, after one poll
	}{
		{"all done", func(events.SQSEvent) (events.SQSEventResponse, error) { return events.SQSEventResponse{}, nil }, 0},
		{"one named", func(ev events.SQSEvent) (events.SQSEventResponse, error) {
			var resp events.SQSEventResponse
			for _, r := range ev.Records {
				if r.Body == "m1" {
					resp.BatchItemFailures = append(resp.BatchItemFailures, events.SQSBatchItemFailure{ItemIdentifier: r.MessageId})
				}
			}
			return resp, nil
		}, 1},
		{"failed", func(events.SQSEvent) (events.SQSEventResponse, error) {
			return events.SQSEventResponse{}, errors.New("boom")
		}, 3},
		{"names a stranger", func(events.SQSEvent) (events.SQSEventResponse, error) {
			return events.SQSEventResponse{BatchItemFailures: []events.SQSBatchItemFailure{{ItemIdentifier: "stranger"}}}, nil
		}, 3},
	} {
		t.Run(tt.name, func(t *testing.T) {
			name := cfg.prefix + strings.ReplaceAll(tt.name, " ", "-")
			made, err := q.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(name), Attributes: map[string]string{"VisibilityTimeout": "60"}})
			if err != nil {
				t.Fatal(err)
			}
			var entries []types.SendMessageBatchRequestEntry
			for i := range 3 {
				entries = append(entries, types.SendMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(i)), MessageBody: aws.String(fmt.Sprint("m", i))})
			}
			if _, err := q.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: made.QueueUrl, Entries: entries}); err != nil {
				t.Fatal(err)
			}
			var got []string
			m := &mapping{client: q, queue: name, timeout: time.Minute, logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
				handler: func(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
					if _, ok := ctx.Deadline(); !ok {
						t.Error("the invocation has no deadline")
					}
					for _, r := range ev.Records {
						got = append(got, r.Body)
					}
					return tt.handler(ev)
				}}
			for len(got) < 3 { // a receive may return fewer than are there
				if _, err := m.poll(ctx); err != nil {
					t.Fatal(err)
				}
			}
			slices.Sort(got)
			if fmt.Sprint(got) != "[m0 m1 m2]" {
				t.Errorf("the handler got %v, want [m0 m1 m2]", got)
			}
			if visible, inFlight := depth(t, cfg, name); visible != 0 || inFlight != tt.inFlight {
				t.Errorf("after the poll the queue holds %d visible and %d in flight, want 0 and %d", visible, inFlight, tt.inFlight)
			}
		})
	}
}

// settle, which the test above checks through a queue, on the responses that test does not
// send: a message named twice, and an empty identifier.
func TestSettle(t *testing.T) {
	recs := []events.SQSMessage{{MessageId: "a"}, {MessageId: "b"}, {MessageId: "c"}}
	ids := func(ms []events.SQSMessage) string {
		var s []string
		for _, m := range ms {
			s = append(s, m.MessageId)
		}
		return strings.Join(s, ",")
	}
	fail := func(ids ...string) events.SQSEventResponse {
		var r events.SQSEventResponse
		for _, id := range ids {
			r.BatchItemFailures = append(r.BatchItemFailures, events.SQSBatchItemFailure{ItemIdentifier: id})
		}
		return r
	}
	for _, tt := range []struct {
		resp    events.SQSEventResponse
		err     error
		done    string
		wantErr bool
	}{
		{fail(), nil, "a,b,c", false},
		{fail("b"), nil, "a,c", false},
		{fail("a", "b", "c"), nil, "", false},
		{fail("b", "b"), nil, "a,c", false},
		{fail(), errors.New("boom"), "", true},
		{fail("z"), nil, "", true},
		{fail(""), nil, "", true},
	} {
		done, err := settle(recs, tt.resp, tt.err)
		if ids(done) != tt.done || (err != nil) != tt.wantErr {
			t.Errorf("settle(%v, %v) = %q, %v; want %q, error %v", tt.resp.BatchItemFailures, tt.err, ids(done), err, tt.done, tt.wantErr)
		}
	}
}

// Flags that cannot work are refused, each named, before anything is opened.
func TestRunRefusesBadFlags(t *testing.T) {
	err := run(context.Background(), config{every: time.Millisecond, concurrency: 0, tenants: 0, timeout: -1}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	for _, want := range []string{"-dynamodb", "-tenants", "-every", "-timeout", "-concurrency"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("run = %v, want an error naming %s", err, want)
		}
	}
	cfg := config{dynamoEndpoint: "http://127.0.0.1:1", sqsEndpoint: "http://127.0.0.1:1", tenants: 1, every: time.Second, concurrency: 1,
		claimFor: time.Minute, timeout: time.Minute + 2*time.Second + time.Millisecond}
	if err := run(context.Background(), cfg, slog.New(slog.NewTextHandler(io.Discard, nil))); err == nil || !strings.Contains(err.Error(), "visibility timeout, 1m2s") {
		t.Errorf("run with a timeout past the visibility timeout = %v, want an error naming 1m2s", err)
	}
	cfg.timeout = time.Minute + 2*time.Second
	if err := cfg.validate(); err != nil {
		t.Errorf("a timeout equal to the visibility timeout is refused: %v", err)
	}
}
