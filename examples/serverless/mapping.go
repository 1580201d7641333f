package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/rotaworks/rota/bridge"
	"github.com/rotaworks/rota/dispatch"
)

// receiveWait is how long one receive of a mapping waits for messages: Lambda's pollers
// wait 20 s; a short wait lets the local run stop soon.
const receiveWait = time.Second

// mapping stands in for a lane queue's SQS event source mapping with batch size 10,
// no batching window and ReportBatchItemFailures on, and for the one worker function
// instance it invokes: it receives up to ten messages, invokes the handler with them under
// a deadline that stands for the function's timeout, and deletes the messages that the
// partial-batch response does not name.
type mapping struct {
	client  *sqs.Client
	queue   string // the lane queue's name
	url     string // "" until the queue is found
	timeout time.Duration
	handler func(context.Context, events.SQSEvent) (events.SQSEventResponse, error)
	worker  *bridge.Worker
	logger  *slog.Logger

	invocations, received, failed atomic.Int64
}

// newMapping builds the worker function's handler of instance f and the mapping that
// invokes it with the messages of lane's queue.
func newMapping(f *function, lane dispatch.Lane, timeout time.Duration, logger *slog.Logger) (*mapping, error) {
	handler, w, err := f.workerHandler()
	if err != nil {
		return nil, err
	}
	return &mapping{client: f.sqs, queue: f.queues.QueueName(lane), timeout: timeout, handler: handler, worker: w,
		logger: f.logger.With("function", "worker", "queue", f.queues.QueueName(lane))}, nil
}

// run polls until polling ends, or until a receive that began after scheduled was closed
// finds the queue empty. A failed call is logged and tried again a second later.
func (m *mapping) run(polling context.Context, scheduled <-chan struct{}) {
	for polling.Err() == nil {
		draining := closed(scheduled)
		n, err := m.poll(polling)
		switch {
		case polling.Err() != nil:
		case err != nil:
			m.logger.Warn("serverless: poll failed", "error", err)
			pause(polling, time.Second)
		case n == 0 && draining:
			return
		}
	}
}

// closed reports whether ch is closed.
func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// pause waits d or until ctx ends.
func pause(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// poll receives one batch and, when it holds messages, invokes the handler with it and
// deletes what the invocation is done with. It returns how many messages it received.
// Until the dispatch function has created the queue there is nothing to receive.
func (m *mapping) poll(ctx context.Context) (int, error) {
	if m.url == "" {
		out, err := m.client.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String(m.queue)})
		if missing := (*types.QueueDoesNotExist)(nil); errors.As(err, &missing) {
			pause(ctx, receiveWait)
			return 0, nil
		}
		if err != nil {
			return 0, fmt.Errorf("find queue %s: %w", m.queue, err)
		}
		m.url = aws.ToString(out.QueueUrl)
	}
	out, err := m.client.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(m.url), MaxNumberOfMessages: batchSize,
		WaitTimeSeconds: int32(receiveWait / time.Second), MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameAll}})
	if err != nil || len(out.Messages) == 0 {
		return 0, err
	}
	ev := m.event(out.Messages)
	// The invocation is not cut short by the stop: only its timeout ends it.
	deadline := time.Now().Add(m.timeout)
	inv, cancel := context.WithDeadline(context.WithoutCancel(ctx), deadline)
	resp, err := m.handler(inv, ev)
	cancel()
	if err == nil && time.Now().After(deadline) {
		err = errors.New("the invocation timed out")
	}
	done, err := settle(ev.Records, resp, err)
	m.invocations.Add(1)
	m.received.Add(int64(len(ev.Records)))
	m.failed.Add(int64(len(ev.Records) - len(done)))
	if err != nil {
		m.logger.Warn("serverless: batch failed, every message comes back", "messages", len(ev.Records), "error", err)
	}
	return len(ev.Records), m.delete(ctx, done)
}

// event is the SQS event Lambda would build from msgs.
func (m *mapping) event(msgs []types.Message) events.SQSEvent {
	ev := events.SQSEvent{Records: make([]events.SQSMessage, len(msgs))}
	for i, msg := range msgs {
		ev.Records[i] = events.SQSMessage{MessageId: aws.ToString(msg.MessageId), ReceiptHandle: aws.ToString(msg.ReceiptHandle),
			Body: aws.ToString(msg.Body), Md5OfBody: aws.ToString(msg.MD5OfBody), Attributes: msg.Attributes, EventSource: "aws:sqs",
			EventSourceARN: "arn:aws:sqs:" + localRegion + ":" + localAccount + ":" + m.queue, AWSRegion: localRegion}
	}
	return ev
}

// settle returns the records an invocation is done with, as Lambda decides with
// ReportBatchItemFailures: none when the invocation failed (err), and none, with an error,
// when the response names a message the batch does not hold; otherwise every record the
// response does not name.
func settle(records []events.SQSMessage, resp events.SQSEventResponse, err error) ([]events.SQSMessage, error) {
	if err != nil {
		return nil, err
	}
	again := map[string]bool{}
	for _, f := range resp.BatchItemFailures {
		again[f.ItemIdentifier] = true
	}
	var done []events.SQSMessage
	for _, r := range records {
		if again[r.MessageId] {
			delete(again, r.MessageId)
			continue
		}
		done = append(done, r)
	}
	for id := range again {
		return nil, fmt.Errorf("the response names %q, which is no message of the batch", id)
	}
	return done, nil
}

// delete deletes done in one call. A message it fails to delete comes back once its
// visibility timeout ends, its claim ended by then, and is dropped unrun.
func (m *mapping) delete(ctx context.Context, done []events.SQSMessage) error {
	if len(done) == 0 {
		return nil
	}
	entries := make([]types.DeleteMessageBatchRequestEntry, len(done))
	for i, r := range done {
		entries[i] = types.DeleteMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(i)), ReceiptHandle: aws.String(r.ReceiptHandle)}
	}
	out, err := m.client.DeleteMessageBatch(context.WithoutCancel(ctx), &sqs.DeleteMessageBatchInput{QueueUrl: aws.String(m.url), Entries: entries})
	if err != nil {
		return fmt.Errorf("delete %d messages: %w", len(done), err)
	}
	if len(out.Failed) > 0 {
		f := out.Failed[0]
		return fmt.Errorf("delete: %d of %d messages failed, the first %s: %s", len(out.Failed), len(done), aws.ToString(f.Code), aws.ToString(f.Message))
	}
	return nil
}

// stop stops the instance's Worker, which has nothing left to write once its handler has
// returned, and logs what the instance did.
func (m *mapping) stop() error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := m.worker.Stop(ctx)
	m.logger.Info("serverless: worker instance stopped", "invocations", m.invocations.Load(), "messages", m.received.Load(),
		"not_done", m.failed.Load())
	return err
}
