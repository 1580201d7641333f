package rotadynamo

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/rotaworks/rota/duework"
	"github.com/rotaworks/rota/internal/vocab"
)

// The dispatcher's cross-tenant calls: Ready, Route, Groups, Release.

// candidate is a user read from a turn queue: its ID and its sort key there.
type candidate struct {
	user, qs string
}

// queue starts the merge of group's turn queues, every bucket, from their heads up to the
// users whose Turn is at most now, in pages of about page users per bucket.
func (x *Index) queue(group string, now time.Time, page int) *merge {
	hashes := make([]string, x.buckets)
	for b := range hashes {
		hashes[b] = queueKey(group, b)
	}
	per := page
	if x.buckets > 1 {
		per = 2*page/x.buckets + 1
	}
	return newMerge(x.d, idxQueue, attrQueueKey, attrQueueSK, hashes, "<", after1(now), per)
}

// Ready returns up to q.Users users of q.Group that are ready and not held at q.Now, in
// (Turn, UserID) order, each with its first visible entries, and holds them until
// q.Now+q.Hold when q.Hold > 0.
//
// It queries each bucket of the group's queue from its head (an eventually consistent
// read of the queue index) and merges them. It holds each user with a conditional write
// of its item — its queue key still as read and not held at q.Now — that returns the item,
// so a user whose index entry was stale or that another dispatcher holds fails the
// condition and is skipped: a stale read costs a skipped user, never a user read twice.
// Then it reads each user's first visible entries from the due index, strongly consistent,
// and, when some of its claims have ended, counts those in flight. Next costs a read of
// each held user it passes. The users are held in parallel, at most 16 at once.
func (x *Index) Ready(ctx context.Context, q duework.ReadyQuery) (duework.ReadyPage, error) {
	if err := q.Validate(); err != nil {
		return duework.ReadyPage{}, err
	}
	page, err := x.ready(ctx, q)
	return page, interpret(ctx, "Index.Ready", err)
}

func (x *Index) ready(ctx context.Context, q duework.ReadyQuery) (duework.ReadyPage, error) {
	mg := x.queue(q.Group, q.Now, q.Users+1)
	var users []*userRec
	for len(users) < q.Users {
		var cands []candidate
		for len(cands) < q.Users-len(users) {
			it, ok, err := mg.next(ctx)
			if err != nil {
				return duework.ReadyPage{}, err
			}
			if !ok {
				break
			}
			cands = append(cands, candidate{user: userOf(it.pk), qs: it.sk})
		}
		if len(cands) == 0 {
			break
		}
		got, err := x.acquire(ctx, cands, q)
		if err != nil {
			return duework.ReadyPage{}, err
		}
		for _, u := range got {
			if u != nil {
				users = append(users, u)
			}
		}
	}
	// The heads' entries and the next user's turn, all at once.
	var page duework.ReadyPage
	heads := make([]duework.Head, len(users))
	err := parallel(ctx, len(users)+1, func(ctx context.Context, i int) error {
		if i == len(users) {
			var err error
			page.Next, err = x.nextTurn(ctx, mg, q.Now)
			return err
		}
		var err error
		heads[i], err = x.head(ctx, users[i], q)
		return err
	})
	if len(heads) > 0 {
		page.Heads = heads
	}
	return page, err
}

// acquire holds (with q.Hold > 0) or reads the users cands name, each only when its queue
// key is still the one read and no one holds it at q.Now, and returns their items in the
// order of cands, nil for a user skipped. Holds are conditional writes, in parallel;
// without a hold, one batched read.
func (x *Index) acquire(ctx context.Context, cands []candidate, q duework.ReadyQuery) ([]*userRec, error) {
	users := make([]*userRec, len(cands))
	if q.Hold > 0 {
		err := parallel(ctx, len(cands), func(ctx context.Context, i int) error {
			var err error
			users[i], err = x.hold(ctx, cands[i], q.Now, q.Now.Add(q.Hold))
			return err
		})
		return users, err
	}
	keys := make([]map[string]av, len(cands))
	for i, c := range cands {
		keys[i] = key(userPK(c.user), skUser)
	}
	items, err := x.d.batchGet(ctx, keys)
	if err != nil {
		return nil, err
	}
	byID := make(map[string]*userRec, len(items))
	for _, m := range items {
		u, err := readUserRec(userOf((&item{m: m}).str(attrPK)), m)
		if err != nil {
			return nil, err
		}
		byID[u.id] = u
	}
	for i, c := range cands {
		if u := byID[c.user]; u != nil && u.entries > 0 && u.queueSK() == c.qs && !u.held.After(q.Now) {
			users[i] = u
		}
	}
	return users, nil
}

// head returns u's Head at q.Now: its first visible entries, as many as its limits allow,
// read at once with its in-flight count when that takes a count of its claims (some have
// ended).
func (x *Index) head(ctx context.Context, u *userRec, q duework.ReadyQuery) (duework.Head, error) {
	most := q.PerUser * u.limits.EffectiveWeight()
	var inFlight int
	var due []duework.Entry
	var more bool
	err := parallel(ctx, 2, func(ctx context.Context, i int) error {
		var err error
		if i == 0 {
			inFlight, err = x.inFlight(ctx, u, q.Now)
		} else {
			due, more, err = x.visible(ctx, u.id, q.Now, most, u.claims)
		}
		return err
	})
	if err != nil {
		return duework.Head{}, err
	}
	if limit := max(1, room(u.limits, u.mark, q.Now, inFlight)); len(due) > limit {
		due, more = due[:limit:limit], true
	}
	return duework.Head{UserID: u.id, LastServed: norm(u.lastServed), Turn: norm(u.turn()), Due: due, More: more,
		Limits: u.limits, InFlight: inFlight}, nil
}

// hold holds c's user until until, if its queue key is still c's and no one holds it at
// now, and returns its item; nil when the condition fails, or when a transaction is
// writing the user at that moment (Ready may skip a user a concurrent call writes).
func (x *Index) hold(ctx context.Context, c candidate, now, until time.Time) (*userRec, error) {
	up := newUpdate(key(userPK(c.user), skUser)).set(attrHeld, tv(until))
	up.cond(func(e *expr) string {
		return e.n(attrQueueSK) + " = " + e.v(sv(c.qs)) + " AND (attribute_not_exists(" + e.n(attrHeld) + ") OR " +
			e.n(attrHeld) + " <= " + e.v(tv(now)) + ")"
	})
	in := up.input()
	in.ReturnValues = types.ReturnValueAllNew
	out, err := x.d.update(ctx, in)
	if conditionFailed(err) || isConflict(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return readUserRec(c.user, out.Attributes)
}

// nextTurn returns the Turn of the next user of mg that is not held at now and whose
// queue key is as read, or the zero time: a read of each user it looks at.
func (x *Index) nextTurn(ctx context.Context, mg *merge, now time.Time) (time.Time, error) {
	for {
		it, ok, err := mg.next(ctx)
		if err != nil || !ok {
			return time.Time{}, err
		}
		m, err := x.d.get(ctx, key(it.pk, skUser), true, attrQueueSK, attrHeld)
		if err != nil {
			return time.Time{}, err
		}
		u := &item{m: m}
		if u.str(attrQueueSK) != it.sk || u.time(attrHeld).After(now) {
			continue
		}
		t, err := decTime(it.sk)
		return norm(t), err
	}
}

// entryAttrs are the attributes of an entry item that a read of its entries fetches.
var entryAttrs = []string{attrPK, attrSK, attrTier, attrDueAt, attrLastRunAt, attrMissStreak, attrErrorStreak, attrToken, attrUntil, attrStarted}

// visible returns user's first limit entries visible at now in (DueAt, WorkKey) order,
// and whether it has more: a strongly consistent query of its due index up to now, which
// passes over its claims in flight (about inFlight of them) and fetches each entry from
// the table.
func (x *Index) visible(ctx context.Context, user string, now time.Time, limit, inFlight int) ([]duework.Entry, bool, error) {
	var e expr
	cond := e.n(attrPK) + " = " + e.v(sv(userPK(user))) + " AND " + e.n(attrLDue) + " < " + e.v(sv(after1(now)))
	pe := ""
	for i, a := range entryAttrs {
		if i > 0 {
			pe += ", "
		}
		pe += e.n(a)
	}
	in := &dynamodb.QueryInput{IndexName: ptr(idxDue), KeyConditionExpression: &cond, ConsistentRead: ptr(true),
		ProjectionExpression: &pe, Limit: ptr(int32(min(limit+1+inFlight, 1000))),
		ExpressionAttributeNames: e.namesOrNil(), ExpressionAttributeValues: e.valuesOrNil()}
	var out []duework.Entry
	for {
		res, err := x.d.query(ctx, in)
		if err != nil {
			return nil, false, err
		}
		for _, m := range res.Items {
			r, err := readEntryRec(m)
			if err != nil {
				return nil, false, err
			}
			if !r.visible(now) {
				continue
			}
			if len(out) == limit {
				return out, true, nil
			}
			out = append(out, normEntry(r.e))
		}
		if res.LastEvaluatedKey == nil {
			return out, false, nil
		}
		in.ExclusiveStartKey = res.LastEvaluatedKey
	}
}

// Groups returns, sorted bytewise, the groups that hold a user ready at now: a read of the
// groups item, then one query of one key per bucket of each group, in parallel.
func (x *Index) Groups(ctx context.Context, now time.Time) ([]string, error) {
	if err := vocab.Time(duework.ErrInvalid, "now", now); err != nil {
		return nil, err
	}
	groups, err := x.knownGroups(ctx)
	if err != nil {
		return nil, interpret(ctx, "Index.Groups", err)
	}
	ready := make([]bool, len(groups))
	var mu sync.Mutex
	err = parallel(ctx, len(groups)*x.buckets, func(ctx context.Context, i int) error {
		g, b := i/x.buckets, i%x.buckets
		var e expr
		cond := e.n(attrQueueKey) + " = " + e.v(sv(queueKey(groups[g], b))) + " AND " + e.n(attrQueueSK) + " < " + e.v(sv(after1(now)))
		out, err := x.d.query(ctx, &dynamodb.QueryInput{IndexName: ptr(idxQueue), KeyConditionExpression: &cond, Limit: ptr(int32(1)),
			ExpressionAttributeNames: e.namesOrNil(), ExpressionAttributeValues: e.valuesOrNil()})
		if err == nil && len(out.Items) > 0 {
			mu.Lock()
			ready[g] = true
			mu.Unlock()
		}
		return err
	})
	if err != nil {
		return nil, interpret(ctx, "Index.Groups", err)
	}
	var out []string
	for i, g := range groups {
		if ready[i] {
			out = append(out, g)
		}
	}
	slices.Sort(out)
	return out, nil
}

// knownGroups returns "" and every group the groups item names.
func (x *Index) knownGroups(ctx context.Context) ([]string, error) {
	m, err := x.d.get(ctx, key(pkGroups, skGroups), true)
	if err != nil {
		return nil, err
	}
	out := []string{""}
	if ss, ok := m["gs"].(*types.AttributeValueMemberSS); ok {
		out = append(out, ss.Value...)
	}
	return out, nil
}

// noteGroup adds group to the groups item, once per Index.
func (x *Index) noteGroup(ctx context.Context, group string) error {
	if group == "" {
		return nil
	}
	if _, ok := x.groups.Load(group); ok {
		return nil
	}
	up := newUpdate(key(pkGroups, skGroups)).add("gs", &types.AttributeValueMemberSS{Value: []string{group}})
	_, err := x.d.update(ctx, up.input())
	if err == nil {
		x.groups.Store(group, true)
	}
	return err
}

// Release ends the holds of the named users that end exactly at heldUntil: a conditional
// write of each user's item, in parallel (again when a transaction was writing the user at
// that moment); a condition that fails (the hold lapsed and another took it, or it ended)
// changes nothing.
func (x *Index) Release(ctx context.Context, userIDs []string, heldUntil time.Time) error {
	if err := vocab.Time(duework.ErrInvalid, "heldUntil", heldUntil); err != nil {
		return err
	}
	ids := validUsers(userIDs)
	err := parallel(ctx, len(ids), func(ctx context.Context, i int) error {
		up := newUpdate(key(userPK(ids[i]), skUser)).remove(attrHeld)
		up.cond(func(e *expr) string { return e.n(attrHeld) + " = " + e.v(tv(heldUntil)) })
		return retry(ctx, func() error {
			_, err := x.d.update(ctx, up.input())
			if conditionFailed(err) {
				return nil
			}
			return err
		})
	})
	return interpret(ctx, "Index.Release", err)
}

// validUsers returns the distinct valid user IDs of ids, in their order: an ID no user
// could have names no stored user.
func validUsers(ids []string) []string {
	seen := make(map[string]bool, len(ids))
	var out []string
	for _, id := range ids {
		if vocab.ValidName(id) && !seen[id] {
			seen[id] = true
			out = append(out, id)
		}
	}
	return out
}

// Route moves each named user to its group and stores its limits, the last route of a
// user named twice winning: per user, a read of its item and one conditional write when
// its group or limits change (and a read of its claims when its cap does), in parallel.
// A group not seen before is first added to the groups item. Users the index does not
// store are ignored; invalid routes are duework.ErrInvalid and nothing is written.
func (x *Index) Route(ctx context.Context, routes []duework.Route) error {
	if err := vocab.Each("routes", routes, duework.Route.Validate); err != nil {
		return err
	}
	last := make(map[string]duework.Route, len(routes))
	ids := make([]string, 0, len(routes))
	for _, r := range routes {
		last[r.UserID] = r
		ids = append(ids, r.UserID)
	}
	ids = validUsers(ids)
	err := parallel(ctx, len(ids), func(ctx context.Context, i int) error { return x.route(ctx, last[ids[i]]) })
	return interpret(ctx, "Index.Route", err)
}

func (x *Index) route(ctx context.Context, r duework.Route) error {
	return retry(ctx, func() error {
		u, err := x.readUser(ctx, r.UserID)
		if err != nil || !u.stored || u.group == r.Group && u.limits == r.Limits {
			return err
		}
		if err := x.noteGroup(ctx, r.Group); err != nil {
			return err
		}
		capChanged := u.limits.MaxInFlight != r.Limits.MaxInFlight
		u.group, u.limits = r.Group, r.Limits
		if err := x.derive(ctx, u, nil, capChanged); err != nil {
			return err
		}
		return x.commit(ctx, []types.TransactWriteItem{u.write(x.bucket(u.id)).action()})
	})
}
