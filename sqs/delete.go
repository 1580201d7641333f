package rotasqs

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

// deleteWait is the longest a finished message waits for others to share its
// DeleteMessageBatch.
const deleteWait = 10 * time.Millisecond

// deleter deletes one queue's finished messages, up to MaxBatch to a DeleteMessageBatch:
// those that finish within deleteWait of the first, or while a call is in flight.
type deleter struct {
	c    *Consumer
	src  source
	in   chan string // receipt handles
	done chan struct{}
}

func (c *Consumer) newDeleter(src source) *deleter {
	d := &deleter{c: c, src: src, in: make(chan string, c.s.InHand), done: make(chan struct{})}
	go d.loop()
	return d
}

// add queues a message's deletion.
func (d *deleter) add(receipt string) { d.in <- receipt }

// close deletes what is queued and returns once it is done.
func (d *deleter) close() {
	close(d.in)
	<-d.done
}

func (d *deleter) loop() {
	defer close(d.done)
	for first := range d.in {
		batch := []string{first}
		t := time.NewTimer(deleteWait)
	gather:
		for len(batch) < MaxBatch {
			select {
			case r, ok := <-d.in:
				if !ok {
					break gather
				}
				batch = append(batch, r)
			case <-t.C:
				break gather
			}
		}
		t.Stop()
		d.delete(batch)
	}
}

// delete deletes the messages of receipts in one call, and those it failed in one more.
// A message that could not be deleted comes back once its visibility ends, its claim
// ended by then, and is dropped: the failure is logged, and nothing else is lost.
func (d *deleter) delete(receipts []string) {
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	c := d.c
	entries := make([]types.DeleteMessageBatchRequestEntry, len(receipts))
	for i, r := range receipts {
		entries[i] = types.DeleteMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(i)), ReceiptHandle: aws.String(r)}
	}
	var err error
	for try := 0; try < 2 && len(entries) > 0; try++ {
		url, uerr := c.queues.url(ctx, d.src.name)
		if uerr != nil {
			err = uerr
			break
		}
		var out *sqs.DeleteMessageBatchOutput
		out, err = c.client.DeleteMessageBatch(ctx, &sqs.DeleteMessageBatchInput{QueueUrl: aws.String(url), Entries: entries})
		if err != nil {
			c.queues.forget(d.src.name, err)
			continue
		}
		failed := map[string]types.BatchResultErrorEntry{}
		for _, f := range out.Failed {
			failed[aws.ToString(f.Id)] = f
		}
		var again []types.DeleteMessageBatchRequestEntry
		for _, e := range entries {
			if f, ok := failed[aws.ToString(e.Id)]; ok {
				again = append(again, e)
				err = fmt.Errorf("%s: %s", aws.ToString(f.Code), aws.ToString(f.Message))
			}
		}
		entries = again
	}
	if len(entries) > 0 && err != nil {
		c.logs.Log(ctx, d.src.name+" delete", slog.LevelWarn, "rota: delete failed", slog.String("queue", d.src.name),
			slog.Int("messages", len(entries)), slog.Any("error", err))
	}
}
