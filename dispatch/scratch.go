package dispatch

import (
	"context"
	"time"

	"github.com/rotaworks/rota/duework"
	"github.com/rotaworks/rota/internal/reuse"
)

// scratch is a cycle's working memory, which no Batch it returns refers to: the pages its
// lanes read, its choice, the keys it claims and the claims (its Batch copies them). A
// Dispatcher keeps the scratch of its last cycle for the next, so that a steady stream of
// cycles reuses it instead of allocating pages and claims each time; cycles that run at
// once each have their own.
type scratch struct {
	heads  [][]duework.Head // per lane, its page's heads
	due    []duework.Entry  // every page's Due entries
	pages  []duework.Head   // every page's heads
	keys   []duework.Key
	claims []duework.Claim
	at     []int  // pairClaims' result
	served []bool // per head read, whether Claim claimed for it
	choose chooseMem
}

// maxKept is the most heads, entries, keys or claims of a scratch that a Dispatcher keeps
// for its next cycle; a cycle that needed more lets its memory go. At 16,384 of each, a
// Dispatcher keeps at most about 7 MB.
const maxKept = 1 << 14

// getScratch returns the Dispatcher's kept scratch, or a new one.
func (d *Dispatcher) getScratch() *scratch {
	if s := d.spare.Swap(nil); s != nil {
		return s
	}
	return new(scratch)
}

// putScratch empties s, so that it keeps no strings alive, and keeps it for the next cycle.
func (d *Dispatcher) putScratch(s *scratch) {
	if max(cap(s.pages), cap(s.due), cap(s.keys), cap(s.claims), cap(s.choose.backing)) > maxKept {
		return
	}
	clear(s.heads)
	clear(s.pages)
	clear(s.due)
	clear(s.keys)
	clear(s.claims)
	s.pages, s.due, s.keys, s.claims = s.pages[:0], s.due[:0], s.keys[:0], s.claims[:0]
	d.spare.Store(s)
}

// The appending read and claim of duework.Memory (see internal/reuse).
var (
	memoryReady = reuse.AppendReady.(func(*duework.Memory, context.Context, *[]duework.Head, *[]duework.Entry, duework.ReadyQuery) (duework.ReadyPage, error))
	memoryClaim = reuse.AppendClaim.(func(*duework.Memory, context.Context, []duework.Claim, []duework.Key, time.Time, time.Time) ([]duework.Claim, error))
)

// ready reads one page for the cycle: into the cycle's scratch when the Index is a
// duework.Memory, so that the page lives until the cycle ends.
func (c *cycle) ready(q duework.ReadyQuery) (duework.ReadyPage, error) {
	if m := c.d.memory; m != nil {
		return memoryReady(m, c.ctx, &c.s.pages, &c.s.due, q)
	}
	return c.d.idx.Ready(c.ctx, q)
}

// claimKeys claims keys until until for the cycle: into the cycle's scratch when the Index
// is a duework.Memory.
func (c *cycle) claimKeys(keys []duework.Key, until time.Time) ([]duework.Claim, error) {
	if m := c.d.memory; m != nil {
		claims, err := memoryClaim(m, c.ctx, c.s.claims[:0], keys, c.now, until)
		c.s.claims = claims
		return claims, err
	}
	return c.d.idx.Claim(c.ctx, keys, c.now, until)
}
