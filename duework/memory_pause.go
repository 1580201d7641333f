package duework

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/rotaworks/rota/internal/vocab"
	"github.com/rotaworks/rota/tenancy"
)

// Memory's pauses: each user's is a record of its own, made by Pause and dropped once it no
// longer counts, and filed by UserID in Memory.paused.

// pauseTree orders the pauses in Memory.paused by UserID.
var pauseTree = treap[pause]{
	cmp:  func(a, b *pause) int { return strings.Compare(a.u.id, b.u.id) },
	kids: func(p *pause) *[2]*pause { return &p.kid },
	prio: func(p *pause) uint32 { return p.prio },
}

// validPause checks Pause's arguments: tc valid, until a storable time other than the zero
// time, reason a valid name.
func validPause(tc tenancy.Context, until time.Time, reason string) error {
	if err := tc.Check(); err != nil {
		return err
	}
	if until.IsZero() {
		return fmt.Errorf("%w: until must not be the zero time", ErrInvalid)
	}
	if err := validTime("until", until); err != nil {
		return err
	}
	return vocab.Name(ErrInvalid, "reason", reason)
}

// Pause stores the later of tc's user's pause and until, storing the user first if it is
// new. O(log n).
func (m *Memory) Pause(ctx context.Context, tc tenancy.Context, until time.Time, reason string) error {
	if err := validPause(tc, until, reason); err != nil {
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
		m.paused = pauseTree.insert(m.paused, p)
	case cmpTime(sec, nsec, p.sec, p.nsec) < 0:
		return nil // the stored pause is the later
	}
	p.sec, p.nsec, p.reason = sec, nsec, reason
	m.requeue(u, u.entries != nil)
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
	m.paused = pauseTree.remove(m.paused, p)
	u.pause = nil
	if counted {
		m.requeue(u, u.entries != nil)
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
	pausesAfter(m.paused, after, func(p *pause) bool {
		if p.u.pausedAt(sec, nsec) {
			out = append(out, UserPause{UserID: p.u.id, Reason: p.reason, Until: joinTime(p.sec, p.nsec)})
		}
		return len(out) < limit
	})
	return out, nil
}

// pausesAfter calls f with the pauses of the tree at root whose UserID sorts after after,
// in UserID order, until f returns false; it reports whether f asked for more.
func pausesAfter(root *pause, after string, f func(*pause) bool) bool {
	if root == nil {
		return true
	}
	if root.u.id > after {
		if !pausesAfter(root.kid[0], after, f) || !f(root) {
			return false
		}
	}
	return pausesAfter(root.kid[1], after, f)
}
