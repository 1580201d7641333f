package rotadynamo

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/rotaworks/rota/duework"
	"github.com/rotaworks/rota/internal/localstart"
	"github.com/rotaworks/rota/tenancy"
)

// The calls that end claims: Complete, CompleteMany, Unclaim, UnscheduleClaimed, and the
// ones that check them.

// ending is one item of a call that ends claims: its position in the call, the claim, and
// for a completion the entry to write.
type ending struct {
	at    int
	claim duework.Claim
	next  *duework.Entry // nil: hand the claim back (Unclaim)
	mine  bool           // a local start of the caller's, written started but never started
}

// Complete writes next and ends c while c is the entry's current claim, or returns
// duework.ErrClaimLost and writes nothing: CompleteMany of one item.
func (x *Index) Complete(ctx context.Context, tc tenancy.Context, c duework.Claim, next duework.Entry) error {
	errs, err := x.CompleteMany(ctx, []duework.Done{{Tenant: tc, Claim: c, Next: next}})
	if err != nil {
		return err
	}
	return errs[0]
}

// CompleteMany completes each item as Complete would, as if one after another. Per user,
// in parallel: a read of its item and of the entries named, then one TransactWriteItems of
// those entries, each conditional on its claim's token, and the user item, conditional on
// the version read (up to 99 entries each; a work key given twice goes in a later one, so
// it gets ErrClaimLost). A transaction refused because an item changed in between is
// read and tried again, so each item's outcome is decided on what is stored.
func (x *Index) CompleteMany(ctx context.Context, done []duework.Done) ([]error, error) {
	local := localstart.From(ctx)
	errs := make([]error, len(done))
	items := map[string][]ending{}
	var users []string
	for i, d := range done {
		if errs[i] = d.Validate(); errs[i] != nil {
			continue
		}
		u := d.Tenant.UserID()
		if items[u] == nil {
			users = append(users, u)
		}
		local.Take(d.Claim) // the holder ends it: no later StartClaims of it is local
		items[u] = append(items[u], ending{at: i, claim: d.Claim, next: &done[i].Next})
	}
	if err := x.endAll(ctx, users, items, errs); err != nil {
		return nil, interpret(ctx, "Index.CompleteMany", err)
	}
	return errs, nil
}

// Unclaim hands claims back unrun: each claim still current and not started ends and its
// entry stays as it is, visible at once; one no longer current gets duework.ErrClaimLost,
// one started duework.ErrClaimStarted. It is CompleteMany's machinery, with no entry to
// write; a start that comes between the read and the write wins, and the item is read
// again. A claim of the set of local starts ctx carries (see Claim) that no StartClaims
// under that set took is handed back: it was never started.
func (x *Index) Unclaim(ctx context.Context, claims []duework.Unclaim) ([]error, error) {
	local := localstart.From(ctx)
	var taken []duework.Claim
	errs := make([]error, len(claims))
	items := map[string][]ending{}
	var users []string
	for i, c := range claims {
		if errs[i] = c.Validate(); errs[i] != nil {
			continue
		}
		u := c.Tenant.UserID()
		if items[u] == nil {
			users = append(users, u)
		}
		mine, _ := local.Take(c.Claim)
		if mine {
			taken = append(taken, c.Claim)
		}
		items[u] = append(items[u], ending{at: i, claim: c.Claim, mine: mine})
	}
	if err := x.endAll(ctx, users, items, errs); err != nil {
		local.Return(taken)
		return nil, interpret(ctx, "Index.Unclaim", err)
	}
	return errs, nil
}

// endAll ends the claims of items, user by user in parallel, and sets each item's
// outcome in errs.
func (x *Index) endAll(ctx context.Context, users []string, items map[string][]ending, errs []error) error {
	return parallel(ctx, len(users), func(ctx context.Context, i int) error {
		pending := items[users[i]]
		for len(pending) > 0 {
			var round, later []ending
			seen := map[string]bool{}
			for _, it := range pending {
				wk := it.claim.Entry.WorkKey
				if seen[wk] || len(round) == maxPerTransaction {
					later = append(later, it)
					continue
				}
				seen[wk] = true
				round = append(round, it)
			}
			outcomes, err := x.endRound(ctx, users[i], round)
			if err != nil {
				return err
			}
			for j, it := range round {
				errs[it.at] = outcomes[j]
			}
			pending = later
		}
		return nil
	})
}

// endRound ends the claims of round (distinct work keys of user, at most
// maxPerTransaction) in one transaction and returns each one's outcome.
func (x *Index) endRound(ctx context.Context, user string, round []ending) ([]error, error) {
	var outcomes []error
	err := retry(ctx, func() error {
		outcomes = make([]error, len(round))
		wks := make([]string, len(round))
		for j, it := range round {
			wks[j] = it.claim.Entry.WorkKey
		}
		u, rs, err := x.read(ctx, user, true, wks)
		if err != nil {
			return err
		}
		var changes []change
		var actions []types.TransactWriteItem
		for j, it := range round {
			r := rs[wks[j]]
			if r == nil || !r.claimed() || r.token != it.claim.Token {
				outcomes[j] = claimLost(opOf(it), it.claim)
				continue
			}
			if it.next == nil && r.started && !it.mine {
				outcomes[j] = fmt.Errorf("rotadynamo: Index.Unclaim %q with token %d: %w", it.claim.Entry.WorkKey, it.claim.Token, duework.ErrClaimStarted)
				continue
			}
			c, a := endAction(r, it)
			changes, actions = append(changes, c), append(actions, a)
		}
		if len(changes) == 0 {
			return nil
		}
		if err := x.derive(ctx, u, changes, false); err != nil {
			return err
		}
		return x.commit(ctx, append(actions, u.write(x.bucket(user)).action()))
	})
	return outcomes, err
}

func opOf(it ending) string {
	if it.next == nil {
		return "Unclaim"
	}
	return "CompleteMany"
}

// endAction is the change and the write that end it's claim of the entry read as r: the
// entry next, unclaimed, for a completion; r as it is, unclaimed, for a hand-back. Either
// is conditional on the claim's token.
func endAction(r *entryRec, it ending) (change, types.TransactWriteItem) {
	if it.next != nil {
		n := &entryRec{e: *it.next}
		return change{key: r.e.WorkKey, old: r, new: n}, putAction(n.item(), tokenIs(r.token))
	}
	n := &entryRec{e: r.e}
	up := newUpdate(key(userPK(r.e.UserID), entrySK(r.e.WorkKey)))
	up.remove(attrToken).remove(attrUntil).remove(attrLClaim).cond(tokenIs(r.token))
	if it.mine { // written started by its Claim, never started: only its holder could start it
		up.remove(attrStarted)
	} else {
		up.cond(func(e *expr) string { return "attribute_not_exists(" + e.n(attrStarted) + ")" }) // a start since the read wins
	}
	return change{key: r.e.WorkKey, old: r, new: n}, up.action()
}

// UnscheduleClaimed removes tc's entry c.Entry.WorkKey while c is its current claim, and
// otherwise returns duework.ErrClaimLost and removes nothing.
func (x *Index) UnscheduleClaimed(ctx context.Context, tc tenancy.Context, c duework.Claim) error {
	if err := (duework.Unclaim{Tenant: tc, Claim: c}).Validate(); err != nil {
		return err
	}
	localstart.From(ctx).Take(c)
	err := x.remove(ctx, tc.UserID(), c.Entry.WorkKey, &c)
	return interpret(ctx, "Index.UnscheduleClaimed", err)
}
