package duework

import (
	"context"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/rotaworks/rota/internal/vocab"
	"github.com/rotaworks/rota/tenancy"
)

// Memory's pauses: each user's is a record of its own, made by Pause and dropped once it no
// longer counts, and filed by UserID in Memory.paused.

// pause is a user's stored pause, made by its first Pause and kept while it counts (see
// Index, Pauses): the user's ReadyAt is at least its until while until is after the user's
// LastServed. It is in Memory.paused, a tree ordered by UserID, for as long as it is kept,
// so that Paused costs what it returns plus the ended pauses it passes over.
type pause struct {
	u      *user
	reason string
	kid    [2]*pause
	sec    int64
	nsec   int32
	prio   uint32
}

// counts reports whether p, u's pause, still counts: its until is after u's LastServed.
func (p *pause) counts() bool {
	return cmpTime(p.sec, p.nsec, p.u.servedSec, p.u.servedNsec) > 0
}

// pausedAt reports whether u is paused at now (sec, nsec): it has a pause that counts and
// ends after now.
func (u *user) pausedAt(sec int64, nsec int32) bool {
	p := u.pause
	return p != nil && cmpTime(p.sec, p.nsec, sec, nsec) > 0 && p.counts()
}

// byUserID is Memory.paused's tree.
var byUserID treap[pause, pauseOrder]

// pauseOrder is Memory.paused's: by UserID.
type pauseOrder struct{ plain[pause] }

func (pauseOrder) kids(p *pause) *[2]*pause { return &p.kid }

func (pauseOrder) seek(p *pause, k string) (int, *[2]*pause) {
	return strings.Compare(k, p.u.id), &p.kid
}

func (pauseOrder) sink(at, p *pause) (**pause, bool) {
	if p.prio > at.prio {
		return nil, false
	}
	return side(&at.kid, p.u.id < at.u.id), true
}

func (pauseOrder) toward(at, p *pause, _ bool) (**pause, bool, bool) {
	before := p.u.id < at.u.id
	return side(&at.kid, before), before, false
}

func (pauseOrder) above(a, b *pause) bool { return a.prio > b.prio }

// Pause stores the later of tc's user's pause and until, storing the user first if it is
// new. O(log n).
func (m *Memory) Pause(ctx context.Context, tc tenancy.Context, until time.Time, reason string) error {
	if err := tc.Check(); err != nil {
		return err
	}
	if err := (UserPause{UserID: tc.UserID(), Reason: reason, Until: until}).Validate(); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	sec, nsec := splitTime(until)
	m.mu.Lock()
	defer m.mu.Unlock()
	u := m.user(tc.UserID())
	m.unpause(u, false)
	p := u.pause
	switch {
	case p == nil && cmpTime(sec, nsec, u.servedSec, u.servedNsec) <= 0:
		return nil // it would not count: nothing a read sees changes
	case p == nil:
		p = &pause{u: u, prio: rand.Uint32()}
		u.pause = p
		m.paused = byUserID.insert(m.paused, p)
	case cmpTime(sec, nsec, p.sec, p.nsec) < 0:
		return nil // the stored pause is the later
	}
	p.sec, p.nsec, p.reason = sec, nsec, reason
	m.requeue(u, u.first != nil)
	return nil
}

// Resume ends tc's user's pause, if it has one. O(log n).
func (m *Memory) Resume(ctx context.Context, tc tenancy.Context) error {
	if err := tc.Check(); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if u := m.users[tc.UserID()]; u != nil {
		m.unpause(u, true)
	}
	return nil
}

// unpause drops u's pause when it no longer counts, or whatever it is when all is set, and
// requeues u if that moved its Turn. O(log n).
func (m *Memory) unpause(u *user, all bool) {
	p := u.pause
	if p == nil || !all && p.counts() {
		return
	}
	counted := p.counts()
	m.paused = byUserID.remove(m.paused, p)
	u.pause = nil
	if counted {
		m.requeue(u, u.first != nil)
	}
}

// Paused returns up to limit of the users paused at now whose IDs sort after after, in
// UserID order. It walks Memory.paused from after: O(log n) plus O(1) for each pause it
// returns or passes over because it has ended.
func (m *Memory) Paused(ctx context.Context, now time.Time, after string, limit int) ([]UserPause, error) {
	if after != "" {
		if err := vocab.Name(ErrInvalid, "after", after); err != nil {
			return nil, err
		}
	}
	if err := vocab.Limit(ErrInvalid, "limit", limit); err != nil {
		return nil, err
	}
	sec, nsec, err := m.lockAt(ctx, now)
	if err != nil {
		return nil, err
	}
	defer m.mu.Unlock()
	var out []UserPause
	walkAfter[pause, pauseOrder](m.paused, after, func(p *pause) bool {
		if p.u.pausedAt(sec, nsec) {
			out = append(out, UserPause{UserID: p.u.id, Reason: p.reason, Until: joinTime(p.sec, p.nsec)})
		}
		return len(out) < limit
	})
	return out, nil
}
