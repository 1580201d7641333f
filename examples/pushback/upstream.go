package main

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// upstream stands in for the API the tenants' sources are polled through, on the
// simulated clock: an http.RoundTripper that answers every GET /TENANT/SOURCE itself,
// without a network. Each tenant has its own account there:
//   - an account with a quota may make so many calls an hour (windows on the hour); once
//     they are spent it is answered 429 Too Many Requests, with Retry-After the seconds
//     left until the next hour;
//   - a source whose credentials are revoked, from a time until another, is answered 401
//     Unauthorized;
//   - every other call is answered 200.
type upstream struct {
	quota   map[string]int    // calls an hour, by tenant; absent: no quota
	revoked map[string]period // by "tenant/source"

	mu     sync.Mutex
	now    time.Time
	window map[string]time.Time // the hour each tenant's calls are counted in
	calls  map[string]int       // the calls each tenant made in it
}

// period is [from, to).
type period struct{ from, to time.Time }

func newUpstream(quota map[string]int, revoked map[string]period) *upstream {
	return &upstream{quota: quota, revoked: revoked, window: map[string]time.Time{}, calls: map[string]int{}}
}

// set moves the upstream's clock to now.
func (u *upstream) set(now time.Time) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.now = now
}

// RoundTrip answers req as the upstream's rules say.
func (u *upstream) RoundTrip(req *http.Request) (*http.Response, error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	tenant, source, ok := strings.Cut(strings.TrimPrefix(req.URL.Path, "/"), "/")
	if !ok || req.Method != http.MethodGet {
		return u.answer(req, http.StatusNotFound, nil), nil
	}
	if p, ok := u.revoked[tenant+"/"+source]; ok && !u.now.Before(p.from) && u.now.Before(p.to) {
		return u.answer(req, http.StatusUnauthorized, nil), nil
	}
	if limit, ok := u.quota[tenant]; ok {
		hour := u.now.Truncate(time.Hour)
		if !u.window[tenant].Equal(hour) {
			u.window[tenant], u.calls[tenant] = hour, 0
		}
		if u.calls[tenant] >= limit {
			left := hour.Add(time.Hour).Sub(u.now)
			return u.answer(req, http.StatusTooManyRequests, http.Header{"Retry-After": {strconv.Itoa(int(left.Seconds()))}}), nil
		}
		u.calls[tenant]++
	}
	return u.answer(req, http.StatusOK, nil), nil
}

// answer is a response to req with code and h, dated at the upstream's now. u.mu is held.
func (u *upstream) answer(req *http.Request, code int, h http.Header) *http.Response {
	if h == nil {
		h = http.Header{}
	}
	h.Set("Date", u.now.Format(http.TimeFormat))
	return &http.Response{
		Status:     fmt.Sprintf("%d %s", code, http.StatusText(code)),
		StatusCode: code, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: h, Body: http.NoBody, Request: req,
	}
}
