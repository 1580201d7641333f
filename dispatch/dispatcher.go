package dispatch

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/rotaworks/rota/duework"
)

// Dispatcher hands out fair batches of due work from a duework.Index: each Dispatch call is
// one cycle. It holds no state between cycles besides its configuration — who was served
// when lives in the index (Head.LastServed), so several Dispatchers may share one index.
// It is safe for concurrent use as far as its Index and LaneFor are.
type Dispatcher struct {
	idx      duework.Index
	lanes    []LaneCapacity
	laneIdx  map[Lane]int
	global   int
	laneFor  LaneFor
	claimFor time.Duration
	perUser  int // the largest PerUserLimit: no user can get more in one cycle
	obs      Observer
}

// New returns a Dispatcher over idx, or an error wrapping ErrInvalidConfig that names every
// bad field (see Config.Validate) when idx is nil or cfg is invalid. New copies cfg.Lanes.
func New(idx duework.Index, cfg Config) (*Dispatcher, error) {
	err := cfg.Validate()
	if idx == nil {
		err = errors.Join(fmt.Errorf("%w: idx must not be nil", ErrInvalidConfig), err)
	}
	if err != nil {
		return nil, err
	}
	d := &Dispatcher{
		idx:      idx,
		lanes:    slices.Clone(cfg.Lanes),
		laneIdx:  make(map[Lane]int, len(cfg.Lanes)),
		global:   cfg.GlobalBatchLimit,
		laneFor:  cfg.LaneFor,
		claimFor: cfg.ClaimFor,
		obs:      cfg.Observer,
	}
	for i, lc := range d.lanes {
		d.laneIdx[lc.Lane] = i
		d.perUser = max(d.perUser, lc.PerUserLimit)
	}
	return d, nil
}

// Dispatch runs one cycle at now and returns what it claimed and what it could not hand out.
//
// In order:
//
//  1. Index.DueHeads(now, p), p the largest PerUserLimit: one head per user with due work,
//     holding at most p entries — no user can get more in one cycle, so a deeper backlog is
//     only More.
//  2. LaneFor, once per user with due work (never cached across cycles: plans change). An
//     error, or a lane that Config.Lanes does not hold (ErrUnknownLane), puts the user in
//     Batch.Unrouted with the reason, sorted by UserID; its work stays due and it is shed.
//  3. Select: the fair batch (rules 1–4, see Select).
//  4. Index.Claim of the selected keys, until now + ClaimFor, in one call. An entry that
//     another dispatcher claimed in the meantime is counted in its lane's LostClaims, is not
//     replaced by other work this cycle and does not make its user shed: it is being handled
//     elsewhere. So Batch.ShedUserIDs is exactly Select's.
//
// Batch.Items keep Select's order (highest lane first, each lane in its fair order) and
// Batch.Lanes reports every configured lane in Config order.
//
// Errors: an error from DueHeads, a cancelled ctx after the lanes were resolved, or an
// error from Claim returns a zero Batch and the error. Nothing is lost either way: before
// Claim nothing was claimed; Claim is a single call, so an Index whose Claim is atomic (as
// the contract asks) claimed nothing either, and any claim a failed call did leave behind
// ends at now + ClaimFor, when the entry is due again. An Index that returns one user in two
// heads breaks its contract and gets an error, not a batch.
//
// Cost: DueHeads, one LaneFor per user with due work, Select and one Claim — it grows with
// the number of users with due work and the batch, never with any user's backlog (rule 8).
//
// With a Config.Observer, Dispatch is [Dispatcher.Cycle] and the observer is told about the
// cycle before Dispatch returns; without one, nothing is built for it.
func (d *Dispatcher) Dispatch(ctx context.Context, now time.Time) (Batch, error) {
	if d.obs != nil {
		info, err := d.Cycle(ctx, now)
		return info.Batch, err
	}
	b, _, err := d.dispatch(ctx, now, false)
	return b, err
}

// dispatch is one cycle; with withShed it also returns the lane of every shed user.
func (d *Dispatcher) dispatch(ctx context.Context, now time.Time, withShed bool) (Batch, []ShedUser, error) {
	heads, err := d.idx.DueHeads(ctx, now, d.perUser)
	if err != nil {
		return Batch{}, nil, fmt.Errorf("dispatch: Index.DueHeads: %w", err)
	}
	if user, dup := duplicateUser(heads); dup {
		return Batch{}, nil, fmt.Errorf("dispatch: Index.DueHeads returned two heads for user %q", user)
	}

	batch := Batch{Lanes: make([]LaneReport, len(d.lanes))}
	for i, lc := range d.lanes {
		batch.Lanes[i].Lane = lc.Lane
	}
	laneOf := make(map[string]Lane, len(heads))
	for i := range heads {
		h := &heads[i]
		if len(h.Due) == 0 && !h.More {
			continue
		}
		lane, err := d.laneFor(ctx, h.UserID)
		if err != nil {
			batch.Unrouted = append(batch.Unrouted, Unrouted{UserID: h.UserID, Err: fmt.Errorf("dispatch: LaneFor(%q): %w", h.UserID, err)})
			continue
		}
		li, ok := d.laneIdx[lane]
		if !ok {
			batch.Unrouted = append(batch.Unrouted, Unrouted{UserID: h.UserID, Err: fmt.Errorf("%w %q for user %q", ErrUnknownLane, lane, h.UserID)})
			continue
		}
		laneOf[h.UserID] = lane
		batch.Lanes[li].Users++
	}
	slices.SortFunc(batch.Unrouted, func(a, b Unrouted) int { return strings.Compare(a.UserID, b.UserID) })
	if err := ctx.Err(); err != nil {
		return Batch{}, nil, fmt.Errorf("dispatch: %w", err)
	}

	// Select, read in place: the selected entries are not copied out of the heads.
	sel := pickFair(SelectInput{Heads: heads, LaneOf: laneOf, Lanes: d.lanes, GlobalBatchLimit: d.global})
	batch.ShedUserIDs = sel.shed
	var shed []ShedUser
	if withShed && len(sel.shed) > 0 {
		shed = make([]ShedUser, len(sel.shed))
	}
	for i, u := range sel.shed {
		lane, ok := laneOf[u]
		if ok {
			batch.Lanes[d.laneIdx[lane]].Shed++
		}
		if shed != nil {
			shed[i] = ShedUser{UserID: u, Lane: lane}
		}
	}
	if len(sel.picks) == 0 {
		return batch, shed, nil
	}

	keys := make([]duework.Key, len(sel.picks))
	for i, pk := range sel.picks {
		keys[i] = sel.entry(pk).Key()
	}
	claims, err := d.idx.Claim(ctx, keys, now, now.Add(d.claimFor))
	if err != nil {
		return Batch{}, nil, fmt.Errorf("dispatch: Index.Claim: %w", err)
	}
	// Claims are looked up by key, the last one of a key winning (so an Index that breaks
	// Claim's contract cannot misplace them); the map holds indexes into claims, not the
	// claims, which a map would store out of line, one allocation each.
	at := make(map[duework.Key]int, len(claims))
	for j, c := range claims {
		at[c.Entry.Key()] = j
	}
	batch.Items = make([]Item, 0, len(claims))
	for i, pk := range sel.picks {
		lane := d.lanes[pk.lane].Lane
		li := d.laneIdx[lane]
		j, ok := at[keys[i]]
		if !ok {
			batch.Lanes[li].LostClaims++
			continue
		}
		batch.Items = append(batch.Items, Item{Claim: claims[j], Lane: lane})
		batch.Lanes[li].Dispatched++
	}
	return batch, shed, nil
}
