package rotanats

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/rotaworks/rota/bridge"
	"github.com/rotaworks/rota/dispatch"
	"github.com/rotaworks/rota/internal/lograte"
)

// garbledLogEvery is the least time between two lines about messages that do not decode:
// a flood of them costs a line every few seconds.
const garbledLogEvery = 10 * time.Second

// Consumer feeds a bridge.Worker from the lane consumers of one worker process: it pulls
// each lane's messages, at most InHand of a lane at once, hands each item to Worker.Do and
// acknowledges the message once Do has returned. Make one per worker process and Worker,
// on a NATS connection of its own, and call Run once: Run owns the Worker's stop. A
// Consumer is safe for concurrent use.
type Consumer struct {
	js      jetstream.JetStream
	w       *bridge.Worker
	q       queue
	garbled *lograte.Limiter
	ran     atomic.Bool
}

// NewConsumer returns a Consumer that pulls through js as cfg describes and runs the
// items on w. dc is the dispatch.Config the dispatcher's Dispatcher is built with (share
// the code that makes it): the lanes and ClaimFor are dc's, and its other fields are not
// used. NewConsumer refuses a nil js or w, a Config that cannot work and a dc without
// lanes, with a bad or repeated lane or a ClaimFor below 1s (dispatch.New's floor), wrapping
// ErrInvalidConfig. It does no I/O: Run declares the stream and the lane consumers.
func NewConsumer(js jetstream.JetStream, w *bridge.Worker, dc dispatch.Config, cfg Config) (*Consumer, error) {
	err := errors.Join(cfg.validate(), checkDispatch(dc))
	if js == nil {
		err = errors.Join(err, fmt.Errorf("%w: NewConsumer's js must not be nil", ErrInvalidConfig))
	}
	if w == nil {
		err = errors.Join(err, fmt.Errorf("%w: NewConsumer's Worker must not be nil", ErrInvalidConfig))
	}
	if err != nil {
		return nil, err
	}
	q := newQueue(cfg, dc)
	return &Consumer{js: js, w: w, q: q, garbled: lograte.New(q.Logger, garbledLogEvery, q.Clock.Now)}, nil
}

// Run is a worker process's whole life: it consumes every lane until ctx ends, then stops
// the Worker, and returns the joined errors. A process's main can be
// `err := consumer.Run(ctx)`.
//
// It starts by declaring the stream and each lane's durable consumer, as the package
// documentation describes them (a consumer has no delivery limit). A stream that already
// exists is not changed: Run refuses to start, with an error wrapping
// ErrStreamMismatch that names both values, when its duplicate window is not ClaimFor
// (the Sink declares it so) or its subjects do not take one of the lanes — a worker
// whose dispatch.Config or Subject disagrees with the dispatcher's fails at start
// instead of running. Lanes are consumed side by side: their priority is the
// dispatcher's, which queues each lane only up to its room.
//
// For each message it decodes the item, calls Worker.Do with the time of its arrival as
// the item's start and acknowledges the message once Do returns, whatever the outcome:
// what Do did not write stays claimed in the index until its claim ends, so nothing is
// lost. Do runs nothing whose claim is not current, ends within the Worker's margin or
// has already been started, so a redelivery — after a worker died, or while the first
// copy still runs — is acknowledged unrun. A message that does not decode is terminated,
// with a Warn line at most every 10 s that counts the others.
//
// When ctx ends, Run stops pulling (within FetchWait), gives back at once (Nak) the
// messages it pulled but did not hand to Do, and stops the Worker with a deadline of
// ShutdownTimeout: the items still waiting for a worker slot are handed back unstarted,
// those running end and their completions are written — or, past the deadline, are
// cancelled and left to their claims. Run returns once every message handed to Do is
// acknowledged. A clean stop logs nothing above Info and returns nil; a declaration that
// fails returns its error, and the Worker is stopped all the same. Run may be called
// once; a second call returns an error at once.
func (c *Consumer) Run(ctx context.Context) error {
	if c.ran.Swap(true) {
		return errors.New("rotanats: Consumer.Run called twice: the first stopped its Worker")
	}
	c.q.Logger.LogAttrs(ctx, slog.LevelInfo, "rota: consumer started", slog.String("stream", c.q.Stream), slog.Int("lanes", len(c.q.lanes)))
	var handlers sync.WaitGroup
	err := c.consume(ctx, &handlers)
	stop, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.q.ShutdownTimeout)
	defer cancel()
	err = errors.Join(err, c.w.Stop(stop))
	handlers.Wait()
	c.q.Logger.LogAttrs(context.WithoutCancel(ctx), slog.LevelInfo, "rota: consumer stopped", slog.Bool("clean", err == nil))
	return err
}

// consume declares the stream and the lane consumers, then pulls every lane until ctx
// ends; it returns once no pull is left, the messages' handlers counted in handlers.
func (c *Consumer) consume(ctx context.Context, handlers *sync.WaitGroup) error {
	st, err := c.stream(ctx)
	if err != nil {
		return err
	}
	cons := make([]jetstream.Consumer, len(c.q.lanes))
	for i, l := range c.q.lanes {
		cons[i], err = st.CreateOrUpdateConsumer(ctx, c.q.consumerConfig(l))
		if err != nil {
			return fmt.Errorf("rotanats: declare the consumer of lane %q: %w", l, err)
		}
	}
	var pulls sync.WaitGroup
	for i, l := range c.q.lanes {
		pulls.Go(func() { c.pull(ctx, l, cons[i], handlers) })
	}
	pulls.Wait()
	return nil
}

// stream returns the stream, created as the Sink declares it when missing, or checked
// against the Consumer's lanes and ClaimFor when it exists.
func (c *Consumer) stream(ctx context.Context) (jetstream.Stream, error) {
	st, err := c.js.Stream(ctx, c.q.Stream)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		var cerr error
		st, cerr = c.js.CreateStream(ctx, c.q.streamConfig())
		err = cerr
		if createdMeanwhile(cerr) {
			if st, err = c.js.Stream(ctx, c.q.Stream); errors.Is(err, jetstream.ErrStreamNotFound) {
				err = cerr // the subjects are another stream's
			}
		}
	}
	if err != nil {
		return nil, fmt.Errorf("rotanats: declare stream %q: %w", c.q.Stream, err)
	}
	if err := c.q.checkStream(st.CachedInfo().Config); err != nil {
		return nil, err
	}
	return st, nil
}

// pull pulls lane's messages until ctx ends, at most InHand in hand at once, and hands
// each to a handler counted in handlers.
func (c *Consumer) pull(ctx context.Context, lane dispatch.Lane, cons jetstream.Consumer, handlers *sync.WaitGroup) {
	slots := make(chan struct{}, c.q.InHand)
	run := context.WithoutCancel(ctx)
	for {
		n := take(ctx, slots)
		if n == 0 {
			return
		}
		got, err := c.fetch(ctx, cons, n, func(msg jetstream.Msg) {
			handlers.Go(func() {
				defer func() { <-slots }()
				c.handle(run, msg)
			})
		})
		for range n - got {
			<-slots
		}
		if err != nil && ctx.Err() == nil {
			c.q.Logger.LogAttrs(run, slog.LevelWarn, "rota: pull failed", slog.String("lane", string(lane)), slog.Any("error", err))
			select {
			case <-ctx.Done():
			case <-time.After(c.q.FetchWait):
			}
		}
	}
}

// take waits for a free slot and takes every other free one, up to the channel's
// capacity; it returns how many it took, 0 once ctx has ended.
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
	for n < cap(slots) {
		select {
		case slots <- struct{}{}:
			n++
		default:
			return n
		}
	}
	return n
}

// fetch pulls up to n messages, waiting at most FetchWait, and passes each to handle —
// or, once ctx has ended, gives it back with Nak. It returns how many it passed on.
func (c *Consumer) fetch(ctx context.Context, cons jetstream.Consumer, n int, handle func(jetstream.Msg)) (int, error) {
	batch, err := cons.Fetch(n, jetstream.FetchMaxWait(c.q.FetchWait))
	if err != nil {
		return 0, err
	}
	got := 0
	for msg := range batch.Messages() {
		if ctx.Err() != nil {
			_ = msg.Nak() // its claim is current: another worker may run it at once
			continue
		}
		got++
		handle(msg)
	}
	if err := batch.Error(); err != nil && !errors.Is(err, nats.ErrTimeout) && !errors.Is(err, jetstream.ErrNoMessages) {
		return got, err
	}
	return got, nil
}

// handle runs one message's item and acknowledges the message.
func (c *Consumer) handle(ctx context.Context, msg jetstream.Msg) {
	item, err := bridge.DecodeItem(msg.Data())
	if err != nil {
		c.garbled.Log(ctx, "garbled", slog.LevelWarn, "rota: message terminated, it does not decode",
			slog.String("subject", msg.Subject()), slog.Any("error", err))
		if err := msg.Term(); err != nil {
			c.q.Logger.LogAttrs(ctx, slog.LevelWarn, "rota: terminate failed", slog.String("subject", msg.Subject()), slog.Any("error", err))
		}
		return
	}
	if meta, err := msg.Metadata(); err == nil && meta.NumDelivered > 1 {
		// Its worker died or let it go, or it is still running: the Worker runs it only
		// if its claim is current and not yet started.
		c.q.Logger.LogAttrs(ctx, slog.LevelInfo, "rota: message redelivered", slog.String("subject", msg.Subject()),
			slog.Uint64("deliveries", meta.NumDelivered), slog.Time("claim_until", item.Claim.Until))
	}
	c.w.Do(ctx, item, c.q.Clock.Now())
	if err := msg.Ack(); err != nil {
		// The message comes back after AckWait, its claim ended, and is dropped then.
		c.q.Logger.LogAttrs(ctx, slog.LevelWarn, "rota: acknowledge failed", slog.String("subject", msg.Subject()), slog.Any("error", err))
	}
}
