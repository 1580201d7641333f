package dispatch

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/rotaworks/rota/duework"
)

// SelectInput is everything Select needs.
type SelectInput struct {
	// Heads are the users read, in any order, as duework.Index.Ready returns them for a
	// lane read with PerUser max(PerUserLimit, PerUserBurst): each head's Due, Limits and
	// More as the index gave them.
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
	// Items in dispatch order: highest lane first, each lane's fair part in its fair
	// order, then its burst.
	Items []Selected
	// ShedUserIDs names, sorted and once each, every user of Heads left with visible work
	// that was not selected, but for a user whose own limits alone held it back (see
	// Select).
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
// A user of weight w (its Limits.EffectiveWeight) has a fair cap of PerUserLimit × w and a
// burst cap of PerUserBurst × w (PerUserBurst 0, or below PerUserLimit: no burst). Each
// lane builds its order in two parts:
//
//   - its fair part goes round by round over its users in (Turn, UserID) order: every user
//     gets one item, its entries in (DueAt, WorkKey) order, before any user gets a second,
//     up to its fair cap, and stops at PerCycleLimit;
//   - when every user has had its whole fair part, the lane's room left under
//     PerCycleLimit goes on in rounds, again from the first user in turn order, one more
//     item per user per round, to the users with more visible work, up to their burst caps:
//     the burst.
//
// GlobalBatchLimit goes to the fair parts first — each lane's MinShare in priority order,
// then the rest highest lane first — and what is left to the bursts, highest lane first;
// each lane dispatches a prefix of its order. Limits below 1 select nothing.
//
// A user left with visible work (cut, capped, More, or without a lane) is shed, but for a
// user held back by its own limits that got all its Due: one with a cap or a rate
// (Limits.MaxInFlight or Limits.Every set), More, and fewer Due than the lane's read,
// max(PerUserLimit, PerUserBurst) × w. It waits on itself, not on its neighbours. With
// every weight 1, no caps or rates and no bursts, the rules are those of plain round robin.
//
// It costs O(H log H + I) for H heads holding I entries, and panics when two heads name
// one user.
func Select(in SelectInput) Selection {
	if user, dup := duplicateUser(in.Heads); dup {
		panic(fmt.Sprintf("dispatch: Select: user %q has two Heads", user))
	}
	lanes, unrouted := bucket(in)
	ch := choose(in.Lanes, lanes, in.GlobalBatchLimit, nil)
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
		sel.ShedUserIDs = ch.appendShed(sel.ShedUserIDs, in.Lanes, lanes, li)
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

// laneCaps is what one lane lets a user of weight 1 have in a cycle.
type laneCaps struct {
	fair  int // PerUserLimit, or 0 when below 1
	burst int // PerUserBurst when it is above the fair cap, else the fair cap
	read  int // the PerUser the lane reads with: max(PerUserLimit, PerUserBurst)
}

func capsOf(lc LaneCapacity) laneCaps {
	c := laneCaps{fair: max(lc.PerUserLimit, 0), read: max(lc.PerUserLimit, lc.PerUserBurst)}
	c.burst = c.fair
	if c.fair > 0 {
		c.burst = max(lc.PerUserBurst, c.fair)
	}
	return c
}

// weightOf is h's weight, in [1, duework.MaxWeight].
func weightOf(h *duework.Head) int { return min(h.Limits.EffectiveWeight(), duework.MaxWeight) }

// scaled is n × w for n ≥ 0 and w in [1, duework.MaxWeight], saturating.
func scaled(n, w int) int {
	if n > math.MaxInt/w {
		return math.MaxInt
	}
	return n * w
}

// fairWant is how many items h's fair part holds in a lane with caps c.
func (c laneCaps) fairWant(h *duework.Head) int { return min(len(h.Due), scaled(c.fair, weightOf(h))) }

// burstWant is how many items h may have in all, fair part and burst, in a lane with caps c.
func (c laneCaps) burstWant(h *duework.Head) int {
	return min(len(h.Due), scaled(c.burst, weightOf(h)))
}

// heldBack reports whether h's own limits held back visible work in a lane with caps c:
// it has a cap or a rate, More, and fewer Due than the lane read (c.read × its weight).
func (c laneCaps) heldBack(h *duework.Head) bool {
	return h.More && (h.Limits.MaxInFlight > 0 || h.Limits.Every > 0) && len(h.Due) < scaled(max(c.read, 0), weightOf(h))
}

// shed reports whether h, given got items in a lane with caps c, is left with visible
// work that waits on its neighbours.
func (c laneCaps) shed(h *duework.Head, got int) bool {
	return got < len(h.Due) || (h.More && !c.heldBack(h))
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

// appendShed appends the users of lane li left with visible work that was not chosen and
// that their own limits alone do not explain.
func (ch *choice) appendShed(shed []string, lanes []LaneCapacity, heads [][]duework.Head, li int) []string {
	c := capsOf(lanes[li])
	for h, n := range ch.gotOf(li) {
		if head := &heads[li][h]; c.shed(head, n) {
			shed = append(shed, head.UserID)
		}
	}
	return shed
}

// chooseMem is choose's working memory, which a Dispatcher reuses from cycle to cycle.
type chooseMem struct {
	off, counts, backing, active []int
	orders                       []laneOrder
	picks                        []pick
}

// recycle returns (*buf)[:n], zeroed, allocating it when *buf is shorter.
func recycle[T any](buf *[]T, n int) []T {
	if cap(*buf) < n {
		*buf = make([]T, n)
	}
	*buf = (*buf)[:n]
	clear(*buf)
	return *buf
}

// laneOrder is one lane's order, as indexes into its heads, and how much of it the
// global limit lets it take.
type laneOrder struct {
	fair, burst         []int
	takeFair, takeBurst int
}

// choose makes the fair choice over heads[li], lane li's heads in round order, each with
// its Due in (DueAt, WorkKey) order: every lane's fair part and burst, then their shares
// of the global limit. It costs O(H + picks) for H heads, in a fixed number of allocations.
//
// Its working memory comes from mem, which the choice then refers to; a nil mem allocates
// it.
func choose(lanes []LaneCapacity, heads [][]duework.Head, global int, mem *chooseMem) choice {
	if mem == nil {
		mem = new(chooseMem)
	}
	global = max(global, 0)
	ch := choice{off: recycle(&mem.off, len(lanes)+1)}
	most := 0 // the most heads one lane holds
	for li := range lanes {
		ch.off[li+1] = ch.off[li] + len(heads[li])
		most = max(most, len(heads[li]))
	}
	n := ch.off[len(lanes)]
	counts := recycle(&mem.counts, n+2*len(lanes))
	// want holds each head's wants while the orders are built, and then becomes got.
	want := counts[:n:n]
	fairN, burstN := counts[n:n+len(lanes)], counts[n+len(lanes):]
	orders := recycle(&mem.orders, len(lanes))

	// Sizes first, so that every lane's orders share one backing array.
	size := 0
	for li, lc := range lanes {
		c, limit := capsOf(lc), min(max(lc.PerCycleLimit, 0), global)
		fair, burst := 0, 0
		for h := range heads[li] {
			head := &heads[li][h]
			f := c.fairWant(head)
			fair += f
			burst += c.burstWant(head) - f
		}
		fairN[li] = min(fair, limit)
		if fair < limit { // every user had its whole fair part
			burstN[li] = min(burst, limit-fair)
		}
		size += fairN[li] + burstN[li]
	}
	backing := recycle(&mem.backing, size)[:0]
	active := recycle(&mem.active, most)[:0]
	for li, lc := range lanes {
		c, lw := capsOf(lc), want[ch.off[li]:ch.off[li+1]]
		for h := range heads[li] {
			lw[h] = c.fairWant(&heads[li][h])
		}
		o := &orders[li]
		start := len(backing)
		backing = appendRounds(backing, lw, fairN[li], active)
		o.fair = backing[start:len(backing):len(backing)]
		if burstN[li] > 0 {
			for h := range heads[li] {
				lw[h] = c.burstWant(&heads[li][h]) - lw[h]
			}
			start = len(backing)
			backing = appendRounds(backing, lw, burstN[li], active)
			o.burst = backing[start:len(backing):len(backing)]
		}
	}
	total := apportion(lanes, orders, global)
	ch.picks = recycle(&mem.picks, total)[:0]
	ch.got = want
	clear(ch.got)
	for li := range orders {
		lg, o := ch.gotOf(li), &orders[li]
		for _, h := range o.fair[:o.takeFair] {
			ch.picks = append(ch.picks, pick{lane: li, head: h, r: lg[h]})
			lg[h]++
		}
		for _, h := range o.burst[:o.takeBurst] {
			ch.picks = append(ch.picks, pick{lane: li, head: h, r: lg[h]})
			lg[h]++
		}
	}
	return ch
}

// apportion sets how many items of its fair part and of its burst each lane takes under
// the global limit, and returns their sum: first each lane's MinShare of its fair part, in
// priority order, as far as its fair part and the limit reach; then the rest of the fair
// parts, highest lane first; then the bursts, highest lane first. A reservation a lane
// cannot use stays in the pool.
func apportion(lanes []LaneCapacity, orders []laneOrder, global int) int {
	left := global
	for li, lc := range lanes {
		o := &orders[li]
		o.takeFair = min(max(lc.MinShare, 0), len(o.fair), left)
		left -= o.takeFair
	}
	for li := range orders {
		o := &orders[li]
		extra := min(len(o.fair)-o.takeFair, left)
		o.takeFair += extra
		left -= extra
	}
	for li := range orders {
		o := &orders[li]
		o.takeBurst = min(len(o.burst), left)
		left -= o.takeBurst
	}
	return global - left
}

// fairLen is the length of a lane's fair part over heads (in round order) under caps c,
// cut at limit, computed without building it.
func fairLen(heads []duework.Head, c laneCaps, limit int) int {
	n := 0
	for i := range heads {
		if n += c.fairWant(&heads[i]); n >= limit {
			return limit
		}
	}
	return n
}

// appendRounds appends to order the round-robin order over want, as indexes into it, and
// stops after size items (at most the sum of want): round r holds, in index order, every
// i with want[i] > r. active is scratch space of capacity len(want). It costs
// O(len(want) + size).
func appendRounds(order, want []int, size int, active []int) []int {
	if size <= 0 {
		return order
	}
	active = active[:0]
	for i, n := range want {
		if n > 0 {
			active = append(active, i)
		}
	}
	end := len(order) + size
	for r := 0; len(order) < end; r++ {
		next := active[:0]
		for _, i := range active {
			if len(order) == end {
				break
			}
			order = append(order, i)
			if want[i] > r+1 {
				next = append(next, i)
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
