package bridge

import (
	"context"
	"fmt"
	"log/slog"
	"sync"

	"github.com/rotaworks/rota/duework"
	"github.com/rotaworks/rota/tenancy"
)

// starter starts the claims of the items that get a worker together: one
// Index.StartClaims for all of them, then one Watchlist.GetMany for the entries of those
// started and not read yet. One round is in flight at a time; the items that get a worker
// meanwhile go in the next.
type starter struct {
	w       *Worker
	mu      sync.Mutex
	waiting []*job
	busy    bool
}

// start returns once j's claim is started (j.startErr says how that went) and, when it
// was, its watchlist entry read.
func (s *starter) start(j *job) {
	j.ready = make(chan struct{})
	s.mu.Lock()
	s.waiting = append(s.waiting, j)
	begin := !s.busy
	s.busy = true
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
		s.waiting = nil
		if len(js) == 0 {
			s.busy = false
			s.mu.Unlock()
			return
		}
		s.mu.Unlock()
		s.w.startClaims(s.w.kill, js)
		s.w.read(s.w.kill, js)
		for _, j := range js {
			close(j.ready)
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
	errs, err := w.b.Index.StartClaims(ctx, claims)
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

// read reads the watchlist entries of those of jobs that are started, or not yet tried,
// and not read yet, with one Watchlist.GetMany, each under its own tenant. A call that
// fails as a whole is logged once and becomes each of its jobs' read error: they are
// retried unrun.
func (w *Worker) read(ctx context.Context, jobs []*job) {
	var lookups []tenancy.Lookup
	var reading []*job
	for _, j := range jobs {
		if !j.bad && j.startErr == nil && j.read == nil {
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
