package duework

import (
	"context"
	"slices"
	"strings"
	"time"

	"github.com/rotaworks/rota/internal/reuse"
	"github.com/rotaworks/rota/internal/vocab"
)

// The dispatcher's cross-tenant calls of Memory.

func init() {
	reuse.AppendReady = (*Memory).appendReady
	reuse.AppendClaim = (*Memory).appendClaim
}

// claimed is an entry with its user.
type claimed struct {
	u *user
	n *node
}

// pick is one head of a Ready being built: its user, the end of its nodes in Memory.read,
// whether it has more visible entries, and its in-flight count.
type pick struct {
	u        *user
	end      int
	more     bool
	inFlight int
}

// maxScratch is the most heads and entries whose working space Ready keeps between calls.
const maxScratch = 4096

// Ready returns the next users of q.Group that are ready and not held, and holds them. It
// walks the group's queue from the front: O(log n), then O(1) for each user it reads or
// passes over because it is held, plus O(q.PerUser · log n) for each user's entries. It
// allocates its result only: two allocations.
func (m *Memory) Ready(ctx context.Context, q ReadyQuery) (ReadyPage, error) {
	return m.appendReady(ctx, nil, nil, q)
}

// appendReady is Ready, appending the page's heads to *heads and their Due entries to *due
// when both are not nil (see internal/reuse.AppendReady): it allocates nothing when they
// have room for the page.
func (m *Memory) appendReady(ctx context.Context, heads *[]Head, due *[]Entry, q ReadyQuery) (ReadyPage, error) {
	if err := q.Validate(); err != nil {
		return ReadyPage{}, err
	}
	if err := ctx.Err(); err != nil {
		return ReadyPage{}, err
	}
	sec, nsec := splitTime(q.Now)
	m.mu.Lock()
	defer m.mu.Unlock()

	var page ReadyPage
	prev := len(m.read)
	picks, found := m.picks[:0], m.read[:0]
	c := &m.queue
	c.start(m.groups[q.Group])
	for u := c.next(); u != nil; u = c.next() {
		ts, tn := u.turnSec, u.turnNsec
		if cmpTime(ts, tn, sec, nsec) > 0 {
			break
		}
		if u.heldAt(sec, nsec) {
			continue
		}
		if len(picks) == q.Users {
			page.Next = joinTime(ts, tn)
			break
		}
		limit, inFlight := u.cap(sec, nsec, q.PerUser)
		var more bool
		found, more = m.appendVisible(found, u, sec, nsec, limit)
		picks = append(picks, pick{u: u, end: len(found), more: more, inFlight: inFlight})
	}
	c.start(nil)
	if len(picks) > 0 {
		page.Heads = m.heads(picks, found, q, heads, due)
	}
	clear(picks)
	m.picks = picks[:0]
	if cap(picks) > maxScratch {
		m.picks = nil
	}
	// found stays as m.read for the Claim that usually follows. When it is shorter than the
	// last read, that read's tail is cleared so that it keeps no node alive; a read of more
	// than maxScratch entries is let go.
	if len(found) < prev {
		clear(found[len(found):prev])
	}
	m.read, m.readAt, m.readDrops = found, 0, m.drops
	if len(found) > maxScratch {
		m.read = nil
	}
	return page, nil
}

// readAhead is how many of the last Ready's entries Claim looks through for a key before
// it walks down the keys tree: the dispatcher skips few of what it read.
const readAhead = 8

// claimable returns the entry k names and its user, or nils: from the last Ready's result
// when it is among the next readAhead entries there (users are never deleted, so the user
// it holds is the one m.users holds), else by a walk down the user's keys tree. O(log n).
func (m *Memory) claimable(k Key) (*user, *node) {
	if m.readDrops == m.drops {
		for i := m.readAt; i < len(m.read) && i < m.readAt+readAhead; i++ {
			if r := m.read[i]; r.u.id == k.UserID && r.n.workKey == k.WorkKey {
				m.readAt = i + 1
				return r.u, r.n
			}
		}
	}
	u := m.users[k.UserID]
	if u == nil {
		return nil, nil
	}
	return u, u.lookup(k.WorkKey)
}

// heads copies the picked users and their nodes into Ready's result and holds the users:
// appended to *into and *due, or in two allocations when they are nil. Each Due is capped
// at its length, so a caller appending to one reallocates it.
func (m *Memory) heads(picks []pick, found []claimed, q ReadyQuery, into *[]Head, due *[]Entry) []Head {
	var heads []Head
	var all []Entry
	if into == nil {
		heads, all = make([]Head, len(picks)), make([]Entry, len(found))
	} else {
		heads, *into = grow(*into, len(picks))
		all, *due = grow(*due, len(found))
	}
	hsec, hnsec := splitTime(q.Now.Add(q.Hold))
	start := 0
	for i, p := range picks {
		for j := start; j < p.end; j++ {
			all[j] = found[j].n.entry(p.u)
		}
		ts, tn := p.u.turnSec, p.u.turnNsec
		heads[i] = Head{
			UserID:     p.u.id,
			LastServed: joinTime(p.u.servedSec, p.u.servedNsec),
			Turn:       joinTime(ts, tn),
			Due:        all[start:p.end:p.end],
			More:       p.more,
			Limits:     p.u.limits(),
			InFlight:   p.inFlight,
		}
		if q.Hold > 0 {
			p.u.heldSec, p.u.heldNsec = hsec, hnsec
		}
		start = p.end
	}
	return heads
}

// grow extends s by n elements and returns them, capped at their length so that
// appending to them never writes into s, and the extended slice. The n may hold what an
// earlier use left: the caller sets every field.
func grow[T any](s []T, n int) (added, all []T) {
	l := len(s)
	s = slices.Grow(s, n)[:l+n]
	return s[l : l+n : l+n], s
}

// appendVisible appends to found the first limit entries of u visible at now, in (DueAt,
// WorkKey) order, and reports whether u has more. Its walk passes over every subtree whose
// least visible-at is after now, so it visits O(limit · log n) nodes. A ready user's limit
// is at least 1: its Turn is no earlier than the instants its limits let it be served.
func (m *Memory) appendVisible(found []claimed, u *user, sec int64, nsec int32, limit int) ([]claimed, bool) {
	if limit == 1 && u.first.visibleBy(sec, nsec) {
		return append(found, claimed{u, u.first}), visibleBesides(u, sec, nsec)
	}
	n, more := 0, false
	if f := u.front; f != nil {
		for i := range f.n {
			if s := &f.slot[i]; cmpTime(s.visSec, s.visNsec, sec, nsec) > 0 {
				continue
			}
			if n == limit {
				return found, true
			}
			found = append(found, claimed{u, f.slot[i].n})
			n++
		}
	}
	c := &m.walk
	c.sec, c.nsec = sec, nsec
	c.start(u.entries)
	for x := c.next(); x != nil; x = c.next() {
		if !x.visibleBy(sec, nsec) {
			continue
		}
		if n == limit {
			more = true
			break
		}
		found = append(found, claimed{u, x})
		n++
	}
	c.start(nil)
	return found, more
}

// Route moves each named user to its group and stores its limits. O(log n) per user.
func (m *Memory) Route(ctx context.Context, routes []Route) error {
	if err := vocab.Each("routes", routes, Route.Validate); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	m.route(routes)
	return nil
}

func (m *Memory) route(routes []Route) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, r := range routes {
		u := m.users[r.UserID]
		if u == nil {
			continue
		}
		u.setLimits(r.Limits)
		switch {
		case u.first == nil:
			u.group = r.Group
		case u.group == r.Group:
			m.requeue(u, true) // the limits may move its ReadyAt
		default:
			m.dequeue(u)
			u.group = r.Group
			m.enqueue(u)
		}
	}
}

// Groups returns the groups that hold a user ready at now. It looks at the front of each
// group's queue: O(log n) per group.
func (m *Memory) Groups(ctx context.Context, now time.Time) ([]string, error) {
	sec, nsec, err := m.lockAt(ctx, now)
	if err != nil {
		return nil, err
	}
	defer m.mu.Unlock()
	var out []string
	for name, root := range m.groups {
		first := byTurn.first(root)
		ts, tn := first.turnSec, first.turnNsec
		if cmpTime(ts, tn, sec, nsec) <= 0 {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out, nil
}

// Release ends the named users' holds that end exactly at heldUntil. O(1) per user.
func (m *Memory) Release(ctx context.Context, userIDs []string, heldUntil time.Time) error {
	if err := validTime("heldUntil", heldUntil); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	sec, nsec := splitTime(heldUntil)
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, id := range userIDs {
		if u := m.users[id]; u != nil && u.heldSec == sec && u.heldNsec == nsec {
			u.heldSec, u.heldNsec = 0, 0
		}
	}
	return nil
}

// Claim claims, atomically, those of keys that are visible at now and that their users'
// limits allow, until until. It applies the limits one key after another, and moves each
// served user's pass and place in its queue once, at the end. O(len(keys) · log n).
func (m *Memory) Claim(ctx context.Context, keys []Key, now, until time.Time) ([]Claim, error) {
	return m.appendClaim(ctx, nil, keys, now, until)
}

// appendClaim is Claim, appending the claims to dst (see internal/reuse.AppendClaim): it
// allocates nothing when dst has room for them.
func (m *Memory) appendClaim(ctx context.Context, dst []Claim, keys []Key, now, until time.Time) ([]Claim, error) {
	if err := vocab.ClaimWindow(ErrInvalid, now, until); err != nil {
		return dst, err
	}
	if err := ctx.Err(); err != nil {
		return dst, err
	}
	sec, nsec := splitTime(now)
	usec, unsec := splitTime(until)
	m.mu.Lock()
	defer m.mu.Unlock()

	// out stays dst when nothing is claimed; at the first claim it grows room for every key
	// left, which is exact when all are claimable, as a dispatcher's keys usually are.
	out := dst
	untilAt := joinTime(usec, unsec)
	for i, k := range keys {
		u, n := m.claimable(k)
		if n == nil || !n.visibleBy(sec, nsec) || !u.allows(sec, nsec) {
			continue
		}
		m.forget(n)
		m.tokens++
		n.visSec, n.visNsec = usec, unsec // max(DueAt, until): DueAt <= now < until
		m.remember(u, n, m.tokens)
		u.revisit(n)
		m.served(u, sec, nsec)
		if out == nil {
			out = make([]Claim, 0, len(keys)-i)
		} else if len(out) == len(dst) {
			out = slices.Grow(out, len(keys)-i)
		}
		out = append(out, Claim{Entry: n.entry(u), Token: m.tokens, Until: untilAt})
	}
	for _, u := range m.touched {
		m.stride(u, sec, nsec)
	}
	for _, u := range m.touched {
		m.requeue(u, true)
	}
	clear(m.touched)
	m.touched = m.touched[:0]
	if cap(m.touched) > maxScratch {
		m.touched = nil
	}
	return out, nil
}

// DueBefore returns at most limit entries visible at now. It merges the users' entries in
// the order of their earliest DueAt: O(log n) per entry returned, plus O(log n) for each
// user it passes over because the entries it has due are all claimed.
func (m *Memory) DueBefore(ctx context.Context, now time.Time, limit int) ([]Entry, error) {
	if err := vocab.Limit(ErrInvalid, "limit", limit); err != nil {
		return nil, err
	}
	sec, nsec, err := m.lockAt(ctx, now)
	if err != nil {
		return nil, err
	}
	defer m.mu.Unlock()

	var out []Entry
	var h dueHeap
	var w dueWalk
	w.start(m.byDue)
	for len(out) < limit {
		// Bring in every user whose first entry may come before the heap's top.
		for s := w.peek(); s != nil && cmpTime(s.sec, s.nsec, sec, nsec) <= 0 &&
			(len(h) == 0 || thenID(cmpTime(s.sec, s.nsec, h[0].n.dueSec, h[0].n.dueNsec), s.u.id, h[0].u.id) < 0); s = w.peek() {
			if n := s.u.visibleAfter(nil, sec, nsec); n != nil {
				h.push(dueItem{n, s.u})
			}
			w.next()
		}
		if len(h) == 0 {
			break
		}
		top := h.pop()
		out = append(out, top.n.entry(top.u))
		if n := top.u.visibleAfter(top.n, sec, nsec); n != nil {
			h.push(dueItem{n, top.u})
		}
	}
	return out, nil
}

// lockAt checks a read's now, then ctx, and takes the lock; the caller unlocks. It
// returns now as Memory stores it.
func (m *Memory) lockAt(ctx context.Context, now time.Time) (int64, int32, error) {
	if err := validTime("now", now); err != nil {
		return 0, 0, err
	}
	if err := ctx.Err(); err != nil {
		return 0, 0, err
	}
	sec, nsec := splitTime(now)
	m.mu.Lock()
	return sec, nsec, nil
}

// dueItem is one entry in DueBefore's merge, with its user.
type dueItem struct {
	n *node
	u *user
}

// cmpDue orders by (DueAt, UserID, WorkKey), DueBefore's order.
func cmpDue(a, b dueItem) int {
	if c := thenID(cmpTime(a.n.dueSec, a.n.dueNsec, b.n.dueSec, b.n.dueNsec), a.u.id, b.u.id); c != 0 {
		return c
	}
	return strings.Compare(a.n.workKey, b.n.workKey)
}

// dueHeap is a binary min-heap in DueBefore's order.
type dueHeap []dueItem

func (h *dueHeap) push(x dueItem) {
	*h = append(*h, x)
	s := *h
	for i := len(s) - 1; i > 0; {
		p := (i - 1) / 2
		if cmpDue(s[i], s[p]) >= 0 {
			break
		}
		s[i], s[p] = s[p], s[i]
		i = p
	}
}

func (h *dueHeap) pop() dueItem {
	s := *h
	top := s[0]
	last := len(s) - 1
	s[0] = s[last]
	s[last] = dueItem{}
	s = s[:last]
	for i := 0; ; {
		l, small := 2*i+1, i
		if l < len(s) && cmpDue(s[l], s[small]) < 0 {
			small = l
		}
		if r := l + 1; r < len(s) && cmpDue(s[r], s[small]) < 0 {
			small = r
		}
		if small == i {
			break
		}
		s[i], s[small] = s[small], s[i]
		i = small
	}
	*h = s
	return top
}
