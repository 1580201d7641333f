package rotanats

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/rotaworks/rota/bridge"
	"github.com/rotaworks/rota/dispatch"
	"github.com/rotaworks/rota/duework"
)

var _ bridge.Sink = (*Sink)(nil)

// Sink hands a Dispatcher's items to JetStream, one subject per lane, and says how many
// more each lane can take: a bridge.Sink for bridge.NewFeeder. Most dispatcher processes
// make one Sink and give it to a Feeder. A Sink is safe for concurrent use.
type Sink struct {
	js       jetstream.JetStream
	q        queue
	lanes    map[dispatch.Lane]bool
	subjects map[string]bool // the lanes' subjects

	mu      sync.Mutex
	stream  jetstream.Stream // nil until declared
	strayAt time.Time        // when strays were last searched for; zero before the first search
}

// NewSink returns a Sink that publishes through js as cfg describes. dc is the
// dispatch.Config the dispatcher's Dispatcher is built with, as for NewConsumer: the
// lanes and ClaimFor are dc's, and its other fields are not used. It refuses a nil js, a
// Config that cannot work and a dc NewConsumer refuses, wrapping ErrInvalidConfig. It does
// no I/O: the stream is created, when missing, by the first Room or Send that reaches the
// server, and again after a call finds it gone.
func NewSink(js jetstream.JetStream, dc dispatch.Config, cfg Config) (*Sink, error) {
	err := errors.Join(cfg.validate(), checkDispatch(dc))
	if js == nil {
		err = errors.Join(err, fmt.Errorf("%w: NewSink's js must not be nil", ErrInvalidConfig))
	}
	if err != nil {
		return nil, err
	}
	s := &Sink{js: js, q: newQueue(cfg, dc), lanes: map[dispatch.Lane]bool{}, subjects: map[string]bool{}}
	for _, l := range s.q.lanes {
		s.lanes[l] = true
		s.subjects[s.q.subject(l)] = true
	}
	return s, nil
}

// declared returns the stream, creating or updating it the first time.
func (s *Sink) declared(ctx context.Context) (jetstream.Stream, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stream != nil {
		return s.stream, nil
	}
	st, err := s.js.CreateOrUpdateStream(ctx, s.q.streamConfig())
	if createdMeanwhile(err) {
		st, err = s.js.CreateOrUpdateStream(ctx, s.q.streamConfig()) // it exists now: an update
	}
	if err != nil {
		return nil, fmt.Errorf("rotanats: declare stream %q: %w", s.q.Stream, err)
	}
	s.stream = st
	return st, nil
}

// forget drops the stream's handle when err says the stream is gone, so that the next
// call declares it again.
func (s *Sink) forget(err error) {
	if errors.Is(err, jetstream.ErrStreamNotFound) || errors.Is(err, jetstream.ErrNoStreamResponse) {
		s.mu.Lock()
		s.stream = nil
		s.mu.Unlock()
	}
}

// Room returns how many items each lane can take now, and their sum as Total. For each
// lane it first drops from the stream the lane's oldest messages whose claims have ended
// or end within the margin, min(bridge.DefaultClaimMargin, ClaimFor/4) — the margin of a
// Runner with the default ClaimMargin — since no worker would run them, their entries are
// due again, and a newer claim of the same entry must not sit in the queue beside them.
// Then it gives the lane its capacity less the messages it holds unacknowledged (pending
// delivery, or delivered and not yet acknowledged: the consumer's NumPending plus
// NumAckPending, which count every dispatcher's sends). The capacity is MaxAckPending,
// as the lane's consumer holds it, times (ClaimFor − margin) / RunTime, or times 1 for a
// zero RunTime: what the lane's in-flight slots can start before the claims end. A lane
// has no room while no worker takes its items: before any worker has declared its
// consumer, and while no worker is pulling from it (NumWaiting) and none holds a message
// of it.
//
// The workers' own margin (bridge.WorkerConfig.ClaimMargin) may be longer than Room's: a
// message whose claim ends between the two is still counted here, and the worker that
// receives it hands its claim back unrun. Such a message costs room until then, never an
// item; a shorter worker margin only means Room drops a message a worker would still
// have started, whose entry is dispatched again once its claim ends.
//
// So a Feeder that calls Room before each dispatch keeps each lane's queue within its
// capacity, stops claiming when the workers stop, and never queues an entry twice. With
// several dispatchers feeding one stream the bound is their number times the capacity,
// and their claims interleave: a stale message behind a fresher one of another
// dispatcher is dropped by the worker that receives it instead. They must share their
// lanes, since a Sink purges the subjects of lanes its Dispatcher does not have.
//
// At most once per StrayCheckEvery on the Sink's Clock, starting with the first call,
// Room also looks for messages on subjects under the prefix that are not a lane's — a
// publish by hand, a lane since removed — purges them and logs a Warn line for each such
// subject, naming it and counting its messages: no worker consumes them, and an item
// among them stays claimed only until its claim ends.
//
// Room costs one consumer read per lane, one message read for each lane that holds
// messages and one more read and one delete per stale message, and one stream read per
// search for strays. A lane whose reads fail has no room; the error names it, joined
// with the others'. A failed search for strays is a Warn line, and no error.
func (s *Sink) Room(ctx context.Context) (dispatch.Take, error) {
	t := dispatch.Take{PerLane: make(map[dispatch.Lane]int, len(s.q.lanes))}
	st, err := s.declared(ctx)
	if err != nil {
		for _, l := range s.q.lanes {
			t.PerLane[l] = 0
		}
		return t, err
	}
	now := s.q.Clock.Now()
	s.purgeStrays(ctx, st, now)
	var errs []error
	for _, l := range s.q.lanes {
		n, err := s.laneRoom(ctx, st, l, now)
		if err != nil {
			errs = append(errs, fmt.Errorf("rotanats: room of lane %q: %w", l, err))
		}
		t.PerLane[l] = n
		t.Total += n
	}
	err = errors.Join(errs...)
	s.forget(err)
	return t, err
}

// purgeStrays purges the messages of st on subjects under the prefix that are no lane's,
// with a Warn line per subject, unless it last looked less than StrayCheckEvery before
// now.
func (s *Sink) purgeStrays(ctx context.Context, st jetstream.Stream, now time.Time) {
	s.mu.Lock()
	due := s.strayAt.IsZero() || now.Sub(s.strayAt) >= StrayCheckEvery
	if due {
		s.strayAt = now
	}
	s.mu.Unlock()
	if !due {
		return
	}
	log := s.q.Logger
	info, err := st.Info(ctx, jetstream.WithSubjectFilter(s.q.Subject+".*"))
	if err != nil {
		log.LogAttrs(ctx, slog.LevelWarn, "rota: stray subject search failed", slog.String("stream", s.q.Stream), slog.Any("error", err))
		return
	}
	for _, subj := range slices.Sorted(maps.Keys(info.State.Subjects)) {
		if s.subjects[subj] {
			continue
		}
		n := info.State.Subjects[subj]
		if err := st.Purge(ctx, jetstream.WithPurgeSubject(subj)); err != nil {
			log.LogAttrs(ctx, slog.LevelWarn, "rota: stray messages not purged", slog.String("subject", subj),
				slog.Uint64("messages", n), slog.Any("error", err))
			continue
		}
		log.LogAttrs(ctx, slog.LevelWarn, "rota: stray messages purged, their subject is no lane's", slog.String("subject", subj),
			slog.Uint64("messages", n))
	}
}

// laneRoom is Room for one lane.
func (s *Sink) laneRoom(ctx context.Context, st jetstream.Stream, lane dispatch.Lane, now time.Time) (int, error) {
	info, err := s.consumerInfo(ctx, st, lane)
	if info == nil || err != nil {
		return 0, err
	}
	if info.NumPending+uint64(info.NumAckPending) > 0 {
		dropped, err := s.dropStale(ctx, st, lane, now)
		if err != nil {
			return 0, err
		}
		if dropped > 0 {
			if info, err = s.consumerInfo(ctx, st, lane); info == nil || err != nil {
				return 0, err
			}
		}
	}
	if info.NumWaiting == 0 && info.NumAckPending == 0 {
		return 0, nil // no worker takes the lane's items
	}
	unacked := int(min(info.NumPending, uint64(duework.MaxLimit))) + info.NumAckPending
	return max(0, s.q.capacity(info.Config.MaxAckPending)-unacked), nil
}

// consumerInfo reads lane's consumer; nil, without an error, when none is declared.
func (s *Sink) consumerInfo(ctx context.Context, st jetstream.Stream, lane dispatch.Lane) (*jetstream.ConsumerInfo, error) {
	cons, err := st.Consumer(ctx, LaneToken(lane))
	if errors.Is(err, jetstream.ErrConsumerNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read its consumer: %w", err)
	}
	info := cons.CachedInfo()
	if info.Config.MaxAckPending <= 0 {
		return nil, fmt.Errorf("its consumer %q has MaxAckPending %d: it must be positive", info.Name, info.Config.MaxAckPending)
	}
	return info, nil
}

// maxDropScan is the most messages one Room reads of a lane looking for stale ones.
const maxDropScan = 4 * MaxSendBatch

// dropStale deletes lane's oldest messages while their claims end within the margin of
// now, and returns how many it deleted. It skips a message that does not decode: a
// worker terminates it.
func (s *Sink) dropStale(ctx context.Context, st jetstream.Stream, lane dispatch.Lane, now time.Time) (int, error) {
	subject := s.q.subject(lane)
	dropped := 0
	for seq, scanned := uint64(1), 0; scanned < maxDropScan; scanned++ {
		raw, err := st.GetMsg(ctx, seq, jetstream.WithGetMsgSubject(subject))
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			break
		}
		if err != nil {
			return dropped, fmt.Errorf("read its oldest messages: %w", err)
		}
		seq = raw.Sequence + 1
		item, err := bridge.DecodeItem(raw.Data)
		if err != nil {
			continue
		}
		if now.Before(item.Claim.Until.Add(-s.q.margin())) {
			break
		}
		if err := st.DeleteMsg(ctx, raw.Sequence); err != nil && !errors.Is(err, jetstream.ErrMsgNotFound) {
			return dropped, fmt.Errorf("drop stale message %d: %w", raw.Sequence, err)
		}
		dropped++
	}
	if dropped > 0 {
		s.q.Logger.LogAttrs(ctx, slog.LevelInfo, "rota: stale items dropped", slog.String("lane", string(lane)), slog.Int("items", dropped))
	}
	return dropped, nil
}

// Send publishes items to lane's subject, each encoded with bridge.EncodeItem and
// carrying a Nats-Msg-Id made of its user, work key and claim token, so a publish retried
// within ClaimFor is stored once. It waits for the server to store each one, MaxSendBatch
// at a time, and publishes once more one that failed.
//
// It returns an error only when it stored none of the items — an unknown lane
// (ErrUnknownLane), the stream unreachable — so that the Feeder hands them all back.
// When only some fail (a publish that failed twice, an item of another lane or one
// EncodeItem refuses), Send logs them in one Warn line and returns nil: handing back a
// claim whose sibling may already be running elsewhere is not safe, while an item left
// unsent stays claimed until its claim ends and is then dispatched again.
func (s *Sink) Send(ctx context.Context, lane dispatch.Lane, items []dispatch.Item) error {
	if !s.lanes[lane] {
		return fmt.Errorf("rotanats: send %d items: lane %q: %w", len(items), lane, ErrUnknownLane)
	}
	if len(items) == 0 {
		return nil
	}
	if _, err := s.declared(ctx); err != nil {
		return err
	}
	var errs []error
	stored := 0
	for rest := items; len(rest) > 0; {
		n := min(len(rest), MaxSendBatch)
		k, batchErrs := s.sendBatch(ctx, lane, rest[:n])
		stored += k
		errs = append(errs, batchErrs...)
		rest = rest[n:]
	}
	err := errors.Join(errs...)
	s.forget(err)
	if err == nil || stored == 0 {
		return err
	}
	s.q.Logger.LogAttrs(ctx, slog.LevelWarn, "rota: items left claimed unsent", slog.String("lane", string(lane)),
		slog.Int("items", len(items)-stored), slog.Any("error", err))
	return nil
}

// sendBatch publishes items asynchronously, waits for each acknowledgement and returns
// how many were stored and why each other one was not.
func (s *Sink) sendBatch(ctx context.Context, lane dispatch.Lane, items []dispatch.Item) (stored int, errs []error) {
	subject := s.q.subject(lane)
	msgs := make([]*nats.Msg, len(items))
	futs := make([]jetstream.PubAckFuture, len(items))
	for i, it := range items {
		if it.Lane != lane {
			errs = append(errs, fmt.Errorf("rotanats: send %s: the item is of lane %q, not %q", name(it), it.Lane, lane))
			continue
		}
		data, err := bridge.EncodeItem(it)
		if err != nil {
			errs = append(errs, fmt.Errorf("rotanats: send %s: %w", name(it), err))
			continue
		}
		msgs[i] = &nats.Msg{Subject: subject, Data: data, Header: nats.Header{}}
		futs[i], err = s.js.PublishMsgAsync(msgs[i], jetstream.WithMsgID(msgID(it)))
		if err != nil {
			futs[i] = nil // published again below
		}
	}
	for i, f := range futs {
		if msgs[i] == nil {
			continue
		}
		var err error
		if f != nil {
			select {
			case <-f.Ok():
				stored++
				continue
			case err = <-f.Err():
			case <-ctx.Done():
				err = context.Cause(ctx)
			}
		}
		if ctx.Err() == nil {
			_, err = s.js.PublishMsg(ctx, msgs[i], jetstream.WithMsgID(msgID(items[i])))
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("rotanats: send %s to %q: %w", name(items[i]), subject, err))
			continue
		}
		stored++
	}
	return stored, errs
}

// name names an item in errors and logs.
func name(it dispatch.Item) string {
	return fmt.Sprintf("user %q entry %q (claim %d)", it.Claim.Entry.UserID, it.Claim.Entry.WorkKey, it.Claim.Token)
}
