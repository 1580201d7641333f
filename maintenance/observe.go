package maintenance

import (
	"context"
	"log/slog"
	"time"
)

// Observer is told about every poll of a Scheduler whose Config.Observer it is: a metrics
// exporter (the rota/otel module has one), a test's recorder, a pager.
//
// ObservePoll is called once per Poll — Run's polls included, failed polls too — after
// the poll released the scheduler's lock, from the goroutine that polled; polls from
// several goroutines report from each, so an Observer must be safe for concurrent use. It
// must not modify the report's slices and must copy what it keeps. It should return
// quickly: Run polls from its loop.
type Observer interface {
	ObservePoll(PollReport)
}

// PollReport is what one poll reports: the PollResult — winner, second pass, deferrals
// with their Reasons, the Gauge — with the poll's error, and whether the gauge turned
// PostureDegraded at it.
type PollReport struct {
	// Now is the poll's now.
	Now time.Time
	// Result is what Poll returned.
	Result PollResult
	// Err is Poll's error.
	Err error
	// TurnedDegraded is true when the gauge reads PostureDegraded and the last gauge of a
	// known posture this scheduler reported did not (or there was none: a stall found in
	// the durable state at start-up is reported too). A gauge whose posture is
	// PostureUnknown — the state could not be read — neither starts nor ends a stall.
	TurnedDegraded bool
	// Recovered is true when the gauge reads PostureHealthy or PostureDisabled and the
	// last gauge of a known posture this scheduler reported read PostureDegraded.
	Recovered bool
}

// heavyWinner returns the name of the heavy task that won the lease at the poll, "" if
// none did.
func heavyWinner(r PollResult) string {
	if w := r.Winner; w != nil && w.Task.Class == Heavy {
		return w.Task.Name
	}
	return ""
}

// offLeaseCount returns how many off-lease tasks the poll's second pass dispatched.
func offLeaseCount(r PollResult) int {
	n := len(r.AlsoDispatched)
	if w := r.Winner; w != nil && w.Task.Class == OffLease {
		n++
	}
	return n
}

// postureSeen is the latest known posture a poll reported, and its instant.
type postureSeen struct {
	posture Posture
	at      time.Time
	known   bool
}

// transition records g and returns whether it turned Degraded or recovered. A gauge older
// than the latest recorded one (concurrent polls) changes nothing.
func (p *postureSeen) transition(g Gauge) (degraded, recovered bool) {
	if g.Posture == PostureUnknown || (p.known && g.At.Before(p.at)) {
		return false, false
	}
	was := p.known && p.posture == PostureDegraded
	*p = postureSeen{posture: g.Posture, at: g.At, known: true}
	return g.Posture == PostureDegraded && !was, g.Posture != PostureDegraded && was
}

// report logs a poll and tells the Observer.
func (s *Scheduler) report(now time.Time, res PollResult, err error) {
	s.obsMu.Lock()
	degraded, recovered := s.seen.transition(res.Gauge)
	s.obsMu.Unlock()
	rep := PollReport{Now: now, Result: res, Err: err, TurnedDegraded: degraded, Recovered: recovered}
	s.log(rep)
	if s.cfg.Observer != nil {
		s.cfg.Observer.ObservePoll(rep)
	}
}

// log writes the poll's line — Info, or Error with the error — and, on a transition,
// its Warn or Info line.
func (s *Scheduler) log(rep PollReport) {
	ctx := context.Background()
	log := s.cfg.Logger
	g := rep.Result.Gauge
	if rep.TurnedDegraded {
		attrs := []slog.Attr{slog.Duration("degrade_after", s.cfg.DegradeAfter), slog.Int("waiters", len(g.Waiters)), slog.Int("chain_depth", g.ChainDepth)}
		if len(g.Waiters) > 0 {
			w := g.Waiters[0]
			attrs = append(attrs, slog.String("task", w.Task), slog.Duration("wait", w.Wait),
				slog.String("reason", string(w.Reason)), slog.String("blocker", w.Blocker))
		}
		attrs = append(attrs, slog.String("holder", g.Holder), slog.String("holder_task", g.HolderTask), slog.Duration("held_for", g.HeldFor))
		log.LogAttrs(ctx, slog.LevelWarn, "maintenance: degraded: a task has waited longer than DegradeAfter", attrs...)
	}
	if rep.Recovered {
		log.LogAttrs(ctx, slog.LevelInfo, "maintenance: recovered", slog.String("posture", g.Posture.String()))
	}
	level := slog.LevelInfo
	if rep.Err != nil {
		level = slog.LevelError
	}
	if !log.Enabled(ctx, level) {
		return
	}
	winner := ""
	if rep.Result.Winner != nil {
		winner = rep.Result.Winner.Task.Name
	}
	attrs := []slog.Attr{
		slog.Time("now", rep.Now),
		slog.String("winner", winner),
		slog.String("heavy", heavyWinner(rep.Result)),
		slog.Int("second_pass", offLeaseCount(rep.Result)),
		slog.Int("deferred", len(rep.Result.Deferred)),
		slog.String("posture", g.Posture.String()),
		slog.String("holder", g.Holder),
		slog.Duration("held_for", g.HeldFor),
		slog.Int("waiters", len(g.Waiters)),
		slog.Duration("longest_wait", g.longestWait()),
		slog.Int("chain_depth", g.ChainDepth),
	}
	if rep.Err != nil {
		attrs = append(attrs, slog.Any("error", rep.Err))
	}
	log.LogAttrs(ctx, level, "maintenance: poll", attrs...)
}
