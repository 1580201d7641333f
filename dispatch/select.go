package dispatch

import (
	"fmt"
	"slices"
	"strings"

	"github.com/rotaworks/rota/duework"
)

// SelectInput is everything Select needs.
type SelectInput struct {
	// Heads are the users read, as duework.Index.Ready returns them, in any order.
	Heads []duework.Head
	// LaneOf maps each user to its lane; a user missing from it, or mapped to a lane that
	// Lanes does not hold, is not selected.
	LaneOf map[string]Lane
	// Lanes lists the lanes, highest priority first.
	Lanes []LaneCapacity
	// GlobalBatchLimit caps the selection across lanes.
	GlobalBatchLimit int
}

// Selection is the fair batch Select chose, before any claim.
type Selection struct {
	// Items in dispatch order: highest lane first, each lane in its fair order.
	Items []Selected
	// ShedUserIDs names, sorted and once each, every user of Heads left with visible work
	// that was not selected.
	ShedUserIDs []string
}

// Selected is one entry Select chose, with its lane.
type Selected struct {
	Entry duework.Entry
	Lane  Lane
}

// Select chooses one cycle's fair batch from the users read. It is pure and deterministic
// — the order of in.Heads does not matter — so fairness can be checked without an index;
// a Dispatcher calls it between its reads and its claim.
//
// Each lane goes round by round over its users in (Turn, UserID) order: every user gets
// one item, its entries in (DueAt, WorkKey) order, before any user gets a second, up to
// PerUserLimit per user and PerCycleLimit per lane. GlobalBatchLimit then takes each lane's
// MinShare first, in priority order, and the rest highest lane first: each lane dispatches
// a prefix of its round-robin order. A user left with visible work (cut, capped, More, or
// without a lane) is shed. Limits below 1 select nothing.
//
// It costs O(H log H + I) for H heads holding I entries, and panics when two heads name
// one user.
func Select(in SelectInput) Selection {
	if user, dup := duplicateUser(in.Heads); dup {
		panic(fmt.Sprintf("dispatch: Select: user %q has two Heads", user))
	}
	lanes, unrouted := bucket(in)
	ch := choose(in.Lanes, lanes, in.GlobalBatchLimit)
	sel := Selection{Items: make([]Selected, len(ch.picks))}
	for i, p := range ch.picks {
		sel.Items[i] = Selected{Entry: ch.entry(lanes, p), Lane: in.Lanes[p.lane].Lane}
	}
	for _, h := range unrouted {
		if len(h.Due) > 0 || h.More {
			sel.ShedUserIDs = append(sel.ShedUserIDs, h.UserID)
		}
	}
	for li := range lanes {
		sel.ShedUserIDs = ch.appendShed(sel.ShedUserIDs, lanes, li)
	}
	slices.Sort(sel.ShedUserIDs)
	return sel
}

// bucket copies in.Heads into one slice per lane (the first lane of a name holds its
// users), each in (Turn, UserID) order with its Due in (DueAt, WorkKey) order, and returns
// the heads without a lane apart. It never changes in.
func bucket(in SelectInput) (lanes [][]duework.Head, unrouted []duework.Head) {
	laneIdx := make(map[Lane]int, len(in.Lanes))
	for i, lc := range in.Lanes {
		if _, dup := laneIdx[lc.Lane]; !dup {
			laneIdx[lc.Lane] = i
		}
	}
	of := make([]int, len(in.Heads))
	counts := make([]int, len(in.Lanes))
	for h, head := range in.Heads {
		lane, routed := in.LaneOf[head.UserID]
		li, known := laneIdx[lane]
		if !routed || !known {
			li = -1
		} else {
			counts[li]++
		}
		of[h] = li
	}
	// One backing array for every lane's heads, each lane's part capped at its count.
	all := make([]duework.Head, 0, len(in.Heads))
	lanes = make([][]duework.Head, len(in.Lanes))
	for li, n := range counts {
		lanes[li] = all[len(all) : len(all) : len(all)+n]
		all = all[:len(all)+n]
	}
	for h, li := range of {
		head := in.Heads[h]
		head.Due = sortedDue(head.Due)
		if li < 0 {
			unrouted = append(unrouted, head)
			continue
		}
		lanes[li] = append(lanes[li], head)
	}
	for _, heads := range lanes {
		slices.SortFunc(heads, compareTurns)
	}
	return lanes, unrouted
}

// choice is a fair batch before its entries are copied out: picks index the heads each
// lane read, so a Dispatcher reads them in place.
type choice struct {
	picks []pick
	off   []int // lane li's heads are got[off[li]:off[li+1]]
	got   []int // items chosen per head
}

// pick is one chosen entry: lanes[lane][head].Due[r].
type pick struct{ lane, head, r int }

func (ch *choice) entry(lanes [][]duework.Head, p pick) duework.Entry {
	return lanes[p.lane][p.head].Due[p.r]
}

// gotOf returns the number of items chosen for each of lane li's heads.
func (ch *choice) gotOf(li int) []int { return ch.got[ch.off[li]:ch.off[li+1]] }

// appendShed appends the users of lane li left with visible work that was not chosen.
func (ch *choice) appendShed(shed []string, lanes [][]duework.Head, li int) []string {
	for h, n := range ch.gotOf(li) {
		head := &lanes[li][h]
		if head.More || n < len(head.Due) {
			shed = append(shed, head.UserID)
		}
	}
	return shed
}

// choose makes the fair choice over lanes[li], lane li's heads in round order, each with
// its Due in (DueAt, WorkKey) order: every lane's round-robin order, then its share of
// the global limit.
func choose(lanes []LaneCapacity, heads [][]duework.Head, global int) choice {
	global = max(global, 0)
	orders := make([][]int, len(lanes))
	ch := choice{off: make([]int, len(lanes)+1)}
	for li, lc := range lanes {
		orders[li] = fairOrder(heads[li], max(lc.PerUserLimit, 0), min(max(lc.PerCycleLimit, 0), global))
		ch.off[li+1] = ch.off[li] + len(heads[li])
	}
	take := apportion(lanes, orders, global)
	total := 0
	for _, t := range take {
		total += t
	}
	ch.picks = make([]pick, 0, total)
	ch.got = make([]int, ch.off[len(lanes)])
	for li := range lanes {
		got := ch.gotOf(li)
		for _, h := range orders[li][:take[li]] {
			ch.picks = append(ch.picks, pick{lane: li, head: h, r: got[h]})
			got[h]++
		}
	}
	return ch
}

// apportion returns how many items of its order each lane takes under the global limit:
// first each lane's MinShare, in priority order, as far as its order and the limit reach;
// then what is left, highest lane first. A reservation a lane cannot use stays in the pool.
func apportion(lanes []LaneCapacity, orders [][]int, global int) []int {
	take := make([]int, len(lanes))
	left := global
	for li, lc := range lanes {
		take[li] = min(max(lc.MinShare, 0), len(orders[li]), left)
		left -= take[li]
	}
	for li := range lanes {
		extra := min(len(orders[li])-take[li], left)
		take[li] += extra
		left -= extra
	}
	return take
}

// fairLen is the length of fairOrder(heads, perUser, limit), computed without building it.
func fairLen(heads []duework.Head, perUser, limit int) int {
	n := 0
	for i := range heads {
		if n += min(len(heads[i].Due), perUser); n >= limit {
			return limit
		}
	}
	return n
}

// fairOrder returns a lane's round-robin order as indexes into heads (already in round
// order): round r holds every user with more than r entries and a cap above r, and the
// order stops at limit items. It costs O(len(heads) + limit).
func fairOrder(heads []duework.Head, perUser, limit int) []int {
	size := fairLen(heads, perUser, limit)
	if size <= 0 {
		return nil
	}
	active := make([]int, 0, len(heads))
	for h := range heads {
		if min(len(heads[h].Due), perUser) > 0 {
			active = append(active, h)
		}
	}
	order := make([]int, 0, size)
	for r := 0; len(order) < size; r++ {
		next := active[:0]
		for _, h := range active {
			if len(order) == size {
				break
			}
			order = append(order, h)
			if min(len(heads[h].Due), perUser) > r+1 {
				next = append(next, h)
			}
		}
		active = next
	}
	return order
}

// compareTurns is a lane's round order: (Turn, UserID).
func compareTurns(a, b duework.Head) int {
	if c := a.Turn.Compare(b.Turn); c != 0 {
		return c
	}
	return strings.Compare(a.UserID, b.UserID)
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
	seen := make(map[string]struct{}, len(heads))
	for _, h := range heads {
		if _, dup := seen[h.UserID]; dup {
			return h.UserID, true
		}
		seen[h.UserID] = struct{}{}
	}
	return "", false
}
