package rotadynamo

import (
	"math"
	"math/big"
	"time"

	"github.com/rotaworks/rota/duework"
	"github.com/rotaworks/rota/internal/vocab"
)

// The flow-control arithmetic of duework.Index on exact integers: times as nanoseconds
// since the zero time, so that no Every or Burst overflows and every instant is kept to the
// nanosecond. It is pure; the user item's writes apply it.

// nanos returns t as nanoseconds since vocab.MinTime.
func nanos(t time.Time) *big.Int {
	n := big.NewInt(t.Unix() - minUnix)
	n.Mul(n, big.NewInt(int64(time.Second)))
	return n.Add(n, big.NewInt(int64(t.Nanosecond())))
}

var maxNanos = nanos(vocab.MaxTime)

// fromNanos inverts nanos, clamping to [vocab.MinTime, vocab.MaxTime].
func fromNanos(n *big.Int) time.Time {
	switch {
	case n.Sign() < 0:
		return vocab.MinTime
	case n.Cmp(maxNanos) > 0:
		return vocab.MaxTime
	}
	sec, nsec := new(big.Int).QuoRem(n, big.NewInt(int64(time.Second)), new(big.Int))
	return time.Unix(sec.Int64()+minUnix, nsec.Int64()).UTC()
}

// times returns k·d in nanoseconds.
func times(k int, d time.Duration) *big.Int {
	return new(big.Int).Mul(big.NewInt(int64(k)), big.NewInt(int64(d)))
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// earlier returns the earlier of a and b, where the zero time means "none".
func earlier(a, b time.Time) time.Time {
	switch {
	case a.IsZero():
		return b
	case b.IsZero():
		return a
	case b.Before(a):
		return b
	}
	return a
}

// rateInstant is when a user with rate mark mark may next be served under l: mark −
// (b−1)·Every, b = max(Burst, 1), at least the zero time; the zero time without a rate.
func rateInstant(l duework.Limits, mark time.Time) time.Time {
	if l.Every <= 0 {
		return time.Time{}
	}
	return fromNanos(new(big.Int).Sub(nanos(mark), times(max(l.Burst, 1)-1, l.Every)))
}

// allowance is how many items the rate lets a user with mark mark be claimed at now:
// math.MaxInt without a rate, b when mark is not after now, else max(0, b −
// ceil((mark − now)/Every)).
func allowance(l duework.Limits, mark, now time.Time) int {
	if l.Every <= 0 {
		return math.MaxInt
	}
	b := max(l.Burst, 1)
	if !mark.After(now) {
		return b
	}
	d := new(big.Int).Sub(nanos(mark), nanos(now))
	e := big.NewInt(int64(l.Every))
	q := new(big.Int).Div(d.Add(d, new(big.Int).Sub(e, big.NewInt(1))), e) // the ceiling
	if q.Cmp(big.NewInt(int64(b))) >= 0 {
		return 0
	}
	return b - int(q.Int64())
}

// room is how many more of a user's entries its limits let a Claim at now take, given
// its in-flight count then.
func room(l duework.Limits, mark, now time.Time, inFlight int) int {
	r := math.MaxInt
	if l.MaxInFlight > 0 {
		r = max(0, l.MaxInFlight-inFlight)
	}
	return min(r, allowance(l, mark, now))
}

// serve applies to u a Claim at now that claimed k ≥ 1 of its entries, its Turn before
// the call being turn: LastServed becomes max(LastServed, now); with Every = E > 0 the
// rate mark becomes max(mark, now) + k·E (at most vocab.MaxTime); the stride position
// moves as duework.Index's Flow control says.
func serve(u *userRec, k int, turn, now time.Time) {
	w := u.limits.EffectiveWeight()
	if k < w && !u.lastServed.IsZero() && u.lastServed.Before(now) {
		// The stride starts no earlier than now − 3w·(now − LastServed).
		gap := new(big.Int).Sub(nanos(now), nanos(u.lastServed))
		turn = later(turn, fromNanos(new(big.Int).Sub(nanos(now), gap.Mul(gap, big.NewInt(3*int64(w))))))
	}
	u.lastServed = later(u.lastServed, now)
	if e := u.limits.Every; e > 0 {
		u.mark = fromNanos(new(big.Int).Add(nanos(later(u.mark, now)), times(k, e)))
	}
	if k >= w || !turn.Before(now) {
		u.pass = later(u.pass, now)
		return
	}
	micro := big.NewInt(int64(time.Microsecond))
	l := new(big.Int).Div(new(big.Int).Sub(nanos(now), nanos(turn)), micro)
	s := new(big.Int).Div(new(big.Int).Mul(l, big.NewInt(int64(k))), big.NewInt(int64(w)))
	u.pass = later(u.pass, fromNanos(new(big.Int).Add(nanos(turn), s.Mul(s, micro))))
}
