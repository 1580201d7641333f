package rotadynamo

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/rotaworks/rota/duework"
	"github.com/rotaworks/rota/internal/vocab"
	"github.com/rotaworks/rota/tenancy"
)

// Index is a duework.Index on one DynamoDB table, shared by every process that opens the
// table: OpenStores builds it. It is safe for concurrent use.
//
// Each user is one item that holds its group, limits, LastServed, stride position, rate
// mark, hold and pause, and what its ReadyAt derives from: its counts of entries and
// claims, the earliest DueAt of its unclaimed entries, the earliest end of its claims, and
// with a cap the cap-th latest end. Every write of a user's entries, limits or pause is
// one TransactWriteItems of those entries and the user item, conditional on the version it
// read, so the user item is always exact and several processes writing one user are
// serialized by DynamoDB; one that loses a race reads again and retries. See the package
// documentation for the items, the indexes and what each call costs.
type Index struct {
	d       *db
	buckets int
	groups  sync.Map // the groups this Index has recorded in the groups item
}

var _ duework.Index = (*Index)(nil)

// bucket returns user's bucket.
func (x *Index) bucket(user string) int { return bucketOf(user, x.buckets) }

// readUser reads user's item, strongly consistent; a user the index does not store comes
// back with stored false.
func (x *Index) readUser(ctx context.Context, user string) (*userRec, error) {
	m, err := x.d.get(ctx, key(userPK(user), skUser), true)
	if err != nil {
		return nil, err
	}
	return readUserRec(user, m)
}

// readEntries reads user's entries workKeys, strongly consistent, by work key; absent ones
// are missing from the map.
func (x *Index) readEntries(ctx context.Context, user string, workKeys []string) (map[string]*entryRec, error) {
	_, out, err := x.read(ctx, user, false, workKeys)
	return out, err
}

// read reads, strongly consistent, user's item (when withUser) and its entries workKeys,
// in one request for up to 99 entries: what every write of a user reads first.
func (x *Index) read(ctx context.Context, user string, withUser bool, workKeys []string) (*userRec, map[string]*entryRec, error) {
	keys := make([]map[string]av, 0, len(workKeys)+1)
	if withUser {
		keys = append(keys, key(userPK(user), skUser))
	}
	seen := map[string]bool{}
	for _, wk := range workKeys {
		if !seen[wk] {
			seen[wk] = true
			keys = append(keys, key(userPK(user), entrySK(wk)))
		}
	}
	var items []map[string]av
	if len(keys) == 1 {
		m, err := x.d.get(ctx, keys[0], true)
		if err != nil {
			return nil, nil, err
		}
		if m != nil {
			items = append(items, m)
		}
	} else {
		var err error
		if items, err = x.d.batchGet(ctx, keys); err != nil {
			return nil, nil, err
		}
	}
	var um map[string]av
	out := make(map[string]*entryRec, len(workKeys))
	for _, m := range items {
		if (&item{m: m}).str(attrSK) == skUser {
			um = m
			continue
		}
		r, err := readEntryRec(m)
		if err != nil {
			return nil, nil, err
		}
		out[r.e.WorkKey] = r
	}
	u, err := readUserRec(user, um)
	return u, out, err
}

// commit runs the actions of one write of a user, the user item's update among them. It
// returns errConflict when a condition failed — the user item changed since it was read
// (its version), or an entry did — or another transaction was writing the same items, so
// that the caller reads again and retries. One action alone goes as a plain write, which
// costs half a transaction's units.
func (x *Index) commit(ctx context.Context, actions []types.TransactWriteItem) error {
	if len(actions) == 1 && actions[0].Update != nil {
		u := actions[0].Update
		_, err := x.d.update(ctx, &dynamodb.UpdateItemInput{Key: u.Key, UpdateExpression: u.UpdateExpression,
			ConditionExpression: u.ConditionExpression, ExpressionAttributeNames: u.ExpressionAttributeNames,
			ExpressionAttributeValues: u.ExpressionAttributeValues})
		if conditionFailed(err) {
			return errConflict
		}
		return err
	}
	err := x.d.transact(ctx, actions)
	reasons := cancelled(err)
	if reasons == nil {
		return err
	}
	for _, r := range reasons {
		switch reasonCode(r) {
		case "None", "ConditionalCheckFailed", "TransactionConflict":
		default:
			return err
		}
	}
	return errConflict
}

// Schedule inserts or replaces tc's entry e.WorkKey, ending its claim if it has one. One
// TransactWriteItems of the entry and the user item (4 write units, plus the indexes the
// entry and the user move in), after reading both.
func (x *Index) Schedule(ctx context.Context, tc tenancy.Context, e duework.Entry) error {
	if err := e.Validate(tc); err != nil {
		return err
	}
	return interpret(ctx, "Index.Schedule", retry(ctx, func() error {
		u, olds, err := x.read(ctx, e.UserID, true, []string{e.WorkKey})
		if err != nil {
			return err
		}
		n := &entryRec{e: e}
		if err := x.derive(ctx, u, []change{{key: e.WorkKey, old: olds[e.WorkKey], new: n}}, false); err != nil {
			return err
		}
		return x.commit(ctx, []types.TransactWriteItem{putAction(n.item(), nil), u.write(x.bucket(u.id)).action()})
	}))
}

// maxPerTransaction is how many entries one TransactWriteItems writes with their user
// item: DynamoDB takes 100 actions.
const maxPerTransaction = 99

// ScheduleMissing inserts each of entries whose WorkKey tc does not have yet, the first of
// a WorkKey given twice, and returns how many it inserted. Each run of up to 99 entries is
// one TransactWriteItems with the user item, after a batched read of those entries; so a
// call of more than 99 entries is atomic per run, not as a whole.
func (x *Index) ScheduleMissing(ctx context.Context, tc tenancy.Context, entries []duework.Entry) (int, error) {
	if err := tc.Check(); err != nil {
		return 0, err
	}
	if err := vocab.Each("entries", entries, func(e duework.Entry) error { return e.Validate(tc) }); err != nil {
		return 0, err
	}
	var firsts []duework.Entry
	seen := map[string]bool{}
	for _, e := range entries {
		if !seen[e.WorkKey] {
			seen[e.WorkKey] = true
			firsts = append(firsts, e)
		}
	}
	added := 0
	for len(firsts) > 0 {
		run := firsts[:min(len(firsts), maxPerTransaction)]
		firsts = firsts[len(run):]
		n, err := x.scheduleRun(ctx, tc.UserID(), run)
		added += n
		if err != nil {
			return added, interpret(ctx, "Index.ScheduleMissing", err)
		}
	}
	return added, nil
}

// scheduleRun inserts those of run (distinct work keys, at most maxPerTransaction) that
// user does not have, in one transaction.
func (x *Index) scheduleRun(ctx context.Context, user string, run []duework.Entry) (int, error) {
	added := 0
	err := retry(ctx, func() error {
		wks := make([]string, len(run))
		for i, e := range run {
			wks[i] = e.WorkKey
		}
		u, olds, err := x.read(ctx, user, true, wks)
		if err != nil {
			return err
		}
		var changes []change
		var actions []types.TransactWriteItem
		for _, e := range run {
			if olds[e.WorkKey] == nil {
				n := &entryRec{e: e}
				changes = append(changes, change{key: e.WorkKey, new: n})
				actions = append(actions, putAction(n.item(), nil))
			}
		}
		if len(changes) == 0 {
			added = 0
			return nil
		}
		if err := x.derive(ctx, u, changes, false); err != nil {
			return err
		}
		added = len(changes)
		return x.commit(ctx, append(actions, u.write(x.bucket(user)).action()))
	})
	return added, err
}

// Unschedule removes tc's entry workKey whatever its claim; an absent entry is not an
// error, and costs the two reads only.
func (x *Index) Unschedule(ctx context.Context, tc tenancy.Context, workKey string) error {
	if err := tc.Check(); err != nil {
		return err
	}
	if err := vocab.Name(duework.ErrInvalid, "WorkKey", workKey); err != nil {
		return err
	}
	return interpret(ctx, "Index.Unschedule", x.remove(ctx, tc.UserID(), workKey, nil))
}

// remove deletes user's entry workKey in one transaction with the user item; with c not
// nil, only while c is its current claim (else ErrClaimLost).
func (x *Index) remove(ctx context.Context, user, workKey string, c *duework.Claim) error {
	return retry(ctx, func() error {
		u, olds, err := x.read(ctx, user, true, []string{workKey})
		if err != nil {
			return err
		}
		old := olds[workKey]
		if c != nil && (old == nil || !old.claimed() || old.token != c.Token) {
			return fmt.Errorf("entry %q with token %d: %w", workKey, c.Token, duework.ErrClaimLost)
		}
		if old == nil {
			return nil
		}
		if err := x.derive(ctx, u, []change{{key: workKey, old: old}}, false); err != nil {
			return err
		}
		return x.commit(ctx, []types.TransactWriteItem{
			deleteAction(key(userPK(user), entrySK(workKey)), nil), u.write(x.bucket(user)).action()})
	})
}

// Get returns tc's entry workKey, claimed or not, or duework.ErrNotFound: one strongly
// consistent read.
func (x *Index) Get(ctx context.Context, tc tenancy.Context, workKey string) (duework.Entry, error) {
	if err := tc.Check(); err != nil {
		return duework.Entry{}, err
	}
	if err := vocab.Name(duework.ErrInvalid, "WorkKey", workKey); err != nil {
		return duework.Entry{}, err
	}
	rs, err := x.readEntries(ctx, tc.UserID(), []string{workKey})
	if err != nil {
		return duework.Entry{}, interpret(ctx, "Index.Get", err)
	}
	r := rs[workKey]
	if r == nil {
		return duework.Entry{}, fmt.Errorf("rotadynamo: Index.Get %q: %w", workKey, duework.ErrNotFound)
	}
	return normEntry(r.e), nil
}

// User returns userID's place in its queue at now: one read of its item, and a count of
// its claims in flight when some of them have ended.
func (x *Index) User(ctx context.Context, userID string, now time.Time) (duework.UserState, error) {
	if err := vocab.Name(duework.ErrInvalid, "UserID", userID); err != nil {
		return duework.UserState{}, err
	}
	if err := vocab.Time(duework.ErrInvalid, "now", now); err != nil {
		return duework.UserState{}, err
	}
	u, err := x.readUser(ctx, userID)
	if err != nil {
		return duework.UserState{}, interpret(ctx, "Index.User", err)
	}
	if !u.stored {
		return duework.UserState{}, fmt.Errorf("rotadynamo: Index.User %q: %w", userID, duework.ErrNotFound)
	}
	n, err := x.inFlight(ctx, u, now)
	if err != nil {
		return duework.UserState{}, interpret(ctx, "Index.User", err)
	}
	st := duework.UserState{Group: u.group, Limits: u.limits, LastServed: norm(u.lastServed), Turn: norm(u.turn()), InFlight: n}
	if u.held.After(now) {
		st.HeldUntil = norm(u.held)
	}
	if u.paused(now) {
		st.PausedUntil, st.PauseReason = norm(u.pausedUntil), u.pauseReason
	}
	return st, nil
}

// inFlight counts u's claims whose Until is after now: none without claims, all of them
// when the earliest ends after now, and otherwise a count on the claims index.
func (x *Index) inFlight(ctx context.Context, u *userRec, now time.Time) (int, error) {
	switch {
	case u.claims == 0:
		return 0, nil
	case u.claimEnd.After(now):
		return u.claims, nil
	}
	var e expr
	cond := e.n(attrPK) + " = " + e.v(sv(userPK(u.id))) + " AND " + e.n(attrLClaim) + " >= " + e.v(sv(after1(now)))
	in := &dynamodb.QueryInput{IndexName: ptr(idxClaims), KeyConditionExpression: &cond, ConsistentRead: ptr(true),
		Select: types.SelectCount, ExpressionAttributeNames: e.namesOrNil(), ExpressionAttributeValues: e.valuesOrNil()}
	n := 0
	for {
		out, err := x.d.query(ctx, in)
		if err != nil {
			return 0, err
		}
		n += int(out.Count)
		if out.LastEvaluatedKey == nil {
			return n, nil
		}
		in.ExclusiveStartKey = out.LastEvaluatedKey
	}
}

// Entries returns up to limit of userID's entries after after, in WorkKey order, each with
// its current claim's Until: one strongly consistent query of what it returns.
func (x *Index) Entries(ctx context.Context, userID, after string, limit int) ([]duework.EntryState, error) {
	if err := vocab.Name(duework.ErrInvalid, "UserID", userID); err != nil {
		return nil, err
	}
	if after != "" {
		if err := vocab.Name(duework.ErrInvalid, "WorkKey", after); err != nil {
			return nil, fmt.Errorf("after: %w", err)
		}
	}
	if err := vocab.Limit(duework.ErrInvalid, "limit", limit); err != nil {
		return nil, err
	}
	var out []duework.EntryState
	err := x.d.pageRange(ctx, userPK(userID), entryPrefix+after, entryEnd, limit+1, func(m map[string]av) (bool, error) {
		r, err := readEntryRec(m)
		if err != nil {
			return false, err
		}
		if r.e.WorkKey == after {
			return true, nil
		}
		es := duework.EntryState{Entry: normEntry(r.e)}
		if r.claimed() {
			es.ClaimedUntil = norm(r.until)
		}
		out = append(out, es)
		return len(out) < limit, nil
	})
	if err != nil {
		return nil, interpret(ctx, "Index.Entries", err)
	}
	return out, nil
}

// pageRange reads the items of partition pk whose sort keys lie in [from, to],
// strongly consistent, in pages of page items, and calls f with each until f returns
// false or an error.
func (d *db) pageRange(ctx context.Context, pk, from, to string, page int, f func(map[string]av) (bool, error)) error {
	var e expr
	cond := e.n(attrPK) + " = " + e.v(sv(pk)) + " AND " + e.n(attrSK) + " BETWEEN " + e.v(sv(from)) + " AND " + e.v(sv(to))
	in := &dynamodb.QueryInput{KeyConditionExpression: &cond, ConsistentRead: ptr(true), Limit: ptr(int32(min(page, 1000))),
		ExpressionAttributeNames: e.namesOrNil(), ExpressionAttributeValues: e.valuesOrNil()}
	for {
		out, err := d.query(ctx, in)
		if err != nil {
			return err
		}
		for _, m := range out.Items {
			more, err := f(m)
			if err != nil || !more {
				return err
			}
		}
		if out.LastEvaluatedKey == nil {
			return nil
		}
		in.ExclusiveStartKey = out.LastEvaluatedKey
	}
}

// claimLost wraps duework.ErrClaimLost for op's claim c.
func claimLost(op string, c duework.Claim) error {
	return fmt.Errorf("rotadynamo: Index.%s %q with token %d: %w", op, c.Entry.WorkKey, c.Token, duework.ErrClaimLost)
}
