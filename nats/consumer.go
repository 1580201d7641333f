package rotanats

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/rotaworks/rota/bridge"
	"github.com/rotaworks/rota/dispatch"
)

// Consumer feeds a bridge.Worker from the lane consumers of one worker process: it pulls
// each lane's messages, at most InHand of a lane at once, hands each item to Worker.Do and
// acknowledges the message once Do has returned. Make one per worker process, on a NATS
// connection of its own, and call Run. A Consumer is safe for concurrent use.
type Consumer struct {
	js  jetstream.JetStream
	w   *bridge.Worker
	cfg Config // with defaults
}

// NewConsumer returns a Consumer that pulls through js as cfg describes and runs the
// items on w. It refuses a nil js or w and a Config that cannot work, wrapping
// ErrInvalidConfig. It does no I/O: Run declares the stream and the lane consumers.
func NewConsumer(js jetstream.JetStream, w *bridge.Worker, cfg Config) (*Consumer, error) {
	err := cfg.validate()
	if js == nil {
		err = errors.Join(err, fmt.Errorf("%w: NewConsumer's js must not be nil", ErrInvalidConfig))
	}
	if w == nil {
		err = errors.Join(err, fmt.Errorf("%w: NewConsumer's w must not be nil", ErrInvalidConfig))
	}
	if err != nil {
		return nil, err
	}
	return &Consumer{js: js, w: w, cfg: cfg.withDefaults()}, nil
}

// Run creates or updates the stream and each lane's durable consumer (explicit
// acknowledgement, AckWait ClaimFor + AckSlack, MaxAckPending, no delivery limit), then
// consumes every lane until ctx ends. Lanes are consumed side by side: their priority is
// the dispatcher's, which queues each lane only up to its room.
//
// For each message it decodes the item, calls Worker.Do with the time of its arrival as
// the item's start and acknowledges the message once Do returns, whatever the outcome:
// what Do did not write stays claimed in the index until its claim ends, so nothing is
// lost. An item whose claim has ended, or ends within the Worker's margin — a redelivery
// after a worker died, a message that waited too long — is handed back unrun by Do and
// its message dropped. A message that does not decode is terminated and logged.
//
// When ctx ends, Run stops pulling, gives back at once (Nak) the messages it pulled but
// did not hand to Do, and returns nil once every message handed to Do is acknowledged.
// The items running then are not cancelled by ctx: call Worker.Stop with a deadline to
// bound the stop. Run returns an error, without consuming, when it cannot declare the
// stream or a consumer.
func (c *Consumer) Run(ctx context.Context) error {
	st, err := declareStream(ctx, c.js, c.cfg)
	if err != nil {
		return err
	}
	cons := make([]jetstream.Consumer, len(c.cfg.Lanes))
	for i, l := range c.cfg.Lanes {
		cons[i], err = st.CreateOrUpdateConsumer(ctx, c.cfg.consumerConfig(l))
		if err != nil {
			return fmt.Errorf("rotanats: declare the consumer of lane %q: %w", l, err)
		}
	}
	var wg sync.WaitGroup
	for i, l := range c.cfg.Lanes {
		wg.Go(func() { c.consume(ctx, l, cons[i]) })
	}
	wg.Wait()
	return nil
}

// consume pulls lane's messages until ctx ends, at most InHand in hand at once.
func (c *Consumer) consume(ctx context.Context, lane dispatch.Lane, cons jetstream.Consumer) {
	slots := make(chan struct{}, c.cfg.InHand)
	var handlers sync.WaitGroup
	defer handlers.Wait()
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
		if err != nil {
			c.cfg.Logger.LogAttrs(run, slog.LevelWarn, "rota: pull failed", slog.String("lane", string(lane)), slog.Any("error", err))
			select {
			case <-ctx.Done():
			case <-time.After(c.cfg.FetchWait):
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
	batch, err := cons.Fetch(n, jetstream.FetchMaxWait(c.cfg.FetchWait))
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
		c.cfg.Logger.LogAttrs(ctx, slog.LevelError, "rota: message terminated", slog.String("subject", msg.Subject()), slog.Any("error", err))
		if err := msg.Term(); err != nil {
			c.cfg.Logger.LogAttrs(ctx, slog.LevelWarn, "rota: terminate failed", slog.String("subject", msg.Subject()), slog.Any("error", err))
		}
		return
	}
	if meta, err := msg.Metadata(); err == nil && meta.NumDelivered > 1 {
		// Its worker died or let it go: the Worker runs it only if its claim still allows.
		c.cfg.Logger.LogAttrs(ctx, slog.LevelInfo, "rota: message redelivered", slog.String("subject", msg.Subject()),
			slog.Uint64("deliveries", meta.NumDelivered), slog.Time("claim_until", item.Claim.Until))
	}
	c.w.Do(ctx, item, c.cfg.Clock.Now())
	if err := msg.Ack(); err != nil {
		// The message comes back after AckWait, its claim ended, and is dropped then.
		c.cfg.Logger.LogAttrs(ctx, slog.LevelWarn, "rota: acknowledge failed", slog.String("subject", msg.Subject()), slog.Any("error", err))
	}
}
