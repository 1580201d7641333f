package rotadynamo

import (
	"context"
	"slices"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
)

// change is one entry of a user that a write replaces: old is what was read (nil: absent),
// new what will be written (nil: removed).
type change struct {
	key      string // the work key
	old, new *entryRec
}

// derive sets u's counts and the instants its ReadyAt and due-time key derive from
// (freeAt, claimEnd, slot, firstDue) to what they will be once changes are written, from
// what u holds now. It reads the user's indexes, strongly consistent, only where a
// change removes the entry an instant came from, starting at that instant, and passes over
// the changed entries; so it costs a query or two for most writes, and none for many.
// limitsChanged says u.limits are not those slot was computed for.
func (x *Index) derive(ctx context.Context, u *userRec, changes []change, limitsChanged bool) error {
	skip := make(map[string]bool, len(changes))
	var oldFree, oldClaimed, oldAll, newAll int
	var newFree, newClaim, newDue []time.Time
	var freeTaken, claimTaken, dueTaken, claimsMoved bool
	for _, c := range changes {
		skip[c.key] = true
		o, n := c.old, c.new
		sameDue := o != nil && n != nil && o.e.DueAt.Equal(n.e.DueAt)
		if o != nil {
			oldAll++
			if o.claimed() {
				oldClaimed++
				claimTaken = claimTaken || o.until.Equal(u.claimEnd)
				claimsMoved = true
			} else {
				oldFree++
				freeTaken = freeTaken || o.e.DueAt.Equal(u.freeAt)
			}
			dueTaken = dueTaken || !sameDue && o.e.DueAt.Equal(u.firstDue)
		}
		if n != nil {
			newAll++
			if n.claimed() {
				newClaim = append(newClaim, n.until)
				claimsMoved = true
			} else {
				newFree = append(newFree, n.e.DueAt)
			}
			newDue = append(newDue, n.e.DueAt)
		}
	}
	restFree, restClaimed, restAll := u.entries-u.claims-oldFree, u.claims-oldClaimed, u.entries-oldAll
	needFree, needDue := freeTaken && restFree > 0, dueTaken && restAll > 0
	var restFreeAt, restFirstDue, restClaimEnd time.Time
	jobs := []func(context.Context) error{func(ctx context.Context) error {
		// One read of the due index gives both: the earliest entry and the earliest
		// unclaimed one, from the earliest DueAt on.
		if !needFree && !needDue {
			return nil
		}
		from := u.freeAt
		if needDue {
			from = u.firstDue
		}
		var err error
		restFirstDue, restFreeAt, err = x.firstDue(ctx, u.id, from, skip, needFree, needDue)
		return err
	}, func(ctx context.Context) error {
		if !claimTaken || restClaimed == 0 {
			return nil
		}
		var err error
		restClaimEnd, err = x.firstClaimEnd(ctx, u.id, u.claimEnd, skip)
		return err
	}}
	newClaims := restClaimed + len(newClaim)
	if claimsMoved || limitsChanged {
		jobs = append(jobs, func(ctx context.Context) error { return x.deriveSlot(ctx, u, newClaims, restClaimed, skip, newClaim) })
	}
	if err := parallel(ctx, len(jobs), func(ctx context.Context, i int) error { return jobs[i](ctx) }); err != nil {
		return err
	}
	u.freeAt = least(restFree, freeTaken, u.freeAt, restFreeAt, newFree)
	u.claimEnd = least(restClaimed, claimTaken, u.claimEnd, restClaimEnd, newClaim)
	// An entry whose DueAt stays does not take the earliest DueAt away: if it held it, it
	// still does.
	u.firstDue = least(restAll, dueTaken, u.firstDue, restFirstDue, newDue)
	u.entries = restAll + newAll
	u.claims = newClaims
	return nil
}

// least returns the least of adds and of the rest entries' instant: none when there are
// no rest entries, the stored least when no change took it, else what the index read gave.
func least(rest int, taken bool, stored, read time.Time, adds []time.Time) time.Time {
	var m time.Time
	switch {
	case rest <= 0:
	case !taken:
		m = stored
	default:
		m = read
	}
	for _, a := range adds {
		m = earlier(m, a)
	}
	return m
}

// firstDue reads user's due index from instant from, strongly consistent, and returns the
// DueAt of its first entry outside skip (when wantAll) and of its first unclaimed one
// (when wantFree); zero times for none.
func (x *Index) firstDue(ctx context.Context, user string, from time.Time, skip map[string]bool, wantFree, wantAll bool) (all, free time.Time, err error) {
	err = x.scanIndex(ctx, user, idxDue, attrLDue, from, true, len(skip)+2, wantFree, func(k string, m map[string]av) bool {
		if skip[restOf(k)] {
			return true
		}
		t, err := decTime(k)
		if err != nil {
			return false
		}
		if all.IsZero() {
			all = t
		}
		if free.IsZero() && m[attrToken] == nil {
			free = t
		}
		return wantFree && free.IsZero() || wantAll && all.IsZero()
	})
	return all, free, err
}

// firstClaimEnd reads user's claims index from instant from, strongly consistent, and
// returns the Until of its first claim outside skip, or the zero time.
func (x *Index) firstClaimEnd(ctx context.Context, user string, from time.Time, skip map[string]bool) (time.Time, error) {
	var found time.Time
	err := x.scanIndex(ctx, user, idxClaims, attrLClaim, from, true, len(skip)+1, false, func(k string, _ map[string]av) bool {
		if skip[restOf(k)] {
			return true
		}
		t, err := decTime(k)
		if err == nil {
			found = t
		}
		return false
	})
	return found, err
}

// deriveSlot sets u.slot: with MaxInFlight M > 0 and at least M claims, the M-th latest
// Until among the user's claims once the write is done — the rest, read from the claims
// index latest first, and adds.
func (x *Index) deriveSlot(ctx context.Context, u *userRec, claims, rest int, skip map[string]bool, adds []time.Time) error {
	m := u.limits.MaxInFlight
	u.slot = time.Time{}
	if m == 0 || claims < m {
		return nil
	}
	untils := slices.Clone(adds)
	var slot time.Time
	if rest > 0 {
		err := x.scanIndex(ctx, u.id, idxClaims, attrLClaim, time.Time{}, false, m+len(skip), false, func(k string, _ map[string]av) bool {
			if skip[restOf(k)] {
				return true
			}
			if t, err := decTime(k); err == nil {
				untils = append(untils, t)
			}
			return len(untils) < m+len(adds)
		})
		if err != nil {
			return err
		}
	}
	slices.SortFunc(untils, func(a, b time.Time) int { return b.Compare(a) })
	if len(untils) >= m {
		slot = untils[m-1]
	}
	u.slot = slot
	return nil
}

// scanIndex reads user's entries in local index, strongly consistent, from the instant
// from onwards (forward) or from the latest backwards, pages of about page items, and
// calls f with each one's index sort key and attributes until f returns false. With
// fetch, it also fetches each entry's claim token from the table.
func (x *Index) scanIndex(ctx context.Context, user, index, attr string, from time.Time, forward bool, page int, fetch bool, f func(key string, m map[string]av) bool) error {
	var e expr
	cond := e.n(attrPK) + " = " + e.v(sv(userPK(user)))
	if forward && !from.IsZero() {
		cond += " AND " + e.n(attr) + " >= " + e.v(sv(encTime(from)))
	}
	in := &dynamodb.QueryInput{
		IndexName: &index, KeyConditionExpression: &cond, ConsistentRead: ptr(true),
		ScanIndexForward: ptr(forward), Limit: ptr(int32(min(max(page, 1), 1000))),
	}
	attrs := []string{attr, attrSK}
	if fetch {
		attrs = append(attrs, attrToken)
	}
	pe := ""
	for i, a := range attrs {
		if i > 0 {
			pe += ", "
		}
		pe += e.n(a)
	}
	in.ProjectionExpression = &pe
	in.ExpressionAttributeNames, in.ExpressionAttributeValues = e.namesOrNil(), e.valuesOrNil()
	for {
		out, err := x.d.query(ctx, in)
		if err != nil {
			return err
		}
		for _, m := range out.Items {
			if !f((&item{m: m}).str(attr), m) {
				return nil
			}
		}
		if out.LastEvaluatedKey == nil {
			return nil
		}
		in.ExclusiveStartKey = out.LastEvaluatedKey
	}
}
