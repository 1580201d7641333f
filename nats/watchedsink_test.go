package rotanats_test

import (
	"context"
	"sync"

	"github.com/rotaworks/rota/bridge"
	"github.com/rotaworks/rota/dispatch"
)

// watchedSink records what a sink reported and was sent, so a test can check that the
// queue stayed within the room reported.
type watchedSink struct {
	bridge.Sink
	mu       sync.Mutex
	last     dispatch.Take         // the last room reported
	sent     map[dispatch.Lane]int // sent since the last report
	overSent []string              // a lane sent more than its room
	total    int                   // items sent in all
}

// sentInAll returns how many items were sent in all.
func (w *watchedSink) sentInAll() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.total
}

func (w *watchedSink) Room(ctx context.Context) (dispatch.Take, error) {
	t, err := w.Sink.Room(ctx)
	w.mu.Lock()
	defer w.mu.Unlock()
	w.last, w.sent = t, map[dispatch.Lane]int{}
	return t, err
}

func (w *watchedSink) Send(ctx context.Context, lane dispatch.Lane, items []dispatch.Item) error {
	w.mu.Lock()
	w.sent[lane] += len(items)
	w.total += len(items)
	if n, ok := w.last.PerLane[lane]; !ok || w.sent[lane] > n {
		w.overSent = append(w.overSent, string(lane))
	}
	w.mu.Unlock()
	return w.Sink.Send(ctx, lane, items)
}
