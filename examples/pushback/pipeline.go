package main

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/rotaworks/rota/bridge"
	"github.com/rotaworks/rota/tenancy"
)

// poller is the host's pipeline: it polls one source through its tenant's account at the
// upstream API and tells rota what the answer means (see verdict).
type poller struct {
	client *http.Client
	api    string // the upstream's base URL
}

// Run polls e's source. Each poll of the stand-in upstream finds one new item, so every
// run that succeeds is a hit.
func (p *poller) Run(ctx context.Context, tc tenancy.Context, e tenancy.WatchlistEntry) (bridge.Result, error) {
	url := p.api + "/" + tc.UserID() + "/" + e.Slug
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return bridge.Result{}, err
	}
	resp, err := p.client.Do(req)
	if err != nil {
		return bridge.Result{}, err // the network: this source is retried alone
	}
	defer resp.Body.Close()
	if err := verdict("GET "+url, resp); err != nil {
		return bridge.Result{}, err
	}
	item := e.Slug + "@" + resp.Header.Get("Date")
	return bridge.Result{Outcomes: []bridge.Outcome{{ID: item, Stage: "stored"}}}, nil
}

// defaultPause is how long a tenant is paused when its upstream says stop without saying
// for how long.
const defaultPause = time.Minute

// verdict turns the upstream's answer to call ("GET URL") into what rota should do:
//   - nil for a success;
//   - a *bridge.Pushback when the upstream says to stop calling for the tenant: 429 Too
//     Many Requests (for Retry-After, or defaultPause without one), 503 Service
//     Unavailable with Retry-After; none of the tenant's sources is polled before then;
//   - a plain error for anything else, such as 401 for revoked credentials or 404 for a
//     source that is gone: that source alone backs off, by the Bridge's Retry policy.
func verdict(call string, resp *http.Response) error {
	code := resp.StatusCode
	if code < 300 {
		return nil
	}
	err := fmt.Errorf("%s: %s", call, resp.Status)
	after, ok := retryAfter(resp.Header)
	if code == http.StatusTooManyRequests && !ok {
		after, ok = defaultPause, true
	}
	if !ok || code != http.StatusTooManyRequests && code != http.StatusServiceUnavailable {
		return err // this source failed, not the tenant
	}
	return &bridge.Pushback{After: after, Reason: "upstream-" + strconv.Itoa(code), Err: err}
}

// retryAfter reads a Retry-After header in either of its forms: a number of seconds, or
// an HTTP date, measured from the response's own Date so that the two machines' clocks
// need not agree. It reports false when there is none, or it is not in the future.
func retryAfter(h http.Header) (time.Duration, bool) {
	v := h.Get("Retry-After")
	if s, err := strconv.Atoi(v); err == nil {
		return time.Duration(s) * time.Second, s > 0
	}
	at, err := http.ParseTime(v)
	if err != nil {
		return 0, false
	}
	sent, err := http.ParseTime(h.Get("Date"))
	if err != nil {
		return 0, false
	}
	return at.Sub(sent), at.After(sent)
}
