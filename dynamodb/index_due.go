package rotadynamo

import (
	"cmp"
	"container/heap"
	"context"
	"strings"
	"time"

	"github.com/rotaworks/rota/duework"
	"github.com/rotaworks/rota/internal/vocab"
)

// DueBefore returns at most limit entries visible at now, ordered by (DueAt, UserID,
// WorkKey), whatever the users' limits and pauses.
//
// It merges the buckets of the due-time index, which holds every user with entries by its
// earliest DueAt, and brings users in in that order while one could hold the next entry:
// for each, a strongly consistent read of its due index up to now, passing over its
// claims in flight. So it costs what it returns, a read of each user it brings in, and the
// claims in flight of those users; the index read is eventually consistent.
func (x *Index) DueBefore(ctx context.Context, now time.Time, limit int) ([]duework.Entry, error) {
	if err := vocab.Time(duework.ErrInvalid, "now", now); err != nil {
		return nil, err
	}
	if err := vocab.Limit(duework.ErrInvalid, "limit", limit); err != nil {
		return nil, err
	}
	out, err := x.dueBefore(ctx, now, limit)
	return out, interpret(ctx, "Index.DueBefore", err)
}

func (x *Index) dueBefore(ctx context.Context, now time.Time, limit int) ([]duework.Entry, error) {
	hashes := make([]string, x.buckets)
	for b := range hashes {
		hashes[b] = dueKey(b)
	}
	mg := newMerge(x.d, idxDueUsers, attrDueKey, attrDueSK, hashes, "<", after1(now), min(limit, 100))
	var out []duework.Entry
	var h dueHeap
	var pending *mergeItem
	for len(out) < limit {
		for {
			if pending == nil {
				it, ok, err := mg.next(ctx)
				if err != nil {
					return nil, err
				}
				if !ok {
					break
				}
				pending = &it
			}
			first, err := decTime(pending.sk)
			if err != nil {
				return nil, err
			}
			user := userOf(pending.pk)
			if len(h) > 0 && !before(first, user, h[0].es[0]) {
				break
			}
			es, _, err := x.visible(ctx, user, now, limit-len(out), 0)
			if err != nil {
				return nil, err
			}
			if len(es) > 0 {
				heap.Push(&h, &userDue{es: es})
			}
			pending = nil
		}
		if len(h) == 0 {
			break
		}
		top := h[0]
		out = append(out, top.es[0])
		if top.es = top.es[1:]; len(top.es) == 0 {
			heap.Pop(&h)
		} else {
			heap.Fix(&h, 0)
		}
	}
	return out, nil
}

// before reports whether a user whose entries are due no earlier than first comes before
// entry e in DueBefore's order.
func before(first time.Time, user string, e duework.Entry) bool {
	return cmp.Or(first.Compare(e.DueAt), strings.Compare(user, e.UserID)) < 0
}

// userDue is one user's visible entries not yet returned, in (DueAt, WorkKey) order.
type userDue struct{ es []duework.Entry }

// dueHeap orders users by their next entry, in DueBefore's order.
type dueHeap []*userDue

func (h dueHeap) Len() int { return len(h) }
func (h dueHeap) Less(i, j int) bool {
	a, b := h[i].es[0], h[j].es[0]
	return cmp.Or(a.DueAt.Compare(b.DueAt), strings.Compare(a.UserID, b.UserID), strings.Compare(a.WorkKey, b.WorkKey)) < 0
}
func (h dueHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *dueHeap) Push(v any)   { *h = append(*h, v.(*userDue)) }
func (h *dueHeap) Pop() any {
	old := *h
	v := old[len(old)-1]
	*h = old[:len(old)-1]
	return v
}
