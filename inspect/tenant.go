package inspect

import (
	"context"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/rotaworks/rota/duework"
	"github.com/rotaworks/rota/internal/vocab"
)

// tenantView builds the tenant page of userID at now: one Index.User and one Index.Entries
// of limit+1 entries after the work key after. It returns an error wrapping
// duework.ErrNotFound for a user the index does not store.
func (i *Inspector) tenantView(ctx context.Context, now time.Time, userID, after string, limit int) (tenantJSON, error) {
	st, err := i.idx.User(ctx, userID, now)
	if err != nil {
		return tenantJSON{}, &storeError{"reading the tenant", err}
	}
	es, err := i.idx.Entries(ctx, userID, after, limit+1)
	if err != nil {
		return tenantJSON{}, &storeError{"reading the tenant's entries", err}
	}
	v := tenantJSON{Now: utc(now), UserID: userID, Group: st.Group, Limits: limitsOf(st.Limits),
		LastServed: utc(st.LastServed), Turn: utc(st.Turn), HeldUntil: utc(st.HeldUntil), InFlight: st.InFlight,
		PausedUntil: utc(st.PausedUntil), PauseReason: st.PauseReason, PauseLeft: since(st.PausedUntil, now),
		After: after, Entries: make([]entryJSON, 0, min(len(es), limit)), Actions: i.actions}
	if i.laneIndex(st.Group) >= 0 {
		v.Lane = st.Group
	}
	// At its cap the tenant is not ready, and its Turn is when a claim's end would free a
	// slot; a run that completes frees one sooner.
	v.AtInFlightCap = st.Limits.MaxInFlight > 0 && st.InFlight >= st.Limits.MaxInFlight
	if !st.Turn.IsZero() && !st.Turn.After(now) {
		v.Ready, v.WaitedSeconds = true, since(now, st.Turn)
	}
	if len(es) > limit {
		es = es[:limit]
		v.Next = es[limit-1].Entry.WorkKey
	}
	for _, e := range es {
		v.Entries = append(v.Entries, i.entryOf(e, now))
	}
	v.UnroutedReason = i.unroutedReason(userID)
	if a, ok := i.lateAlarmOf(userID); ok {
		v.LateAlarm = lateAlarmOf(a)
	}
	return v, nil
}

// unroutedReason is why the latest cycle could not route userID, "" when it did not say.
func (i *Inspector) unroutedReason(userID string) string {
	i.mu.Lock()
	defer i.mu.Unlock()
	if i.cycles.n == 0 {
		return ""
	}
	for _, u := range i.cycles.at(i.cycles.n - 1).unrouted {
		if u.userID == userID {
			return u.reason
		}
	}
	return ""
}

// lookupPage is how many entries each Entries call of entry reads.
const lookupPage = 8

// entry returns userID's entry workKey with its claim, or an error wrapping
// duework.ErrNotFound. The Index reads entries only in pages after a work key, so it reads
// from keyBefore(workKey), the greatest valid work key below workKey: one call, whatever
// the tenant's entries.
func (i *Inspector) entry(ctx context.Context, userID, workKey string) (duework.EntryState, error) {
	after := keyBefore(workKey)
	for {
		es, err := i.idx.Entries(ctx, userID, after, lookupPage)
		if err != nil {
			return duework.EntryState{}, err
		}
		for _, e := range es {
			switch c := strings.Compare(e.Entry.WorkKey, workKey); {
			case c == 0:
				return e, nil
			case c > 0:
				return duework.EntryState{}, fmt.Errorf("inspect: entry %q of %q: %w", workKey, userID, duework.ErrNotFound)
			}
		}
		if len(es) < lookupPage {
			return duework.EntryState{}, fmt.Errorf("inspect: entry %q of %q: %w", workKey, userID, duework.ErrNotFound)
		}
		after = es[len(es)-1].Entry.WorkKey
	}
}

// keyBefore returns the greatest valid work key (the shared name rule) that sorts
// bytewise before key, or "" when there is none: Index.Entries(after = keyBefore(key))
// then starts at key itself, if the tenant has it. key must be valid.
func keyBefore(key string) string {
	for key != "" {
		r, size := utf8.DecodeLastRuneInString(key)
		prefix := key[:len(key)-size]
		for c := r - 1; c >= 0; c-- {
			if c >= 0xD800 && c <= 0xDFFF { // surrogates have no encoding
				c = 0xD800
				continue
			}
			s := prefix + string(c) + maxTail(vocab.MaxNameLength-len(prefix)-utf8.RuneLen(c))
			if vocab.ValidName(s) {
				return s
			}
			// Invalid whatever follows c: a control or format character, or white space
			// that would begin the key or end it.
		}
		// No rune below r can stand here: the nearest key below is prefix, or below it.
		if prefix == "" || vocab.ValidName(prefix) {
			return prefix
		}
		key = prefix
	}
	return ""
}

// maxTail is the bytewise greatest valid UTF-8 text of at most n bytes that may end a key.
func maxTail(n int) string {
	tail := strings.Repeat("\U0010FFFF", n/4)
	switch n % 4 {
	case 3:
		tail += "\uFFFF"
	case 2:
		tail += "\u07FF"
	case 1:
		tail += "~"
	}
	return tail
}
