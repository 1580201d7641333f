package postgres

import (
	"math/big"
	"time"

	"github.com/rotaworks/rota/internal/vocab"
)

// The SQL of flow control: expressions over a user's row of rota_users that the
// statements of the Index share, so that each rule of duework.Index is written once.
//
// Times in rota_users are timestamptz, to the microsecond, like every stored time. The
// rate mark is numeric nanoseconds since the Unix epoch, so that arithmetic with an Every
// that is not a whole number of microseconds loses nothing; the instants the rate allows
// are rounded up to the microsecond when they become a Turn, which, the server's now being
// whole microseconds, makes a user ready exactly when the rate allows it. Every division
// is an integer one (div and mod), so no rounding of numeric division can move a result.

// nsLiteral is t as nanoseconds since the Unix epoch, a SQL numeric literal.
func nsLiteral(t time.Time) string {
	ns := new(big.Int).Mul(big.NewInt(t.Unix()), big.NewInt(int64(time.Second)))
	return ns.Add(ns, big.NewInt(int64(t.Nanosecond()))).String()
}

var (
	// minNs and maxNs are vocab.MinTime and MaxTime in nanoseconds; maxMicroNs is the last
	// whole microsecond of MaxTime in nanoseconds, and maxMicroTS the same as a timestamptz.
	minNs      = nsLiteral(vocab.MinTime)
	maxNs      = nsLiteral(vocab.MaxTime)
	maxMicroNs = nsLiteral(vocab.MaxTime.Truncate(time.Microsecond))
	maxMicroTS = "timestamptz '" + vocab.MaxTime.Format("2006-01-02 15:04:05.999999") + "+00'"
	minTS      = "timestamptz '0001-01-01 00:00:00+00'"
)

// nanosOf is now as the server keeps it — truncated to the microsecond, as pgx sends it —
// in nanoseconds since the Unix epoch: the statements take it as a numeric argument, so
// that it is computed once per call rather than once per row.
func nanosOf(now time.Time) string {
	return nsLiteral(now.Truncate(time.Microsecond))
}

// microsBetween is a − b in whole microseconds, both timestamptz, as a bigint.
func microsBetween(a, b string) string {
	return "(extract(epoch FROM " + a + " - " + b + ") * 1000000)::bigint"
}

// micros is the bigint us as an interval of that many microseconds, exactly: interval
// arithmetic goes through float8, so the seconds and the microseconds are multiplied
// apart, each well within float8's exact integers.
func micros(us string) string {
	return "((" + us + ") / 1000000 * interval '1 second' + (" + us + ") % 1000000 * interval '1 microsecond')"
}

// ceilDiv is ceil(a / b) for numeric integers a and b > 0, by integer division: div
// truncates toward zero, so a positive remainder adds one.
func ceilDiv(a, b string) string {
	return "(div(" + a + ", " + b + ") + CASE WHEN mod(" + a + ", " + b + ") > 0 THEN 1 ELSE 0 END)"
}

// tsCeil is the nanosecond instant x as a timestamptz, rounded up to the microsecond and
// no later than MaxTime's last microsecond; NULL (no bound) before duework.MinTime.
func tsCeil(x string) string {
	return "CASE WHEN " + x + " < " + minNs + " THEN NULL WHEN " + x + " > " + maxMicroNs + " THEN " + maxMicroTS +
		" ELSE timestamptz '1970-01-01 00:00:00+00' + " + micros(ceilDiv(x, "1000")+"::bigint") + " END"
}

// burstOf is max(Burst, 1), the items a rate-limited user may be served at once.
func burstOf(burst string) string { return "greatest(" + burst + ", 1)" }

// rateBound is the rate's part of ReadyAt in nanoseconds: mark − (b−1)·every, the instant
// the user's next item is allowed; NULL without a rate or before the first claim under one.
func rateBound(mark, every, burst string) string {
	return "CASE WHEN " + every + " > 0 AND " + mark + " IS NOT NULL THEN " + mark + " - (" + burstOf(burst) + " - 1)::numeric * " + every + " END"
}

// rateReadyAt is rateBound as a timestamptz (tsCeil).
func rateReadyAt(mark, every, burst string) string {
	return "CASE WHEN " + every + " > 0 AND " + mark + " IS NOT NULL THEN " +
		tsCeil("("+mark+" - ("+burstOf(burst)+" - 1)::numeric * "+every+")") + " END"
}

// rateAllowance is how many items the rate lets the user be claimed at the instant nowNs
// (nanoseconds): b when the mark has passed, else max(0, b − ceil((mark − now)/every));
// NULL without a rate.
func rateAllowance(mark, every, burst, nowNs string) string {
	return "CASE WHEN " + every + " > 0 THEN CASE WHEN " + mark + " IS NULL OR " + mark + " <= " + nowNs +
		" THEN " + burstOf(burst) + "::numeric ELSE greatest(0, " + burstOf(burst) + " - " +
		ceilDiv("("+mark+" - "+nowNs+")", every+"::numeric") + ") END END"
}

// slotAllowance is how many more claims the in-flight cap m lets the user have when
// inFlight are in flight; NULL without a cap.
func slotAllowance(m, inFlight string) string {
	return "CASE WHEN " + m + " > 0 THEN greatest(0, " + m + " - " + inFlight + ") END"
}

// newMark is the rate mark after a claim of k items at nowNs: max(mark, now) + k·every,
// saturating at MaxTime; the mark is left alone without a rate.
func newMark(mark, every, k, nowNs string) string {
	return "CASE WHEN " + every + " > 0 THEN least(greatest(" + mark + ", " + nowNs + ") + " + k + "::numeric * " + every + ", " +
		maxNs + ") ELSE " + mark + " END"
}

// newPass is the stride position after a claim of k items at now by a user whose stride
// starts at t (its Turn before the call, raised as strideStart says): max(pass, now) for
// weight 1 (so that a user always of weight 1 has pass = LastServed), when k ≥ weight or
// when t is not before now; otherwise max(pass, t + floor(L·k/weight) µs), L = now − t in
// whole microseconds.
func newPass(pass, t, weight, k, now string) string {
	return "CASE WHEN " + weight + " <= 1 OR " + k + " >= " + weight + " OR " + t + " >= " + now +
		" THEN greatest(" + pass + ", " + now + ") ELSE greatest(" + pass + ", " + t + " + " +
		micros("div("+microsBetween(now, t)+"::numeric * "+k+", "+weight+")::bigint") + ") END"
}

// strideSlack is how many times its steady lag, weight × the time since it was last
// served, a weighted user's stride may start behind now.
const strideSlack = "3"

// strideStart is where a weighted user's stride starts, for newPass (which needs it only
// when k < weight): its Turn, but, when it was served before now, no earlier than
// now − 3·weight·(now − LastServed), and never before duework.MinTime; so a user whose Turn
// fell far behind (an outage, an old backlog) catches up in a few serves.
func strideStart(turn, served, weight, now string) string {
	lag := strideSlack + "::numeric * " + weight + " * " + microsBetween(now, served)
	return "CASE WHEN " + served + " IS NOT NULL AND " + served + " < " + now + " THEN greatest(" + turn + ", CASE WHEN " +
		lag + " < " + microsBetween(now, minTS) + " THEN " + now + " - " + micros("("+lag+")::bigint") + " ELSE " + minTS + " END) ELSE " +
		turn + " END"
}

// turnOf is a user's Turn: max(ReadyAt, pass), ReadyAt the greatest of the first instant
// an entry is visible (the lesser of free and claimEnd), slot, the rate's instant and the
// pause's end while it counts (pauseOf), and pass its stride position; NULL without
// entries. greatest and least skip NULLs.
func turnOf(free, claimEnd, slot, mark, every, burst, pass, paused, served string) string {
	return "CASE WHEN " + free + " IS NOT NULL OR " + claimEnd + " IS NOT NULL THEN greatest(least(" + free + ", " + claimEnd + "), " +
		slot + ", " + rateReadyAt(mark, every, burst) + ", " + pauseOf(paused, served) + ", " + pass + ") END"
}

// pauseOf is a pause's part of ReadyAt: its end paused while it counts, that is while it
// is after served (LastServed, NULL for never); NULL otherwise.
func pauseOf(paused, served string) string {
	return "CASE WHEN " + paused + " > coalesce(" + served + ", '-infinity') THEN " + paused + " END"
}

// The probes of a user's claims, each a keyset range of rota_due_claimed_user (see
// "Per-user reads" in index.go), by greatest(due_at, claim_until), which is the claim's
// end (the CHECK rota_due_claim_after_due).
const claimedRange = `(d.user_id, greatest(d.due_at, d.claim_until))`

// slotAt is the instant the user's in-flight count falls below its cap m: the m-th latest
// end among its claims, read backwards from the latest; NULL with fewer than m claims or
// without a cap. It reads at most m index entries.
func slotAt(user, m string) string {
	return "CASE WHEN " + m + " > 0 THEN (SELECT greatest(d.due_at, d.claim_until) FROM rota_due d WHERE " + claimedRange +
		" BETWEEN (" + user + ", '-infinity') AND (" + user + ", 'infinity') AND d.claim_until IS NOT NULL" +
		" ORDER BY d.user_id DESC, greatest(d.due_at, d.claim_until) DESC OFFSET " + m + " - 1 LIMIT 1) END"
}

// inFlight is the user's in-flight count at now: its claims that end after now. It reads
// one index entry per claim in flight. The subquery is ordered as the index is so that,
// run with sorts off (sqlSortOff), no other index can serve it: every other path would
// have to sort the rows, and an unordered count could otherwise walk every claim of every
// user (rota_due_claimed) or a user's whole backlog (the primary key), as statistics
// happen to say.
func inFlight(user, now string) string {
	return "(SELECT count(*) FROM (SELECT 1 FROM rota_due d WHERE " + claimedRange + " > (" + user + ", " + now + ") AND " +
		claimedRange + " <= (" + user + ", 'infinity') AND d.claim_until IS NOT NULL ORDER BY d.user_id, greatest(d.due_at, d.claim_until)) f)"
}

// sqlSortOff turns sorts off, after sqlPlanSettings, for the batches whose statements
// count claims in flight (Ready, Claim, User): see inFlight. Each of their other sorts is
// of a handful of rows that no index could deliver in order, so it stays as it is.
const sqlSortOff = `, set_config('enable_sort', 'off', true)`

// pausedAt is whether a user is paused at now: its pause counts and ends after now.
func pausedAt(paused, served, now string) string {
	return "coalesce(" + paused + " > " + now + " AND " + paused + " > coalesce(" + served + ", '-infinity'), false)"
}
