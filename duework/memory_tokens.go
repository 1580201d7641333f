package duework

import "iter"

// tokenPageBits sets a tokenPages page: 1 << tokenPageBits consecutive tokens.
const tokenPageBits = 8

// tokenPages finds each current claim's ticket by its token. Tokens are handed out in
// order, so it keeps them in pages of 256 consecutive tokens, found by a map from the
// token's page number: a new claim's ticket goes into the newest page, which stays in
// the caches while claims are made, and a page is let go once its last claim has ended.
// Finding, adding or removing a ticket costs one look-up in a map of pages and one index,
// where a map of claims by token would probe a table as large as the claims in flight. A
// page costs 2 KB, so a claim that stays current while the next 255 tokens end keeps 2 KB
// alive on its own; dense claims cost 8 bytes each, and one emptied page is kept for the
// next.
type tokenPages struct {
	pages map[uint64]*tokenPage
	// last caches the newest page looked up, which most adds and many look-ups fall on.
	last   *tokenPage
	lastNo uint64
	// spare is the last page let go, empty, for the next new page: claims made and ended
	// in turn allocate no page.
	spare *tokenPage
}

// tokenPage is the tickets of 256 consecutive tokens and how many it holds.
type tokenPage struct {
	slot [1 << tokenPageBits]*ticket
	n    int
}

func (tp *tokenPages) page(token uint64) *tokenPage {
	no := token >> tokenPageBits
	if tp.last != nil && tp.lastNo == no {
		return tp.last
	}
	p := tp.pages[no]
	if p != nil {
		tp.last, tp.lastNo = p, no
	}
	return p
}

// get returns the ticket filed under token, or nil.
func (tp *tokenPages) get(token uint64) *ticket {
	if p := tp.page(token); p != nil {
		return p.slot[token&(1<<tokenPageBits-1)]
	}
	return nil
}

// put files t under its token, which holds no ticket.
func (tp *tokenPages) put(t *ticket) {
	p := tp.page(t.token)
	if p == nil {
		if tp.pages == nil {
			tp.pages = map[uint64]*tokenPage{}
		}
		p, tp.spare = tp.spare, nil
		if p == nil {
			p = new(tokenPage)
		}
		no := t.token >> tokenPageBits
		tp.pages[no] = p
		tp.last, tp.lastNo = p, no
	}
	p.slot[t.token&(1<<tokenPageBits-1)] = t
	p.n++
}

// remove takes out the ticket filed under token, which holds one, and lets its page go
// when it was the page's last.
func (tp *tokenPages) remove(token uint64) {
	p := tp.page(token)
	p.slot[token&(1<<tokenPageBits-1)] = nil
	p.n--
	if p.n == 0 {
		no := token >> tokenPageBits
		delete(tp.pages, no)
		if tp.last == p {
			tp.last = nil
		}
		tp.spare = p // every slot is nil again
	}
}

// all yields every filed ticket with its token.
func (tp *tokenPages) all() iter.Seq2[uint64, *ticket] {
	return func(yield func(uint64, *ticket) bool) {
		for no, p := range tp.pages {
			for i, t := range p.slot {
				if t != nil && !yield(no<<tokenPageBits|uint64(i), t) {
					return
				}
			}
		}
	}
}
