package dispatch

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/rotaworks/rota/duework"
)

// Select chooses one cycle's fair batch from the users' due heads. It is pure and
// deterministic: the same input always gives the same Selection, whatever the order of
// in.Heads, and it reads no clock and no index. The Dispatcher calls it between
// Index.DueHeads and Index.Claim; it is exported so that hosts and tests can check the
// fairness rules without any index.
//
// Within each lane (rules 1 and 2):
//
//   - The lane's users are the Heads whose LaneOf value is the lane. They are ordered least
//     recently served first (zero LastServed first, then the oldest LastServed), then by the
//     DueAt of their earliest due entry, then by UserID. That order is the same in every round.
//   - Round r (from 0) gives, in that order, the r-th entry of every user who still has one
//     and whose count is below the lane's PerUserLimit, so every user gets one item before
//     any user gets a second. A user's entries go in (DueAt, WorkKey) order.
//   - The rounds stop when the lane reaches min(PerCycleLimit, GlobalBatchLimit) items or
//     runs out of work. The result is the lane's fair order; any prefix of it is max-min fair.
//
// Across lanes (rule 3), with G = GlobalBatchLimit and n(i) the length of lane i's fair order,
// lanes in priority order (in.Lanes order, highest first):
//
//  1. Reservations: lane i reserves r(i) = min(MinShare(i), n(i), G − r(0) − … − r(i−1)). A
//     lane reserves no more than it can use, so an idle lane's MinShare goes back to the pool.
//  2. The pool is G − Σ r(i). Lane i takes r(i) + min(n(i) − r(i), what the pool still holds),
//     and the pool shrinks by what it took beyond r(i).
//  3. Each lane dispatches that prefix of its fair order.
//
// So with every MinShare 0 the highest lane's order comes first, then the next (strict
// priority), and a lane below a saturated one still gets its MinShare whenever it has that
// much work. Items come highest lane first, each lane in its fair order.
//
// Shedding (rule 4): ShedUserIDs names, sorted and once each, every user of in.Heads that has
// due work (a non-empty Due, or More) and was not selected for all of it: a user with More
// (it has due work beyond Due, which Select cannot hand out), a user selected for fewer than
// len(Due) entries, and a user without a lane — missing from LaneOf or mapped to a lane that
// in.Lanes does not hold.
//
// Select does not validate its input the way New does: a PerUserLimit, PerCycleLimit or
// GlobalBatchLimit below 1 selects nothing from that lane (or at all), a negative MinShare
// counts as 0, and when two lanes share a name the first one holds the users. Heads should
// hold their Due entries in (DueAt, WorkKey) order, as DueHeads returns them; Select sorts a
// copy when they are not. It panics when two Heads name the same user, which DueHeads never
// returns.
//
// Cost: O(H log H + I) time, H the number of Heads and I the number of entries in their Due
// slices, and never more: a user's backlog beyond Due is not seen. In the Dispatcher, Due
// holds at most the largest PerUserLimit, so a cycle costs what its users and its batch cost
// (rule 8).
func Select(in SelectInput) Selection {
	p := pickFair(in)
	sel := Selection{Items: make([]Selected, len(p.picks)), ShedUserIDs: p.shed}
	for i, pk := range p.picks {
		sel.Items[i] = Selected{Entry: p.entry(pk), Lane: in.Lanes[pk.lane].Lane}
	}
	return sel
}

// picked is Select's choice before its entries are copied out: the Dispatcher reads the
// picks in place, which spares a copy of every selected Entry.
type picked struct {
	due   [][]duework.Entry // each head's Due, in (DueAt, WorkKey) order
	picks []pick            // in Selection.Items order
	shed  []string          // Selection.ShedUserIDs
}

// pick is one selected entry: due[head][r], in lane in.Lanes[lane].
type pick struct{ head, r, lane int }

func (p *picked) entry(pk pick) duework.Entry { return p.due[pk.head][pk.r] }

// pickFair is Select without the copies; see Select.
func pickFair(in SelectInput) picked {
	if user, dup := duplicateUser(in.Heads); dup {
		panic(fmt.Sprintf("dispatch: Select: user %q has two Heads", user))
	}

	laneIdx := make(map[Lane]int, len(in.Lanes))
	for i, lc := range in.Lanes {
		if _, dup := laneIdx[lc.Lane]; !dup {
			laneIdx[lc.Lane] = i
		}
	}
	global := max(in.GlobalBatchLimit, 0)

	// Bucket users by lane; -1 marks an unrouted head. The buckets share one backing array,
	// counted first, each capped at its length.
	headLane := make([]int, len(in.Heads))
	due := make([][]duework.Entry, len(in.Heads))
	counts := make([]int, len(in.Lanes))
	routed := 0
	for h := range in.Heads {
		head := &in.Heads[h]
		due[h] = sortedDue(head.Due)
		headLane[h] = -1
		lane, ok := in.LaneOf[head.UserID]
		if !ok {
			continue
		}
		li, ok := laneIdx[lane]
		if !ok {
			continue
		}
		headLane[h] = li
		counts[li]++
		routed++
	}
	members := make([][]int, len(in.Lanes))
	all := make([]int, 0, routed)
	for li, n := range counts {
		members[li] = all[len(all) : len(all) : len(all)+n]
		all = all[:len(all)+n]
	}
	for h, li := range headLane {
		if li >= 0 {
			members[li] = append(members[li], h)
		}
	}

	// Each lane's fair order, as head indexes (the r-th pick of a user is its entry r).
	orders := make([][]int, len(in.Lanes))
	for li, lc := range in.Lanes {
		users := members[li]
		slices.SortFunc(users, func(a, b int) int {
			return compareUsers(&in.Heads[a], due[a], &in.Heads[b], due[b])
		})
		orders[li] = fairOrder(users, due, max(lc.PerUserLimit, 0), min(max(lc.PerCycleLimit, 0), global))
	}

	// Reservations, then the pool in priority order.
	take := make([]int, len(in.Lanes))
	left := global
	for li, lc := range in.Lanes {
		take[li] = min(max(lc.MinShare, 0), len(orders[li]), left)
		left -= take[li]
	}
	for li := range in.Lanes {
		extra := min(len(orders[li])-take[li], left)
		take[li] += extra
		left -= extra
	}

	total := 0
	for _, t := range take {
		total += t
	}
	sel := picked{due: due, picks: make([]pick, 0, total)}
	got := make([]int, len(in.Heads))
	for li := range in.Lanes {
		for _, h := range orders[li][:take[li]] {
			sel.picks = append(sel.picks, pick{head: h, r: got[h], lane: li})
			got[h]++
		}
	}

	for h := range in.Heads {
		head := &in.Heads[h]
		if len(head.Due) == 0 && !head.More {
			continue
		}
		if headLane[h] < 0 || head.More || got[h] < len(head.Due) {
			sel.shed = append(sel.shed, head.UserID)
		}
	}
	slices.Sort(sel.shed)
	return sel
}

// fairOrder returns the lane's round-robin order over users (already in round order) as
// head indexes: round r holds every user with more than r entries and a cap above r. It
// stops at limit items. Its cost is O(len(users) + limit).
func fairOrder(users []int, due [][]duework.Entry, perUser, limit int) []int {
	active := make([]int, 0, len(users))
	size := 0 // what the rounds hand out, up to limit: order's exact length
	for _, h := range users {
		if n := min(len(due[h]), perUser); n > 0 {
			active = append(active, h)
			size += n
		}
	}
	var order []int
	if size = min(size, limit); size > 0 {
		order = make([]int, 0, size)
	}
	for r := 0; len(active) > 0 && len(order) < limit; r++ {
		next := active[:0]
		for _, h := range active {
			if len(order) == limit {
				break
			}
			order = append(order, h)
			if min(len(due[h]), perUser) > r+1 {
				next = append(next, h)
			}
		}
		active = next
	}
	return order
}

// compareUsers orders a lane's users for its rounds: never served first, then the oldest
// LastServed, then the earliest first due entry, then UserID.
func compareUsers(a *duework.Head, aDue []duework.Entry, b *duework.Head, bDue []duework.Entry) int {
	if az, bz := a.LastServed.IsZero(), b.LastServed.IsZero(); az != bz {
		if az {
			return -1
		}
		return 1
	}
	if c := a.LastServed.Compare(b.LastServed); c != 0 {
		return c
	}
	if c := firstDue(aDue).Compare(firstDue(bDue)); c != 0 {
		return c
	}
	return strings.Compare(a.UserID, b.UserID)
}

// firstDue is the DueAt of a user's earliest due entry, or the zero time when it has none
// (such a user gets nothing, wherever it stands).
func firstDue(due []duework.Entry) (t time.Time) {
	if len(due) > 0 {
		t = due[0].DueAt
	}
	return t
}

// compareEntries is the (DueAt, WorkKey) order of one user's entries.
func compareEntries(a, b duework.Entry) int {
	if c := a.DueAt.Compare(b.DueAt); c != 0 {
		return c
	}
	return strings.Compare(a.WorkKey, b.WorkKey)
}

// sortedDue returns due in (DueAt, WorkKey) order, sorting a copy only when it is not.
func sortedDue(due []duework.Entry) []duework.Entry {
	if slices.IsSortedFunc(due, compareEntries) {
		return due
	}
	due = slices.Clone(due)
	slices.SortStableFunc(due, compareEntries)
	return due
}

// duplicateUser reports a user that two heads name, if any.
func duplicateUser(heads []duework.Head) (string, bool) {
	if slices.IsSortedFunc(heads, func(a, b duework.Head) int { return strings.Compare(a.UserID, b.UserID) }) {
		for i := 1; i < len(heads); i++ {
			if heads[i].UserID == heads[i-1].UserID {
				return heads[i].UserID, true
			}
		}
		return "", false
	}
	seen := make(map[string]struct{}, len(heads))
	for _, h := range heads {
		if _, dup := seen[h.UserID]; dup {
			return h.UserID, true
		}
		seen[h.UserID] = struct{}{}
	}
	return "", false
}
