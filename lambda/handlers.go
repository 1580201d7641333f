package rotalambda

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/rotaworks/rota/bridge"
)

// Reserve is the most a handler keeps for itself before its invocation's deadline: its
// work — a Feed round's calls, a cycle's dispatch, each item's pipeline — ends a quarter
// of the time left or Reserve before the deadline, whichever is less, so that
// completions and hand-backs are written while the function still runs.
const Reserve = 3 * time.Second

// withReserve returns ctx with its deadline moved Reserve (or a quarter of the time
// left) earlier; a ctx without a deadline is left as it is.
func withReserve(ctx context.Context) (context.Context, context.CancelFunc) {
	dl, ok := ctx.Deadline()
	if !ok {
		return context.WithCancel(ctx)
	}
	return context.WithDeadline(ctx, dl.Add(-min(Reserve, time.Until(dl)/4)))
}

// DispatchHandler returns the handler of a dispatching function, invoked on a schedule
// (EventBridge Scheduler, every minute): each invocation runs one Feed round at the
// time of the call — asks the Sink for room, dispatches at most that and sends each lane's
// items — and returns the round's error (bridge.Feeder.Feed). The round's calls end
// before the invocation's deadline, less the handler's reserve (see Reserve), which is
// left for handing back what could not be sent. f is shared by every invocation the
// function's instance serves; two overlapping invocations are safe, since concurrent
// dispatchers read disjoint users. The event is not read.
func DispatchHandler(f *bridge.Feeder) func(context.Context, events.EventBridgeEvent) error {
	if f == nil {
		panic("rotalambda: DispatchHandler: nil Feeder")
	}
	return func(ctx context.Context, _ events.EventBridgeEvent) error {
		ctx, cancel := withReserve(ctx)
		defer cancel()
		_, err := f.Feed(ctx, time.Now())
		return err
	}
}

// RunHandler returns the handler of a function that dispatches and runs in one, for a
// small service: each invocation runs one Runner.Cycle at the time of the call — one
// dispatch, every item on the Runner's workers, their completions written — and returns
// once its items have ended. It returns an error when the cycle could not dispatch or
// could not write completions; an item's own failure (a pipeline error, say) is in the
// Runner's log and its Observer's report, not in the invocation's error, so that one
// failing source does not fail every invocation. The cycle stops handing out items
// before the invocation's deadline, less the reserve (see Reserve); the items' claims
// bound their runs, so give the function a timeout above the Dispatcher's ClaimFor. The
// event is not read.
func RunHandler(r *bridge.Runner) func(context.Context, events.EventBridgeEvent) error {
	if r == nil {
		panic("rotalambda: RunHandler: nil Runner")
	}
	return func(ctx context.Context, _ events.EventBridgeEvent) error {
		ctx, cancel := withReserve(ctx)
		defer cancel()
		rep, _ := r.Cycle(ctx, time.Now())
		return errors.Join(append([]error{rep.DispatchErr}, rep.FlushErrs...)...)
	}
}

// WorkerHandler returns the handler of a worker function, invoked by an SQS event source
// mapping on a lane's queue (the messages rotasqs.Sink sends): it runs each message's item
// through w, all of them at once on w's slots, and returns the partial-batch response that
// names only the messages whose outcome w could not write, for the event source mapping to
// deliver again (turn on ReportBatchItemFailures).
//
// Every item's pipeline context ends before the invocation's deadline, less the reserve
// (see Reserve), or its claim's margin, whichever comes first; an item still waiting for a
// slot then is handed back unstarted. A message that does not decode, an item whose claim
// has ended, a late one, a forged one and a copy of an item another copy started (the
// index's claim start decides, not the receive count) are done with: logged (the first two
// through slog.Default, the others by w), not run, and not named in the response, since
// delivering them again would run nothing. A message named in the response comes back after the queue's visibility
// timeout; its claim, if still current, runs it then unless a copy started.
func WorkerHandler(w *bridge.Worker) func(context.Context, events.SQSEvent) (events.SQSEventResponse, error) {
	if w == nil {
		panic("rotalambda: WorkerHandler: nil Worker")
	}
	logger := slog.Default()
	return func(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
		work, cancel := withReserve(ctx)
		defer cancel()
		retry := make([]bool, len(ev.Records))
		var wg sync.WaitGroup
		for i, m := range ev.Records {
			wg.Go(func() { retry[i] = handle(work, w, logger, m) })
		}
		wg.Wait()
		var resp events.SQSEventResponse
		for i, m := range ev.Records {
			if retry[i] {
				resp.BatchItemFailures = append(resp.BatchItemFailures, events.SQSBatchItemFailure{ItemIdentifier: m.MessageId})
			}
		}
		return resp, nil
	}
}

// handle runs m's item through w under ctx and reports whether m should be delivered
// again: its outcome could not be written.
func handle(ctx context.Context, w *bridge.Worker, logger *slog.Logger, m events.SQSMessage) (retry bool) {
	lctx := context.WithoutCancel(ctx)
	msg := []slog.Attr{slog.String("message_id", m.MessageId), slog.String("queue", m.EventSourceARN)}
	item, err := bridge.DecodeItem([]byte(m.Body))
	if err != nil {
		logger.LogAttrs(lctx, slog.LevelWarn, "rota: message dropped", append(msg, slog.String("reason", "garbled"), slog.Any("error", err))...)
		return false
	}
	now := time.Now()
	if !now.Before(item.Claim.Until) {
		logger.LogAttrs(lctx, slog.LevelInfo, "rota: message dropped", append(msg, slog.String("reason", "claim ended"),
			slog.String("user_id", item.Claim.Entry.UserID), slog.String("work_key", item.Claim.Entry.WorkKey), slog.Time("claim_until", item.Claim.Until))...)
		return false
	}
	rep := w.Do(ctx, item, now) // it logs the items it does not run
	switch rep.Status {
	case bridge.StatusHit, bridge.StatusMiss, bridge.StatusError, bridge.StatusRemoved, bridge.StatusReleased:
		return !rep.Written
	}
	return false // late, lost, or a copy another copy started: delivering it again runs nothing
}
