package inspect

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/rotaworks/rota/duework"
	"github.com/rotaworks/rota/internal/vocab"
	"github.com/rotaworks/rota/tenancy"
)

// routes returns the Inspector's handler: the pages, their JSON twins under /api, and the
// actions.
func (i *Inspector) routes() http.Handler {
	mux := http.NewServeMux()
	for _, api := range []bool{false, true} {
		p := ""
		if api {
			p = "/api"
		}
		mux.HandleFunc("GET "+p+"/{$}", i.view(api, i.serveOverview))
		mux.HandleFunc("GET "+p+"/lanes/{lane}", i.view(api, i.serveLane))
		mux.HandleFunc("GET "+p+"/lanes/{$}", i.view(api, i.serveLane))
		mux.HandleFunc("GET "+p+"/tenants/{id}", i.view(api, i.serveTenant))
		if api {
			mux.HandleFunc("GET "+p+"/tenants/{$}", i.view(api, i.serveTenant))
		} else {
			mux.HandleFunc("GET "+p+"/tenants/{$}", i.findTenant)
		}
		mux.HandleFunc("GET "+p+"/paused", i.view(api, i.servePaused))
		mux.HandleFunc("GET "+p+"/maintenance", i.view(api, i.serveMaintenance))
		mux.HandleFunc(p+"/", i.notFound(api))
	}
	cop := http.NewCrossOriginProtection()
	cop.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		i.refuse(w, r, strings.HasPrefix(r.URL.Path, "/api/"), "cross-origin request refused")
	}))
	guard := func(api bool, h http.HandlerFunc) http.Handler {
		checked := cop.Handler(h)
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if !i.actions {
				i.refuse(w, r, api, "actions are off: this inspector is read-only")
				return
			}
			checked.ServeHTTP(w, r)
		})
	}
	mux.Handle("POST /api/tenants/{id}/entries/{key}/due-now", guard(true, i.apiAction("due-now")))
	for _, action := range []string{"reroute", "pause", "resume"} {
		mux.Handle("POST /api/tenants/{id}/"+action, guard(true, i.apiAction(action)))
	}
	for _, action := range []string{"due-now", "reroute", "pause", "resume"} {
		mux.Handle("POST /actions/"+action, guard(false, i.formAction(action)))
	}
	return mux
}

// httpError is an error with the status it answers.
type httpError struct {
	status int
	err    error
}

func (e *httpError) Error() string { return e.err.Error() }
func (e *httpError) Unwrap() error { return e.err }

func badRequest(format string, args ...any) error {
	return &httpError{http.StatusBadRequest, fmt.Errorf(format, args...)}
}

// statusOf is the status an error answers: its own, 500 for a store's, 404 for a missing
// tenant, 400 for bad input, else 500.
func statusOf(err error) int {
	var he *httpError
	var se *storeError
	switch {
	case errors.As(err, &he):
		return he.status
	case errors.As(err, &se):
		return http.StatusInternalServerError
	case errors.Is(err, duework.ErrNotFound):
		return http.StatusNotFound
	case errors.Is(err, duework.ErrInvalid), errors.Is(err, tenancy.ErrInvalidID):
		return http.StatusBadRequest
	}
	return http.StatusInternalServerError
}

// page is what a view hands its template: the template's name and title and the view.
type page struct {
	name, title string
	view        any
}

// viewFunc builds one view at now.
type viewFunc func(r *http.Request, now time.Time) (page, error)

// view serves f as JSON (api) or as its HTML page.
func (i *Inspector) view(api bool, f viewFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		p, err := f(r, i.clock.Now())
		switch {
		case err != nil:
			i.fail(w, r, api, statusOf(err), err)
		case api:
			writeJSON(w, http.StatusOK, p.view)
		default:
			i.render(w, r, http.StatusOK, p)
		}
	}
}

func (i *Inspector) serveOverview(r *http.Request, now time.Time) (page, error) {
	return page{name: "overview", title: "overview", view: i.overview(r.Context(), now)}, nil
}

func (i *Inspector) serveLane(r *http.Request, now time.Time) (page, error) {
	lane := pathOrQuery(r, "lane")
	k := i.laneIndex(lane)
	if k < 0 {
		return page{}, &httpError{http.StatusNotFound, fmt.Errorf("no lane %q is configured", lane)}
	}
	limit, err := limitParam(r)
	if err != nil {
		return page{}, err
	}
	after := 0
	if s := r.URL.Query().Get("after"); s != "" {
		if after, err = strconv.Atoi(s); err != nil || after < 0 {
			return page{}, badRequest("after must be a position in turn order (a whole number ≥ 0), got %q", s)
		}
	}
	if after+limit > maxLaneDepth {
		return page{}, badRequest("after + limit must be at most %d: the lane page reads the lane from its first user", maxLaneDepth)
	}
	v, err := i.laneView(r.Context(), now, k, after, limit)
	return page{name: "lane", title: "lane " + lane, view: v}, err
}

func (i *Inspector) serveTenant(r *http.Request, now time.Time) (page, error) {
	id := pathOrQuery(r, "id")
	if err := tenancy.ValidateID("tenant ID", id); err != nil {
		return page{}, &httpError{http.StatusBadRequest, err}
	}
	limit, err := limitParam(r)
	if err != nil {
		return page{}, err
	}
	after := r.URL.Query().Get("after")
	if after != "" {
		if err := vocab.Name(duework.ErrInvalid, "WorkKey", after); err != nil {
			return page{}, badRequest("after must be a work key: %v", err)
		}
	}
	v, err := i.tenantView(r.Context(), now, id, after, limit)
	if errors.Is(err, duework.ErrNotFound) {
		err = &httpError{http.StatusNotFound, fmt.Errorf("the index has no tenant %q", id)}
	}
	return page{name: "tenant", title: "tenant " + id, view: v}, err
}

// findTenant serves the tenant search form, GET /tenants/?id=: it redirects to the
// tenant's page, or serves it here for an ID that a path segment cannot carry.
func (i *Inspector) findTenant(w http.ResponseWriter, r *http.Request) {
	id := r.URL.Query().Get("id")
	switch href := tenantHref("../", id); {
	case id == "":
		i.fail(w, r, false, http.StatusBadRequest, errors.New("give a tenant ID"))
	case strings.Contains(href, "?"):
		i.view(false, i.serveTenant)(w, r)
	default:
		http.Redirect(w, r, href, http.StatusSeeOther)
	}
}

func (i *Inspector) serveMaintenance(r *http.Request, now time.Time) (page, error) {
	return page{name: "maintenance", title: "maintenance", view: i.maintenanceView(r.Context(), now)}, nil
}

// pathOrQuery is the path segment name, or for the "/lanes/" and "/tenants/" forms the
// query parameter id: the way to address an ID that is "." or "..", which browsers and
// clients resolve away as a path segment.
func pathOrQuery(r *http.Request, name string) string {
	if v := r.PathValue(name); v != "" {
		return v
	}
	return r.URL.Query().Get("id")
}

// limitParam is ?limit=, defaultPage when absent.
func limitParam(r *http.Request) (int, error) {
	s := r.URL.Query().Get("limit")
	if s == "" {
		return defaultPage, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > maxPage {
		return 0, badRequest("limit must be in [1, %d], got %q", maxPage, s)
	}
	return n, nil
}

// act carries out one action on the tenant id (and, for due-now, its entry key); the
// pause action reads its duration from the request's parameter for.
func (i *Inspector) act(r *http.Request, action, id, key string) (int, actionJSON) {
	ctx, now := r.Context(), i.clock.Now()
	switch action {
	case "due-now":
		return i.dueNow(ctx, now, id, key)
	case "pause":
		return i.pause(ctx, now, id, r.FormValue("for"))
	case "resume":
		return i.resume(ctx, now, id)
	case "reroute":
		return i.reroute(ctx, now, id)
	}
	panic("inspect: no action " + action) // routes registers only the four
}

// maxFormBytes bounds a request's body: two IDs of at most tenancy.MaxIDLength bytes and a
// duration, encoded.
const maxFormBytes = 4 << 10

// apiAction serves an action's JSON POST, with the tenant and work key in the path.
func (i *Inspector) apiAction(action string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		r.Body = http.MaxBytesReader(w, r.Body, maxFormBytes)
		status, res := i.act(r, action, r.PathValue("id"), r.PathValue("key"))
		i.logAction(r, status, res)
		writeJSON(w, status, res)
	}
}

// formAction serves the HTML forms' POSTs, with the tenant and work key as form fields:
// it answers 303 to the tenant's page, which says how the action ended.
func (i *Inspector) formAction(action string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		r.Body = http.MaxBytesReader(w, r.Body, maxFormBytes)
		id, key := r.PostFormValue("tenant"), r.PostFormValue("key")
		status, res := i.act(r, action, id, key)
		i.logAction(r, status, res)
		switch status {
		case http.StatusOK, http.StatusNotFound, http.StatusConflict:
			q := url.Values{"done": {res.Outcome}}
			if key != "" {
				q.Set("key", key)
			}
			http.Redirect(w, r, addQuery(tenantHref("../", id), q), http.StatusSeeOther)
		default:
			i.answer(w, r, false, status, res.Error) // withheld already, if it had to be
		}
	}
}

// addQuery appends q to href, which may have a query already.
func addQuery(href string, q url.Values) string {
	if strings.Contains(href, "?") {
		return href + "&" + q.Encode()
	}
	return href + "?" + q.Encode()
}

// notFound answers every path the Inspector does not serve.
func (i *Inspector) notFound(api bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			i.fail(w, r, api, http.StatusMethodNotAllowed, fmt.Errorf("method %s is not allowed here", r.Method))
			return
		}
		i.fail(w, r, api, http.StatusNotFound, fmt.Errorf("no page at %q", r.URL.Path))
	}
}

// refuse answers 403 to an action and logs it.
func (i *Inspector) refuse(w http.ResponseWriter, r *http.Request, api bool, why string) {
	i.logAction(r, http.StatusForbidden, actionJSON{Action: strings.TrimPrefix(r.URL.Path, "/"), Outcome: "refused", Error: why})
	i.answer(w, r, api, http.StatusForbidden, why)
}

// fail answers err with status, as JSON or as the error page. The text of an error that
// answers 500 — a store's, or one the Inspector did not expect — is withheld: the answer
// says what failed and where in the log the error is.
func (i *Inspector) fail(w http.ResponseWriter, r *http.Request, api bool, status int, err error) {
	text := err.Error()
	if status >= http.StatusInternalServerError {
		what := "serving " + r.URL.Path
		if se := (*storeError)(nil); errors.As(err, &se) {
			what = se.what
		}
		text = i.withhold(r.Context(), slog.LevelError, what, err)
	}
	i.answer(w, r, api, status, text)
}

// answer writes text with status, as JSON or as the error page.
func (i *Inspector) answer(w http.ResponseWriter, r *http.Request, api bool, status int, text string) {
	if api {
		writeJSON(w, status, errorJSON{Error: text})
		return
	}
	i.render(w, r, status, page{name: "error", title: http.StatusText(status), view: errorView{Status: status, Text: http.StatusText(status), Error: text}})
}

// errorView is the error page's view.
type errorView struct {
	Status      int
	Text, Error string
}
