package bridge

import (
	"context"
	"fmt"
	"log/slog"
	"sync"

	"github.com/rotaworks/rota/duework"
	"github.com/rotaworks/rota/internal/localstart"
	"github.com/rotaworks/rota/tenancy"
)

// starter starts the claims of the items that get a worker together: one
// Index.StartClaims for all of them, then one Watchlist.GetMany for the entries of those
// started and not read yet. One round is in flight at a time; the items that get a worker
// meanwhile go in the next. A batch handed to the Worker at once (a Runner's cycle) holds
// the next round back while it hands its items to their workers, so that those that get a
// worker at once start in one round; those go in without a goroutine of their own, and
// the round starts each on one once its claim is started. An item that had to wait for
// its worker joins a round from the goroutine that waited, and waits for the round there.
type starter struct {
	w       *Worker
	mu      sync.Mutex
	waiting []*job
	busy    bool
	held    int // holds of the next round: batches handing out items
}

// hold keeps the next round from beginning until a matching release.
func (s *starter) hold() {
	s.mu.Lock()
	s.held++
	s.mu.Unlock()
}

// release ends a hold, and begins the next round when none is left and items wait.
func (s *starter) release() {
	s.mu.Lock()
	s.held--
	begin := s.begins()
	s.mu.Unlock()
	if begin {
		go s.loop()
	}
}

// begins reports whether a round should begin now, and marks the starter busy if so;
// s.mu must be held.
func (s *starter) begins() bool {
	if s.busy || s.held > 0 || len(s.waiting) == 0 {
		return false
	}
	s.busy = true
	return true
}

// enqueue puts j, which holds a worker, in the next round, which a batch handing out items
// holds: the round starts j on a goroutine of its own (Worker.begun).
func (s *starter) enqueue(j *job) {
	s.mu.Lock()
	s.waiting = append(s.waiting, j)
	s.mu.Unlock()
}

// start returns once j's claim is started (j.startErr says how that went) and, when it
// was, its watchlist entry read.
func (s *starter) start(j *job) {
	j.ready = make(chan struct{})
	s.mu.Lock()
	s.waiting = append(s.waiting, j)
	begin := s.begins()
	s.mu.Unlock()
	if begin {
		go s.loop()
	}
	<-j.ready
}

func (s *starter) loop() {
	for {
		s.mu.Lock()
		js := s.waiting
		if len(js) == 0 || s.held > 0 {
			s.busy = false
			s.mu.Unlock()
			return
		}
		s.waiting = nil
		s.mu.Unlock()
		s.w.startClaims(s.w.kill, js)
		for _, j := range js {
			if j.reading != nil {
				<-j.reading
			}
		}
		s.w.read(s.w.kill, js, false)
		for _, j := range js {
			if j.ready != nil {
				close(j.ready)
			} else {
				go s.w.begun(j)
			}
		}
	}
}

// startClaims starts the claims of jobs with one Index.StartClaims and sets each job's
// startErr. A call that fails as a whole is logged once and becomes each job's startErr.
func (w *Worker) startClaims(ctx context.Context, jobs []*job) {
	claims := make([]duework.Unclaim, len(jobs))
	for k, j := range jobs {
		claims[k] = duework.Unclaim{Tenant: j.tc, Claim: j.item.Claim}
	}
	errs, err := w.b.Index.StartClaims(localstart.With(ctx, w.local), claims)
	if err == nil && len(errs) != len(claims) {
		err = fmt.Errorf("Index.StartClaims returned %d outcomes for %d claims", len(errs), len(claims))
	}
	if err != nil {
		w.callFailed(ctx, "rota: claim start failed", len(claims), err)
	}
	for k, j := range jobs {
		j.startErr = err
		if err == nil {
			j.startErr = errs[k]
		}
	}
}

// read reads the watchlist entries of those of jobs that are not read yet — all of them
// with all set, else only those started — with one Watchlist.GetMany, each under its own
// tenant. A call that fails as a whole is logged once and becomes each of its jobs' read
// error: they are retried unrun. A batch's read (all) runs beside the starts, so it does
// not look at their outcomes.
func (w *Worker) read(ctx context.Context, jobs []*job, all bool) {
	var lookups []tenancy.Lookup
	var reading []*job
	for _, j := range jobs {
		if !j.bad && j.read == nil && (all || j.startErr == nil) {
			lookups = append(lookups, tenancy.Lookup{Tenant: j.tc, Slug: j.item.Claim.Entry.WorkKey})
			reading = append(reading, j)
		}
	}
	if len(lookups) == 0 {
		return
	}
	es, errs, err := w.b.Watchlist.GetMany(ctx, lookups)
	if err == nil && (len(es) != len(lookups) || len(errs) != len(lookups)) {
		err = fmt.Errorf("Watchlist.GetMany returned %d entries and %d outcomes for %d lookups", len(es), len(errs), len(lookups))
	}
	if err != nil {
		w.callFailed(ctx, "rota: watchlist read failed", len(lookups), err)
	}
	for k, j := range reading {
		if err != nil {
			j.read = &watchRead{err: err}
			continue
		}
		e, l := es[k], lookups[k]
		if errs[k] == nil && (e.UserID != l.Tenant.UserID() || e.Slug != l.Slug) {
			// Never run one tenant's pipeline with another's entry.
			j.read = &watchRead{err: fmt.Errorf("Watchlist.GetMany answered lookup %d with user %q entry %q", k, e.UserID, e.Slug)}
			continue
		}
		j.read = &watchRead{entry: e, err: errs[k]}
	}
}

// callFailed logs a call that failed as a whole for items items.
func (w *Worker) callFailed(ctx context.Context, msg string, items int, err error) {
	w.cfg.Logger.LogAttrs(context.WithoutCancel(ctx), slog.LevelWarn, msg, slog.Int("items", items), slog.Any("error", err))
}
