package rotasqs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path"
	"strconv"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/rotaworks/rota/bridge"
	"github.com/rotaworks/rota/dispatch"
	"github.com/rotaworks/rota/internal/lograte"
)

// logEvery is the least time between two lines of one kind about one queue: a flood of
// bad messages costs a line every few seconds.
const logEvery = 10 * time.Second

// callTimeout bounds each SQS call a Consumer makes besides its receives, which take up to
// WaitTime more.
const callTimeout = 30 * time.Second

// Consumer feeds a bridge.Worker from the lane queues: for each lane it long-polls the
// queue, at most InHand messages in hand at once, hands each item to Worker.Do and deletes
// the message once Do has returned. Make one per worker process and call Run. A Consumer
// is safe for concurrent use.
type Consumer struct {
	client Client
	w      *bridge.Worker
	s      settings
	queues *queues
	logs   *lograte.Limiter

	mu     sync.Mutex
	strays map[string]bool // the queues under Prefix that are no lane's, by name, being drained
	warned map[string]bool // the strays already logged
}

// NewConsumer returns a Consumer that receives through client from the queues of dc's
// lanes, as cfg describes, and runs the items on w. dc is the Dispatcher's configuration,
// as for NewSink. NewConsumer refuses a nil client or w, a dispatch.Config without valid
// lanes or ClaimFor, and a Config that cannot work, wrapping ErrInvalidConfig. It does no
// I/O.
func NewConsumer(client Client, w *bridge.Worker, dc dispatch.Config, cfg Config) (*Consumer, error) {
	s, err := settle(dc, cfg)
	if client == nil {
		err = errors.Join(err, fmt.Errorf("%w: NewConsumer's client must not be nil", ErrInvalidConfig))
	}
	if w == nil {
		err = errors.Join(err, fmt.Errorf("%w: NewConsumer's w must not be nil", ErrInvalidConfig))
	}
	if err != nil {
		return nil, err
	}
	c := &Consumer{client: client, w: w, s: s, strays: map[string]bool{}, warned: map[string]bool{}}
	c.queues = newQueues(client, &c.s)
	c.logs = lograte.New(c.s.Logger, logEvery, c.s.Clock.Now)
	return c, nil
}

// source is one queue a Consumer drains: a lane's, or a stray under Prefix.
type source struct {
	name  string
	stray bool
}

// Run finds each lane's queue, creating the missing ones, then consumes every lane until
// ctx ends, side by side: their priority is the dispatcher's, which queues each lane only
// up to its room. Every ScanEvery it also lists the queues under Prefix and drains those
// that are no lane's, with one Warn line for each the first time.
//
// Each receive makes its messages invisible for ClaimFor, MaxClockSkew and
// VisibilitySlack: no claim the Dispatcher hands out outlasts that, so a message is not
// delivered again while its claim can still run. A message whose claim ends much sooner
// (it waited in the queue for more than a quarter of ClaimFor) is made visible again
// VisibilitySlack after its claim's end, plus MaxClockSkew, so that a message a dead worker
// held comes back, is dropped and stops counting against the lane's room soon after its
// claim ends.
//
// For each message Run decodes the item and calls Worker.Do, with the time of its arrival
// as the item's start, then deletes the message once Do has returned, whatever the outcome:
// what Do did not write stays claimed in the index until its claim ends, so nothing is
// lost. A message that does not decode, and one whose claim has ended, is deleted unrun,
// and logged: at most one line every ten seconds per queue and kind, with the count of
// those held back. A forged item, or one whose claim is no longer current, is not run by Do,
// which logs it, and is deleted.
//
// When ctx ends, Run stops receiving (a receive under way finishes, within WaitTime),
// makes the messages it received but did not hand to Do visible again at once, and
// returns nil once every message handed to Do is deleted. The items running then are not
// cancelled by ctx: call Worker.Stop with a deadline to bound the stop. Run returns an
// error, without consuming, when it cannot find or create a lane's queue.
func (c *Consumer) Run(ctx context.Context) error {
	for _, l := range c.s.lanes {
		if _, err := c.queues.url(ctx, c.s.QueueName(l)); err != nil {
			return err
		}
	}
	var wg sync.WaitGroup
	for _, l := range c.s.lanes {
		wg.Go(func() { c.consume(ctx, source{name: c.s.QueueName(l)}) })
	}
	wg.Go(func() { c.scan(ctx, &wg) })
	wg.Wait()
	return nil
}

// consume receives src's messages until ctx ends — or, for a stray, until a receive
// finds it empty — at most InHand in hand at once.
func (c *Consumer) consume(ctx context.Context, src source) {
	slots := make(chan struct{}, c.s.InHand)
	del := c.newDeleter(src)
	var handlers sync.WaitGroup
	defer func() {
		handlers.Wait()
		del.close()
	}()
	run := context.WithoutCancel(ctx)
	for {
		n := take(ctx, slots)
		if n == 0 {
			return
		}
		msgs, err := c.receive(run, src, n)
		for range n - len(msgs) {
			<-slots
		}
		if err != nil {
			if src.stray && gone(err) {
				return
			}
			c.logs.Log(run, src.name+" receive", slog.LevelWarn, "rota: receive failed", slog.String("queue", src.name), slog.Any("error", err))
			c.queues.forget(src.name, err)
			pause(ctx, c.s.WaitTime)
			continue
		}
		if len(msgs) == 0 && src.stray {
			return
		}
		if ctx.Err() != nil {
			c.giveBack(run, src, msgs)
			for range msgs {
				<-slots
			}
			return
		}
		for _, m := range msgs {
			handlers.Go(func() {
				defer func() { <-slots }()
				c.handle(run, src, m)
				del.add(m.receipt)
			})
		}
	}
}

// take waits for a free slot and takes every other free one, up to MaxBatch; it returns
// how many it took, 0 once ctx has ended.
func take(ctx context.Context, slots chan struct{}) int {
	if ctx.Err() != nil {
		return 0
	}
	select {
	case slots <- struct{}{}:
	case <-ctx.Done():
		return 0
	}
	n := 1
	for n < MaxBatch {
		select {
		case slots <- struct{}{}:
			n++
		default:
			return n
		}
	}
	return n
}

// pause waits for d or until ctx ends.
func pause(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// message is one message received, its item decoded.
type message struct {
	id, receipt string
	receives    int
	received    time.Time
	item        dispatch.Item
	err         error // why the body does not decode
}

// receive receives up to n of src's messages in one long poll, decodes them, and shortens
// the visibility of those whose claims end well before the receive's own.
func (c *Consumer) receive(ctx context.Context, src source, n int) ([]message, error) {
	ctx, cancel := context.WithTimeout(ctx, c.s.WaitTime+callTimeout)
	defer cancel()
	url, err := c.queues.url(ctx, src.name)
	if err != nil {
		return nil, err
	}
	out, err := c.client.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
		QueueUrl:                    aws.String(url),
		MaxNumberOfMessages:         int32(n),
		VisibilityTimeout:           c.s.receiveVisibility(),
		WaitTimeSeconds:             int32(c.s.WaitTime / time.Second),
		MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameApproximateReceiveCount},
	})
	if err != nil {
		return nil, err
	}
	now := c.s.Clock.Now()
	msgs := make([]message, len(out.Messages))
	var shorten []types.ChangeMessageVisibilityBatchRequestEntry
	for i, raw := range out.Messages {
		m := message{id: aws.ToString(raw.MessageId), receipt: aws.ToString(raw.ReceiptHandle), received: now}
		m.receives, _ = strconv.Atoi(raw.Attributes[string(types.MessageSystemAttributeNameApproximateReceiveCount)])
		m.item, m.err = bridge.DecodeItem([]byte(aws.ToString(raw.Body)))
		msgs[i] = m
		if m.err != nil || !now.Before(m.item.Claim.Until) {
			continue
		}
		if v := c.s.visibility(m.item.Claim.Until.Sub(now)); v < c.s.receiveVisibility()-int32((c.s.claimFor/4).Seconds()) {
			shorten = append(shorten, types.ChangeMessageVisibilityBatchRequestEntry{Id: aws.String(strconv.Itoa(i)),
				ReceiptHandle: raw.ReceiptHandle, VisibilityTimeout: v})
		}
	}
	if len(shorten) > 0 {
		c.changeVisibility(ctx, src, url, shorten)
	}
	return msgs, nil
}

// giveBack makes msgs visible again at once: they were received while ctx ended, and
// another worker may run them now.
func (c *Consumer) giveBack(ctx context.Context, src source, msgs []message) {
	if len(msgs) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	url, err := c.queues.url(ctx, src.name)
	if err != nil {
		return // they come back once their visibility ends
	}
	entries := make([]types.ChangeMessageVisibilityBatchRequestEntry, len(msgs))
	for i, m := range msgs {
		entries[i] = types.ChangeMessageVisibilityBatchRequestEntry{Id: aws.String(strconv.Itoa(i)), ReceiptHandle: aws.String(m.receipt)}
	}
	c.changeVisibility(ctx, src, url, entries)
}

// changeVisibility sets the visibility of messages in one call. A failure leaves them
// invisible for longer, which costs time, never an item: it is logged.
func (c *Consumer) changeVisibility(ctx context.Context, src source, url string, entries []types.ChangeMessageVisibilityBatchRequestEntry) {
	out, err := c.client.ChangeMessageVisibilityBatch(ctx, &sqs.ChangeMessageVisibilityBatchInput{QueueUrl: aws.String(url), Entries: entries})
	if err == nil && len(out.Failed) > 0 {
		f := out.Failed[0]
		err = fmt.Errorf("%d of %d entries failed, the first %s: %s", len(out.Failed), len(entries), aws.ToString(f.Code), aws.ToString(f.Message))
	}
	if err != nil {
		c.logs.Log(ctx, src.name+" visibility", slog.LevelWarn, "rota: visibility change failed", slog.String("queue", src.name),
			slog.Int("messages", len(entries)), slog.Any("error", err))
	}
}

// handle runs one message's item, or drops it unrun, and logs what it dropped.
func (c *Consumer) handle(ctx context.Context, src source, m message) {
	q := slog.String("queue", src.name)
	switch {
	case m.err != nil:
		c.logs.Log(ctx, src.name+" garbled", slog.LevelWarn, "rota: message dropped", q, slog.String("reason", "garbled"),
			slog.String("message_id", m.id), slog.Any("error", m.err))
		return
	case !m.received.Before(m.item.Claim.Until):
		c.logs.Log(ctx, src.name+" ended", slog.LevelInfo, "rota: message dropped", q, slog.String("reason", "claim ended"),
			slog.String("user_id", m.item.Claim.Entry.UserID), slog.String("work_key", m.item.Claim.Entry.WorkKey),
			slog.Time("claim_until", m.item.Claim.Until), slog.Int("receives", m.receives))
		return
	case m.receives > 1:
		c.logs.Log(ctx, src.name+" again", slog.LevelInfo, "rota: message redelivered", q, slog.Int("receives", m.receives),
			slog.Time("claim_until", m.item.Claim.Until))
	}
	c.w.Do(ctx, m.item, c.s.Clock.Now()) // it logs the items it does not run
}

// scan lists the queues under Prefix now and every ScanEvery until ctx ends, and starts
// draining each that is no lane's and is not being drained.
func (c *Consumer) scan(ctx context.Context, wg *sync.WaitGroup) {
	lanes := map[string]bool{}
	for _, l := range c.s.lanes {
		lanes[c.s.QueueName(l)] = true
	}
	for ctx.Err() == nil {
		urls, err := c.list(ctx)
		if err != nil && ctx.Err() == nil {
			c.logs.Log(ctx, "list", slog.LevelWarn, "rota: queue listing failed", slog.String("prefix", c.s.Prefix), slog.Any("error", err))
		}
		for _, u := range urls {
			name := path.Base(u)
			if lanes[name] || !isLaneQueue(c.s.Prefix, name) || !c.startStray(ctx, name, u) {
				continue
			}
			wg.Go(func() {
				defer c.stopStray(name)
				c.consume(ctx, source{name: name, stray: true})
			})
		}
		pause(ctx, c.s.ScanEvery)
	}
}

// list returns the URLs of every queue under Prefix.
func (c *Consumer) list(ctx context.Context) ([]string, error) {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	var urls []string
	in := &sqs.ListQueuesInput{QueueNamePrefix: aws.String(c.s.Prefix), MaxResults: aws.Int32(1000)}
	for {
		out, err := c.client.ListQueues(ctx, in)
		if err != nil {
			return urls, err
		}
		urls = append(urls, out.QueueUrls...)
		if out.NextToken == nil {
			return urls, nil
		}
		in.NextToken = out.NextToken
	}
}

// startStray records that the stray queue name at url is being drained, logging it the
// first time, and reports false when it already is.
func (c *Consumer) startStray(ctx context.Context, name, url string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.strays[name] {
		return false
	}
	c.strays[name] = true
	c.queues.set(name, url)
	if !c.warned[name] {
		c.warned[name] = true
		c.s.Logger.LogAttrs(ctx, slog.LevelWarn, "rota: queue is not a lane", slog.String("queue", name),
			slog.String("action", "its messages are run or dropped as a lane's are"))
	}
	return true
}

func (c *Consumer) stopStray(name string) {
	c.mu.Lock()
	delete(c.strays, name)
	c.mu.Unlock()
}
