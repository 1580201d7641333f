package inspecttest

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rotaworks/rota/dispatch"
	"github.com/rotaworks/rota/duework"
	"github.com/rotaworks/rota/inspect"
	"github.com/rotaworks/rota/maintenance"
	"github.com/rotaworks/rota/tenancy"
)

// Stores are what one rule's Inspector reads: a fresh, empty Index and StateStore.
type Stores struct {
	Index      duework.Index
	StateStore maintenance.StateStore
}

// Run runs one subtest per rule (see Rules) against an Inspector over the stores newStores
// returns, fresh for each rule, through an httptest.Server: every view as HTML and as
// JSON, and every action.
func Run(t *testing.T, newStores func(t *testing.T) Stores) {
	t.Helper()
	for _, r := range rules {
		t.Run(r.name, func(t *testing.T) {
			st := newStores(t)
			if st.Index == nil || st.StateStore == nil {
				t.Fatal("newStores returned a nil Index or StateStore")
			}
			r.check(newFixture(t, st, r.text))
		})
	}
}

// Rules lists the rules Run checks, one line per subtest: its name, a colon, and the rule
// its failure messages cite.
func Rules() []string {
	out := make([]string, 0, len(rules))
	for _, r := range rules {
		out = append(out, r.name+": "+r.text)
	}
	return out
}

// rule is one subtest.
type rule struct {
	name, text string
	check      func(f *fixture)
}

// t0 is the suite's first instant, in whole seconds so that every store keeps it exactly.
var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// The suite's lanes: pro serves plenty, free two tenants a cycle.
var lanes = []dispatch.LaneCapacity{
	{Lane: "pro", PerUserLimit: 2, PerCycleLimit: 20},
	{Lane: "free", PerUserLimit: 1, PerCycleLimit: 2},
}

// clock is a clock the rules set by hand.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = t
}

// fixture is one rule's world: the stores, a Dispatcher that reports to the Inspector,
// the Inspector with Actions on, and a server for it.
type fixture struct {
	t     *testing.T
	rule  string
	ctx   context.Context
	st    Stores
	clock *clock
	d     *dispatch.Dispatcher
	insp  *inspect.Inspector
	srv   *httptest.Server
	log   *syncBuffer

	mu     sync.Mutex
	laneOf map[string]dispatch.Lane // LaneFor's answers; "free" for anyone else

	// broken, once set, makes every read and write of the Inspector's stores fail (see
	// brokenIndex): the Inspector and the Dispatcher see the stores through it.
	broken atomic.Bool
}

// cycleObserver adapts a function to a dispatch.Observer.
type cycleObserver func(dispatch.CycleInfo)

func (f cycleObserver) ObserveDispatch(c dispatch.CycleInfo) { f(c) }

func newFixture(t *testing.T, st Stores, text string) *fixture {
	f := &fixture{t: t, rule: text, ctx: context.Background(), st: st, clock: &clock{now: t0}, log: &syncBuffer{},
		laneOf: map[string]dispatch.Lane{}}
	var insp *inspect.Inspector
	idx := &brokenIndex{Index: st.Index, broken: &f.broken}
	states := &brokenStateStore{StateStore: st.StateStore, broken: &f.broken}
	d, err := dispatch.New(idx, dispatch.Config{Lanes: lanes, GlobalBatchLimit: 20, ClaimFor: 5 * time.Minute,
		LaneFor: f.laneFor, Observer: cycleObserver(func(c dispatch.CycleInfo) { insp.ObserveDispatch(c) })})
	if err != nil {
		t.Fatal(err)
	}
	f.d = d
	insp, err = inspect.New(inspect.Config{Index: idx, Lanes: lanes, Dispatcher: d, StateStore: states,
		Clock: f.clock, Logger: slog.New(slog.NewTextHandler(f.log, nil)), History: 10, Actions: true})
	if err != nil {
		t.Fatal(err)
	}
	f.insp = insp
	f.srv = httptest.NewServer(insp)
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fixture) laneFor(_ context.Context, userID string) (dispatch.Lane, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if l, ok := f.laneOf[userID]; ok {
		return l, nil
	}
	return "free", nil
}

func (f *fixture) setLane(userID string, l dispatch.Lane) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.laneOf[userID] = l
}

func (f *fixture) errorf(format string, args ...any) {
	f.t.Helper()
	f.t.Errorf("rule %q broken: "+format, append([]any{f.rule}, args...)...)
}

func (f *fixture) fatalf(format string, args ...any) {
	f.t.Helper()
	f.t.Fatalf("rule %q broken: "+format, append([]any{f.rule}, args...)...)
}

// at is t0 + d seconds.
func at(d int) time.Time { return t0.Add(time.Duration(d) * time.Second) }

// schedule writes an entry of user's, failing the test on error.
func (f *fixture) schedule(e duework.Entry) {
	f.t.Helper()
	tc, err := tenancy.NewContext(e.UserID)
	if err != nil {
		f.t.Fatal(err)
	}
	if err := f.st.Index.Schedule(f.ctx, tc, e); err != nil {
		f.t.Fatalf("Schedule(%+v): %v", e, err)
	}
}

// get reads an entry of user's.
func (f *fixture) get(user, key string) duework.Entry {
	f.t.Helper()
	tc, err := tenancy.NewContext(user)
	if err != nil {
		f.t.Fatal(err)
	}
	e, err := f.st.Index.Get(f.ctx, tc, key)
	if err != nil {
		f.t.Fatalf("Get(%q, %q): %v", user, key, err)
	}
	return e
}

// dispatch runs one cycle at now and returns it.
func (f *fixture) dispatch(now time.Time) dispatch.Batch {
	f.t.Helper()
	b, err := f.d.Dispatch(f.ctx, now)
	if err != nil {
		f.t.Fatalf("Dispatch(%v): %v", now, err)
	}
	return b
}

// claim claims one entry at now for ClaimFor d, the way a dispatcher does.
func (f *fixture) claim(user, key string, now time.Time, d time.Duration) duework.Claim {
	f.t.Helper()
	cs, err := f.st.Index.Claim(f.ctx, []duework.Key{{UserID: user, WorkKey: key}}, now, now.Add(d))
	if err != nil || len(cs) != 1 {
		f.t.Fatalf("Claim(%q, %q) = %v, %v; want one claim", user, key, cs, err)
	}
	return cs[0]
}

// response is one answered request.
type response struct {
	status int
	header http.Header
	body   []byte
	url    *url.URL // the request's URL, after redirects
}

// do sends a request to the Inspector's server; path is escaped already. Redirects are
// not followed.
func (f *fixture) do(method, path string, body io.Reader, header map[string]string) response {
	f.t.Helper()
	req, err := http.NewRequest(method, f.srv.URL+path, body)
	if err != nil {
		f.t.Fatal(err)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.Do(req)
	if err != nil {
		f.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		f.t.Fatal(err)
	}
	return response{status: resp.StatusCode, header: resp.Header, body: b, url: req.URL}
}

// getJSON GETs path and decodes its JSON into v, checking the status and content type.
func (f *fixture) getJSON(path string, status int, v any) {
	f.t.Helper()
	r := f.do(http.MethodGet, path, nil, nil)
	f.checkJSON(r, path, status, v)
}

// postJSON POSTs to path and decodes the JSON answer into v, checking the status.
func (f *fixture) postJSON(path string, header map[string]string, status int, v any) {
	f.t.Helper()
	r := f.do(http.MethodPost, path, nil, header)
	f.checkJSON(r, path, status, v)
}

func (f *fixture) checkJSON(r response, path string, status int, v any) {
	f.t.Helper()
	if r.status != status {
		f.fatalf("%s answered %d, want %d: %s", path, r.status, status, r.body)
	}
	if ct := r.header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		f.fatalf("%s has Content-Type %q, want application/json", path, ct)
	}
	if v != nil {
		dec := json.NewDecoder(bytes.NewReader(r.body))
		dec.DisallowUnknownFields()
		if err := dec.Decode(v); err != nil {
			f.fatalf("%s: decoding %s: %v", path, r.body, err)
		}
	}
}

// getHTML GETs path and checks it is an HTML page with status.
func (f *fixture) getHTML(path string, status int) string {
	f.t.Helper()
	r := f.do(http.MethodGet, path, nil, nil)
	if r.status != status {
		f.fatalf("%s answered %d, want %d: %s", path, r.status, status, r.body)
	}
	if ct := r.header.Get("Content-Type"); !strings.HasPrefix(ct, "text/html") {
		f.fatalf("%s has Content-Type %q, want text/html", path, ct)
	}
	return string(r.body)
}

// syncBuffer is a bytes.Buffer safe for the logger's concurrent writes.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
