package dispatch

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/rotaworks/rota/duework"
)

// cycle is one Dispatch in progress: what it has read, and so must hand back if it fails.
type cycle struct {
	d   *Dispatcher
	ctx context.Context
	now time.Time

	lanes  []LaneCapacity // the Dispatcher's lanes, capped by the cycle's Take
	global int            // GlobalBatchLimit, capped by the cycle's Take

	routeRead []string            // users the routing reads held until now+RetryAfter
	resolved  map[string]struct{} // users whose lane this cycle resolved while routing
	heads     [][]duework.Head    // per lane, the users its Ready returned
	peeks     []duework.Head      // per lane left no room, the user its unheld peek returned
	batch     Batch
	s         *scratch // memory that ends with the cycle: the lanes' pages live in it
}

// run is the cycle: route, read the lanes, choose, claim, hand back the users not served,
// move served users whose lane or limits changed.
func (c *cycle) run() (Batch, error) {
	d := c.d
	c.batch.Lanes = make([]LaneReport, len(c.lanes))
	for i, lc := range c.lanes {
		c.batch.Lanes[i].Lane = lc.Lane
	}
	if err := c.route(); err != nil {
		return c.fail(err)
	}
	if err := c.readLanes(); err != nil {
		return c.fail(err)
	}
	ch := choose(c.lanes, c.heads, c.global, &c.s.choose)
	served, err := c.claim(&ch)
	if err != nil {
		return c.fail(err)
	}
	c.report(&ch)
	c.release(c.unserved(&ch, served), d.holdFor)
	c.reroute(&ch, served)
	sortUnrouted(c.batch.Unrouted)
	return c.batch, nil
}

// fail hands back every user the cycle read, even when ctx has ended (the call gives up
// after HoldFor), and returns err with a zero Batch.
func (c *cycle) fail(err error) (Batch, error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(c.ctx), c.d.holdFor)
	defer cancel()
	c.ctx = ctx
	c.release(c.routeRead, c.d.retryAfter)
	var read []string
	for _, heads := range c.heads {
		for i := range heads {
			read = append(read, heads[i].UserID)
		}
	}
	c.release(read, c.d.holdFor)
	return Batch{}, err
}

// release ends the holds the cycle took with hold on users; a failure leaves them to
// lapse at now+hold.
func (c *cycle) release(users []string, hold time.Duration) {
	if len(users) > 0 {
		_ = c.d.idx.Release(c.ctx, users, c.now.Add(hold))
	}
}

// route reads up to RouteLimit ready users of the unrouted group and of the groups no
// configured lane names, holding them for RetryAfter, and moves those whose lane LaneFor
// resolves to their lane, handing them back; the others stay held and are Unrouted.
func (c *cycle) route() error {
	d := c.d
	groups, err := d.idx.Groups(c.ctx, c.now)
	if err != nil {
		return fmt.Errorf("dispatch: Index.Groups: %w", err)
	}
	unrouted, stale := false, []string(nil)
	for _, g := range groups {
		if g == "" {
			unrouted = true
		} else if _, ok := d.laneIdx[Lane(g)]; !ok {
			stale = append(stale, g)
		}
	}
	left := d.routeLimit
	if unrouted {
		n := left
		if len(stale) > 0 {
			n -= left / 2 // the stale groups keep at least half
		}
		if left, err = c.readRouting("", n, left); err != nil {
			return err
		}
	}
	for _, g := range stale {
		if left <= 0 {
			break
		}
		if left, err = c.readRouting(g, left, left); err != nil {
			return err
		}
	}
	return c.resolveRouted()
}

// readRouting reads up to n users of group for routing and returns the budget left.
func (c *cycle) readRouting(group string, n, left int) (int, error) {
	q := duework.ReadyQuery{Group: group, Now: c.now, Users: n, PerUser: 1, Hold: c.d.retryAfter}
	page, err := c.d.idx.Ready(c.ctx, q)
	if err != nil {
		return 0, fmt.Errorf("dispatch: Index.Ready(%q): %w", group, err)
	}
	for i := range page.Heads {
		c.routeRead = append(c.routeRead, page.Heads[i].UserID)
	}
	return left - len(page.Heads), nil
}

// resolveRouted calls LaneFor for every user the routing read, routes and hands back
// those it resolves, and lists the others as Unrouted.
func (c *cycle) resolveRouted() error {
	if len(c.routeRead) == 0 {
		return nil
	}
	routes := make([]duework.Route, 0, len(c.routeRead))
	for _, id := range c.routeRead {
		lane, limits, err := c.d.resolve(c.ctx, id)
		if err != nil {
			c.batch.Unrouted = append(c.batch.Unrouted, Unrouted{UserID: id, Err: err})
			continue
		}
		routes = append(routes, duework.Route{UserID: id, Group: string(lane), Limits: limits})
	}
	if len(routes) == 0 {
		return nil
	}
	if err := c.d.idx.Route(c.ctx, routes); err != nil {
		return fmt.Errorf("dispatch: Index.Route: %w", err)
	}
	ids := make([]string, len(routes))
	c.resolved = make(map[string]struct{}, len(routes))
	for i, r := range routes {
		ids[i] = r.UserID
		c.resolved[r.UserID] = struct{}{}
	}
	if err := c.d.idx.Release(c.ctx, ids, c.now.Add(c.d.retryAfter)); err != nil {
		return fmt.Errorf("dispatch: Index.Release: %w", err)
	}
	return nil
}

// readLanes reads each lane's next users in priority order, as many as the lane could be
// given: min(PerCycleLimit, max(MinShare, GlobalBatchLimit − F)), F the length of the
// fair parts of the lanes above, each user with up to max(PerUserLimit, PerUserBurst)
// entries (the index scales it by the user's weight). A lane left with none reads one
// user, unheld, for its WaitingSince, OldestDue and Overdue only.
func (c *cycle) readLanes() error {
	d := c.d
	c.heads = recycle(&c.s.heads, len(c.lanes))
	filled := 0
	for li, lc := range c.lanes {
		caps := capsOf(lc)
		n := min(lc.PerCycleLimit, max(lc.MinShare, c.global-filled))
		q := duework.ReadyQuery{Group: string(lc.Lane), Now: c.now, Users: n, PerUser: caps.read, Hold: d.holdFor}
		if n < 1 {
			q.Users, q.PerUser, q.Hold = 1, 1, 0
		}
		page, err := c.ready(q)
		if err != nil {
			return fmt.Errorf("dispatch: Index.Ready(%q): %w", lc.Lane, err)
		}
		if n < 1 {
			if len(page.Heads) > 0 {
				c.peek(li, page.Heads[0])
			}
			continue
		}
		inRoundOrder(page.Heads)
		c.heads[li] = page.Heads
		c.batch.Lanes[li].WaitingSince = page.Next // unless report finds a user read and cut
		filled += fairLen(page.Heads, caps, min(lc.PerCycleLimit, c.global))
	}
	return nil
}

// peek keeps h, the first ready user of lane li, which the cycle left no room: its Turn is
// the lane's WaitingSince, and its oldest entry counts in the lane's OldestDue and
// Overdue, so that a starved lane's lateness shows. It is not read: not in Users, never
// shed.
func (c *cycle) peek(li int, h duework.Head) {
	if c.peeks == nil {
		c.peeks = make([]duework.Head, len(c.lanes))
	}
	if !slices.IsSortedFunc(h.Due, compareEntries) {
		slices.SortStableFunc(h.Due, compareEntries)
	}
	c.peeks[li] = h
	c.batch.Lanes[li].WaitingSince = h.Turn
}

// inRoundOrder puts heads in (Turn, UserID) order and each head's Due in (DueAt, WorkKey)
// order, as Ready returns them; it sorts only what is not.
func inRoundOrder(heads []duework.Head) {
	if !slices.IsSortedFunc(heads, compareTurns) {
		slices.SortFunc(heads, compareTurns)
	}
	for i := range heads {
		if !slices.IsSortedFunc(heads[i].Due, compareEntries) {
			slices.SortStableFunc(heads[i].Due, compareEntries)
		}
	}
}

// claim claims the chosen entries until now+ClaimFor, fills the batch's items, counts
// dispatched and lost items per lane, and returns, per head (as ch.got), whether Claim
// claimed an entry for it.
func (c *cycle) claim(ch *choice) ([]bool, error) {
	served := recycle(&c.s.served, len(ch.got))
	if len(ch.picks) == 0 {
		return served, nil
	}
	keys := c.s.keys[:0]
	for _, p := range ch.picks {
		keys = append(keys, ch.entry(c.heads, p).Key())
	}
	c.s.keys = keys
	claims, err := c.claimKeys(keys, c.now.Add(c.d.claimFor))
	if err != nil {
		return nil, fmt.Errorf("dispatch: Index.Claim: %w", err)
	}
	at := pairClaims(recycle(&c.s.at, len(keys)), keys, claims)
	c.batch.Items = make([]Item, 0, len(claims))
	for i, p := range ch.picks {
		lane := &c.batch.Lanes[p.lane]
		if at[i] < 0 {
			lane.LostClaims++
			continue
		}
		c.batch.Items = append(c.batch.Items, Item{Claim: claims[at[i]], Lane: lane.Lane})
		lane.Dispatched++
		served[ch.off[p.lane]+p.head] = true
	}
	return served, nil
}

// pairClaims sets at[i], for each key i (at is as long as keys), to the index in claims
// of its claim, or -1 when it was lost, and returns at; no claim is paired twice. Claim
// returns its claims in the order of keys, and one walk pairs them; for an Index that does
// not, each key takes the last unpaired claim of it.
func pairClaims(at []int, keys []duework.Key, claims []duework.Claim) []int {
	j := 0
	for i, k := range keys {
		at[i] = -1
		if j < len(claims) && claims[j].Entry.Key() == k {
			at[i] = j
			j++
		}
	}
	if j == len(claims) {
		return at
	}
	last := make(map[duework.Key]int, len(claims))
	for j, cl := range claims {
		last[cl.Entry.Key()] = j
	}
	for i, k := range keys {
		at[i] = -1
		if j, ok := last[k]; ok {
			at[i] = j
			delete(last, k)
		}
	}
	return at
}

// report fills each lane's Users, Shed, Limited, WeightCapped, OldestDue, Overdue and, when
// it read a user and cut it, WaitingSince, and the batch's ShedUserIDs. A user held back by its own
// limits that got all its Due is neither shed nor the lane's WaitingSince.
func (c *cycle) report(ch *choice) {
	shed := 0
	for li, heads := range c.heads {
		lane := &c.batch.Lanes[li]
		lane.Users = len(heads)
		caps, waiting := capsOf(c.lanes[li]), false
		conf := c.d.lanes[li] // as configured, not as the cycle's Take capped it
		for h, got := range ch.gotOf(li) {
			head := &heads[h]
			held := caps.heldBack(head)
			if held {
				lane.Limited++
			}
			if w := weightOf(head); w > 1 && scaled(conf.PerUserLimit, w) > conf.PerCycleLimit {
				lane.WeightCapped++
			}
			if caps.shed(head, got) {
				lane.Shed++
			}
			if !waiting && got == 0 && !(held && len(head.Due) == 0) {
				lane.WaitingSince, waiting = head.Turn, true
			}
		}
		shed += lane.Shed
	}
	if shed > 0 { // one allocation, of the exact size
		c.batch.ShedUserIDs = make([]string, 0, shed)
		for li := range c.heads {
			c.batch.ShedUserIDs = ch.appendShed(c.batch.ShedUserIDs, c.lanes, c.heads, li)
		}
		slices.Sort(c.batch.ShedUserIDs)
	}
	c.reportOverdue()
}

// reportOverdue fills each lane's Overdue with up to maxOverdue of the users it read, or
// peeked at, whose oldest visible entries are the oldest, and OldestDue with the first.
// Every lane's Overdue shares one allocation.
func (c *cycle) reportOverdue() {
	n := 0
	for li := range c.lanes {
		n += min(maxOverdue, c.candidates(li))
	}
	if n == 0 {
		return
	}
	all := make([]Overdue, 0, n)
	for li := range c.lanes {
		start := len(all)
		limit := start + min(maxOverdue, c.candidates(li))
		for h := range c.heads[li] {
			all = insertOverdue(all, start, limit, &c.heads[li][h])
		}
		if c.peeks != nil && c.peeks[li].UserID != "" {
			all = insertOverdue(all, start, limit, &c.peeks[li])
		}
		if lane := &c.batch.Lanes[li]; len(all) > start {
			lane.Overdue = all[start:len(all):len(all)]
			lane.OldestDue = lane.Overdue[0].DueAt
		}
	}
}

// candidates is the number of users lane li read, or peeked at, with a visible entry.
func (c *cycle) candidates(li int) int {
	n := 0
	for h := range c.heads[li] {
		if len(c.heads[li][h].Due) > 0 {
			n++
		}
	}
	if c.peeks != nil && len(c.peeks[li].Due) > 0 {
		n++
	}
	return n
}

// insertOverdue inserts h's oldest visible entry into all[start:], kept in (DueAt, UserID)
// order and at most limit − start long, and returns all.
func insertOverdue(all []Overdue, start, limit int, h *duework.Head) []Overdue {
	if len(h.Due) == 0 {
		return all
	}
	o := Overdue{UserID: h.UserID, DueAt: h.Due[0].DueAt}
	i := len(all)
	for i > start && compareOverdue(o, all[i-1]) < 0 {
		i--
	}
	if i == limit {
		return all
	}
	if len(all) < limit {
		all = append(all, Overdue{})
	}
	copy(all[i+1:], all[i:len(all)-1])
	all[i] = o
	return all
}

// compareOverdue is Overdue's order: oldest DueAt first, then UserID.
func compareOverdue(a, b Overdue) int {
	if c := a.DueAt.Compare(b.DueAt); c != 0 {
		return c
	}
	return strings.Compare(a.UserID, b.UserID)
}

// unserved returns the lane users read for whom Claim claimed nothing.
func (c *cycle) unserved(ch *choice, served []bool) []string {
	var out []string
	for li, heads := range c.heads {
		for h := range heads {
			if !served[ch.off[li]+h] {
				out = append(out, heads[h].UserID)
			}
		}
	}
	return out
}

// reroute resolves the lane and limits of every served user that routing did not resolve
// this cycle and moves those whose lane or limits changed; a user whose lane or limits
// cannot be resolved, or who cannot be moved, stays where it is and is listed as Unrouted.
func (c *cycle) reroute(ch *choice, served []bool) {
	var routes []duework.Route
	for li, heads := range c.heads {
		for h := range heads {
			id := heads[h].UserID
			if _, done := c.resolved[id]; done || !served[ch.off[li]+h] {
				continue
			}
			lane, limits, err := c.d.resolve(c.ctx, id)
			if err != nil {
				err = fmt.Errorf("%w (it stays in lane %q)", err, c.lanes[li].Lane)
				c.batch.Unrouted = append(c.batch.Unrouted, Unrouted{UserID: id, Err: err})
			} else if lane != c.lanes[li].Lane || limits != heads[h].Limits {
				routes = append(routes, duework.Route{UserID: id, Group: string(lane), Limits: limits})
			}
		}
	}
	if len(routes) == 0 {
		return
	}
	if err := c.d.idx.Route(c.ctx, routes); err != nil {
		for _, r := range routes {
			err := fmt.Errorf("dispatch: Index.Route to %q: %w", r.Group, err)
			c.batch.Unrouted = append(c.batch.Unrouted, Unrouted{UserID: r.UserID, Err: err})
		}
	}
}
