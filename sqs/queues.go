package rotasqs

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

// queues finds each lane's queue, creating it when missing, and remembers its URL until
// a call finds it gone.
type queues struct {
	client Client
	s      *settings

	mu   sync.Mutex
	urls map[string]string // by name
}

func newQueues(client Client, s *settings) *queues {
	return &queues{client: client, s: s, urls: map[string]string{}}
}

// url returns the URL of the queue named name, creating the queue when missing with a
// visibility timeout that outlasts every claim (what an event source mapping uses).
func (q *queues) url(ctx context.Context, name string) (string, error) {
	q.mu.Lock()
	u, ok := q.urls[name]
	q.mu.Unlock()
	if ok {
		return u, nil
	}
	got, err := q.client.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String(name)})
	if gone(err) {
		var made *sqs.CreateQueueOutput
		made, err = q.client.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(name), Attributes: map[string]string{
			string(types.QueueAttributeNameVisibilityTimeout): strconv.Itoa(int(q.s.receiveVisibility())),
		}})
		if err == nil {
			got = &sqs.GetQueueUrlOutput{QueueUrl: made.QueueUrl}
		}
	}
	if err != nil {
		return "", fmt.Errorf("rotasqs: find or create queue %q: %w", name, err)
	}
	u = aws.ToString(got.QueueUrl)
	q.mu.Lock()
	q.urls[name] = u
	q.mu.Unlock()
	return u, nil
}

// forget drops the URL of the queue named name when err says the queue is gone, so that
// the next call finds or creates it again.
func (q *queues) forget(name string, err error) {
	if gone(err) {
		q.mu.Lock()
		delete(q.urls, name)
		q.mu.Unlock()
	}
}

// gone reports whether err says the queue does not exist.
func gone(err error) bool {
	var missing *types.QueueDoesNotExist
	return errors.As(err, &missing)
}

// set records the URL of the queue named name, found by a listing.
func (q *queues) set(name, url string) {
	q.mu.Lock()
	q.urls[name] = url
	q.mu.Unlock()
}
