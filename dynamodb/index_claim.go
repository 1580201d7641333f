package rotadynamo

import (
	"context"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/rotaworks/rota/duework"
	"github.com/rotaworks/rota/internal/localstart"
	"github.com/rotaworks/rota/internal/vocab"
)

// userKeys are the keys of one Claim that name one user: the first occurrence of each
// work key, in the order of keys, with its position there.
type userKeys struct {
	user string
	at   []int
	wks  []string
}

// byUser groups keys by user, in the order each user first appears, skipping keys that
// are not valid and later occurrences of a key (the first claims it, so a later one would
// not be visible).
func byUser(keys []duework.Key) []*userKeys {
	var out []*userKeys
	users := map[string]*userKeys{}
	seen := map[duework.Key]bool{}
	for i, k := range keys {
		if seen[k] || !vocab.ValidName(k.UserID) || !vocab.ValidName(k.WorkKey) {
			continue
		}
		seen[k] = true
		uk := users[k.UserID]
		if uk == nil {
			uk = &userKeys{user: k.UserID}
			users[k.UserID] = uk
			out = append(out, uk)
		}
		uk.at = append(uk.at, i)
		uk.wks = append(uk.wks, k.WorkKey)
	}
	return out
}

// Claim claims those of keys that are visible at now and that their users' limits allow,
// until until, and returns the claims in the order of keys.
//
// Per user, in parallel: a read of its item and of the entries named (and, under a cap
// with claims ended, a count of those in flight), then one TransactWriteItems of those
// entries and the user item, conditional on the version read, so the cap and the rate are
// enforced against what is stored whoever claims at once; a user whose item changed in
// between is read again. The user item takes its LastServed, stride position, rate mark
// and next Turn, ends its hold and hands out the tokens: each claim's token is the user's
// next, so none is ever handed out twice for an entry, even one removed and scheduled
// again. More than 99 keys of one user go in several transactions, each atomic.
//
// When ctx carries the set of local starts of a bridge.Runner (package
// internal/localstart), whose items never leave its process, the claims are written
// started and put in that set: StartClaims and Unclaim under that set treat them as not
// started yet, and every other call finds them started (see StartClaims).
func (x *Index) Claim(ctx context.Context, keys []duework.Key, now, until time.Time) ([]duework.Claim, error) {
	if err := vocab.ClaimWindow(duework.ErrInvalid, now, until); err != nil {
		return nil, err
	}
	local := localstart.From(ctx)
	users := byUser(keys)
	got := make([]*duework.Claim, len(keys))
	err := parallel(ctx, len(users), func(ctx context.Context, i int) error {
		uk := users[i]
		for start := 0; start < len(uk.wks); start += maxPerTransaction {
			end := min(start+maxPerTransaction, len(uk.wks))
			cs, err := x.claimRun(ctx, uk.user, uk.wks[start:end], now, until, local != nil)
			if err != nil {
				return err
			}
			for j, c := range cs {
				got[uk.at[start+j]] = c
			}
		}
		return nil
	})
	if err != nil {
		return nil, interpret(ctx, "Index.Claim", err)
	}
	var out []duework.Claim
	for _, c := range got {
		if c != nil {
			out = append(out, *c)
		}
	}
	local.Add(now, out)
	return out, nil
}

// claimRun claims those of user's entries wks (distinct, at most maxPerTransaction) that
// are visible at now and within its limits, in one transaction, and returns the claims by
// position in wks (nil for those skipped); with started, the claims are written started.
func (x *Index) claimRun(ctx context.Context, user string, wks []string, now, until time.Time, started bool) ([]*duework.Claim, error) {
	var out []*duework.Claim
	err := retry(ctx, func() error {
		out = make([]*duework.Claim, len(wks))
		u, rs, err := x.read(ctx, user, true, wks)
		if err != nil || u.entries == 0 || u.paused(now) {
			return err
		}
		free := len(wks)
		if u.limits.MaxInFlight > 0 || u.limits.Every > 0 {
			n, err := x.inFlight(ctx, u, now)
			if err != nil {
				return err
			}
			free = room(u.limits, u.mark, now, n)
		}
		turn := u.turn()
		var changes []change
		var actions []types.TransactWriteItem
		for i, wk := range wks {
			r := rs[wk]
			if r == nil || !r.visible(now) || len(changes) == free {
				continue
			}
			u.tokens++
			n := &entryRec{e: r.e, token: token(user, u.tokens), until: until}
			changes = append(changes, change{key: wk, old: r, new: n})
			actions = append(actions, claimAction(r, n, started))
			out[i] = &duework.Claim{Entry: normEntry(r.e), Token: n.token, Until: norm(until)}
		}
		if len(changes) == 0 {
			return nil
		}
		if err := x.derive(ctx, u, changes, false); err != nil {
			return err
		}
		serve(u, len(changes), turn, now)
		if !u.pauseCounts() { // served at or after its end: it never counts again
			u.pausedUntil, u.pauseReason = time.Time{}, ""
		}
		return x.commit(ctx, append(actions, u.write(x.bucket(user)).remove(attrHeld).action()))
	})
	return out, err
}

// saltBits is how many low bits of a token hold a hash of its user, so that a token of one
// user's claim is almost never one of another's: a claim naming one user's entry with
// another's token is refused as forged. The counter above them allows 2^39 claims per
// user.
const saltBits = 24

// token is the n-th claim token of user: n in the high bits, a hash of the user ID in the
// low ones. Tokens of one user only grow, so none is handed out twice for any of its
// entries.
func token(user string, n uint64) uint64 {
	return n<<saltBits | uint64(bucketOf(user, 1<<saltBits))
}

// claimAction writes claim n of the entry read as old: its token, its Until and its place
// in the claims index, under the token it had, and started or not.
func claimAction(old, n *entryRec, started bool) types.TransactWriteItem {
	up := newUpdate(key(userPK(n.e.UserID), entrySK(n.e.WorkKey)))
	up.set(attrToken, uv(n.token)).set(attrUntil, tv(n.until)).set(attrLClaim, sv(timeKey(n.until, n.e.WorkKey)))
	if started {
		up.set(attrStarted, bv(true))
	} else {
		up.remove(attrStarted)
	}
	up.cond(tokenIs(old.token))
	return up.action()
}

// tokenIs is the condition that an entry exists with the current claim token t (0:
// unclaimed).
func tokenIs(t uint64) func(e *expr) string {
	return func(e *expr) string {
		if t == 0 {
			return "attribute_exists(" + e.n(attrPK) + ") AND attribute_not_exists(" + e.n(attrToken) + ")"
		}
		return e.n(attrToken) + " = " + e.v(uv(t))
	}
}
