package rotadynamo

import (
	"context"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/rotaworks/rota/duework"
	"github.com/rotaworks/rota/internal/localstart"
	"github.com/rotaworks/rota/internal/vocab"
	"github.com/rotaworks/rota/tenancy"
)

// Pauses, and the claims that start once.

// Pause keeps tc's user from being served before until: its stored pause becomes the
// later of the stored one and until, with the later's reason (reason on a tie). A user the
// index does not store yet is stored. A read of the user item and one conditional write
// of it, which moves the user in its queue and adds it to the paused index; none when the
// stored pause already ends later.
func (x *Index) Pause(ctx context.Context, tc tenancy.Context, until time.Time, reason string) error {
	if err := tc.Check(); err != nil {
		return err
	}
	if err := (duework.UserPause{UserID: tc.UserID(), Reason: reason, Until: until}).Validate(); err != nil {
		return err
	}
	err := retry(ctx, func() error {
		u, err := x.readUser(ctx, tc.UserID())
		if err != nil || until.Before(u.pausedUntil) {
			return err
		}
		u.pausedUntil, u.pauseReason = until, reason
		return x.commit(ctx, []types.TransactWriteItem{u.write(x.bucket(u.id)).action()})
	})
	return interpret(ctx, "Index.Pause", err)
}

// Resume ends tc's user's pause at once: a read of the user item and, when its pause
// counts, one conditional write of it. A user without a pause that counts, or not stored,
// is not an error and nothing is written.
func (x *Index) Resume(ctx context.Context, tc tenancy.Context) error {
	if err := tc.Check(); err != nil {
		return err
	}
	err := retry(ctx, func() error {
		u, err := x.readUser(ctx, tc.UserID())
		if err != nil || !u.pauseCounts() {
			return err
		}
		u.pausedUntil, u.pauseReason = time.Time{}, ""
		return x.commit(ctx, []types.TransactWriteItem{u.write(x.bucket(u.id)).action()})
	})
	return interpret(ctx, "Index.Resume", err)
}

// Paused returns, in UserID order, up to limit of the users paused at now whose IDs sort
// after after, with their pauses. It merges the buckets of the paused index, which holds
// each pause with the user's LastServed, eventually consistent, and passes over the pauses
// that no longer count or have ended at now (a Claim of the user removes them).
func (x *Index) Paused(ctx context.Context, now time.Time, after string, limit int) ([]duework.UserPause, error) {
	if after != "" {
		if err := vocab.Name(duework.ErrInvalid, "after", after); err != nil {
			return nil, err
		}
	}
	if err := vocab.Limit(duework.ErrInvalid, "limit", limit); err != nil {
		return nil, err
	}
	if err := vocab.Time(duework.ErrInvalid, "now", now); err != nil {
		return nil, err
	}
	hashes := make([]string, x.buckets)
	for b := range hashes {
		hashes[b] = pausedKey(b)
	}
	op := ""
	if after != "" {
		op = ">"
	}
	mg := newMerge(x.d, idxPaused, attrPausedKey, attrPausedSK, hashes, op, after, limit+1)
	var out []duework.UserPause
	for len(out) < limit {
		it, ok, err := mg.next(ctx)
		if err != nil {
			return nil, interpret(ctx, "Index.Paused", err)
		}
		if !ok {
			break
		}
		u, err := readUserRec(it.sk, it.m)
		if err != nil {
			return nil, err
		}
		if u.paused(now) {
			out = append(out, duework.UserPause{UserID: u.id, Reason: u.pauseReason, Until: norm(u.pausedUntil)})
		}
	}
	return out, nil
}

// StartClaims marks started each claim that is current, its token and Until both the
// claim's, and not started yet, as if one after another. Each is one conditional write of
// its entry, in parallel (a claim given twice is tried after the first's outcome; one whose
// entry a transaction is writing at that moment is tried again); one refused is read to
// tell ErrClaimStarted from ErrClaimLost. It writes nothing else: the
// user's item is untouched.
//
// A claim of the set of local starts ctx carries (see Claim) is started once, by the
// first StartClaims under that set, with no write while the set's clock reads a time
// before its Until: no other process can have claimed its entry meanwhile, nor started
// it. After its Until it is started by a write, if it is still current. Without the set,
// such a claim is found started.
func (x *Index) StartClaims(ctx context.Context, claims []duework.Unclaim) ([]error, error) {
	local := localstart.From(ctx)
	errs := make([]error, len(claims))
	mine := make([]bool, len(claims))
	var taken []duework.Claim
	byKey := map[duework.Key][]int{}
	var keys []duework.Key
	for i, c := range claims {
		if errs[i] = c.Validate(); errs[i] != nil {
			continue
		}
		var live bool
		if mine[i], live = local.Take(c.Claim); mine[i] {
			taken = append(taken, c.Claim)
		}
		if live {
			continue // started here: errs[i] stays nil
		}
		k := c.Claim.Entry.Key()
		if byKey[k] == nil {
			keys = append(keys, k)
		}
		byKey[k] = append(byKey[k], i)
	}
	err := parallel(ctx, len(keys), func(ctx context.Context, i int) error {
		for _, at := range byKey[keys[i]] {
			var err error
			if errs[at], err = x.start(ctx, claims[at].Claim, mine[at]); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		local.Return(taken) // the call reports none of them started
		return nil, interpret(ctx, "Index.StartClaims", err)
	}
	return errs, nil
}

// start marks c started if it is the current claim of its entry, with its Until, and not
// started — or, when c is a local start of the caller's (mine), whatever its mark — and
// returns the outcome: nil, ErrClaimStarted or ErrClaimLost.
func (x *Index) start(ctx context.Context, c duework.Claim, mine bool) (error, error) {
	up := newUpdate(key(userPK(c.Entry.UserID), entrySK(c.Entry.WorkKey))).set(attrStarted, bv(true))
	up.cond(func(e *expr) string {
		current := e.n(attrToken) + " = " + e.v(uv(c.Token)) + " AND " + e.n(attrUntil) + " = " + e.v(tv(c.Until))
		if mine {
			return current
		}
		return current + " AND attribute_not_exists(" + e.n(attrStarted) + ")"
	})
	err := retry(ctx, func() error { _, err := x.d.update(ctx, up.input()); return err })
	switch {
	case err == nil:
		return nil, nil
	case !conditionFailed(err):
		return nil, err
	}
	rs, err := x.readEntries(ctx, c.Entry.UserID, []string{c.Entry.WorkKey})
	if err != nil {
		return nil, err
	}
	if r := rs[c.Entry.WorkKey]; !mine && r != nil && r.claimed() && r.token == c.Token && r.until.Equal(c.Until) && r.started {
		return fmt.Errorf("rotadynamo: Index.StartClaims %q with token %d: %w", c.Entry.WorkKey, c.Token, duework.ErrClaimStarted), nil
	}
	return fmt.Errorf("rotadynamo: Index.StartClaims %q with token %d: %w", c.Entry.WorkKey, c.Token, duework.ErrClaimLost), nil
}
