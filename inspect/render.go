package inspect

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"html/template"
	"log/slog"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

//go:embed templates/*.html templates/style.css
var files embed.FS

// style is the pages' stylesheet, inlined in each page; styleHash allows it, and nothing
// else, in the Content-Security-Policy.
var (
	style     = template.CSS(mustRead("templates/style.css"))
	styleHash = sha256.Sum256([]byte(style))
	csp       = "default-src 'none'; style-src 'sha256-" + base64.StdEncoding.EncodeToString(styleHash[:]) +
		"'; img-src data:; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
)

func mustRead(name string) string {
	b, err := files.ReadFile(name)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// templates holds one template set per page, each the layout with the page's body.
var templates = func() map[string]*template.Template {
	funcs := template.FuncMap{
		"dur": humanSeconds, "ts": timestamp, "laneHref": laneHref, "tenantHref": tenantHref,
		"chart": chartHTML, "wideChart": wideChartHTML, "lastCycle": lastCycle, "limits": limitsText, "flash": flashText, "pageHref": pageHref,
		"rooted": func(root string, v any) rooted { return rooted{Root: root, V: v} },
	}
	out := map[string]*template.Template{}
	for _, name := range []string{"overview", "lane", "tenant", "paused", "maintenance", "error"} {
		out[name] = template.Must(template.New("layout.html").Funcs(funcs).ParseFS(files, "templates/layout.html", "templates/"+name+".html"))
	}
	return out
}()

// rooted hands a shared template its data V and the page's Root, for its links.
type rooted struct {
	Root string
	V    any
}

// pageData is what the layout renders.
type pageData struct {
	Title   string
	Root    string // the relative path from the page to the Inspector's root: "./" or "../"
	Now     time.Time
	Refresh int
	Style   template.CSS
	Query   url.Values
	View    any
}

// render writes p's page with status.
func (i *Inspector) render(w http.ResponseWriter, r *http.Request, status int, p page) {
	d := pageData{Title: p.title, Root: rootOf(r), Now: i.clock.Now().UTC(), Style: style, Query: r.URL.Query(), View: p.view}
	if n, err := strconv.Atoi(r.URL.Query().Get("refresh")); err == nil && n >= 5 && n <= 3600 {
		d.Refresh = n
	}
	var buf bytes.Buffer
	if err := templates[p.name].Execute(&buf, d); err != nil {
		header(w, "text/plain; charset=utf-8")
		w.WriteHeader(http.StatusInternalServerError)
		fmt.Fprintln(w, i.withhold(r.Context(), slog.LevelError, "rendering the "+p.name+" page", err))
		return
	}
	header(w, "text/html; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

// writeJSON writes v as indented JSON with status.
func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		status, b = http.StatusInternalServerError, []byte(`{"error": "inspect: encoding the response failed"}`)
	}
	header(w, "application/json; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}

// header sets the headers of every response.
func header(w http.ResponseWriter, contentType string) {
	h := w.Header()
	h.Set("Content-Type", contentType)
	h.Set("Content-Security-Policy", csp)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "same-origin")
	h.Set("Cache-Control", "no-store")
}

// rootOf is the relative path from r's page to the Inspector's root, so that links work
// wherever the host mounts the Inspector (under http.StripPrefix).
func rootOf(r *http.Request) string {
	depth := strings.Count(r.URL.EscapedPath(), "/") - 1
	if depth <= 0 {
		return "./"
	}
	return strings.Repeat("../", depth)
}

// segment is id as one path segment: percent-encoded, and "" for "." and "..", which no
// path segment can carry.
func segment(id string) string {
	if id == "." || id == ".." {
		return ""
	}
	return url.PathEscape(id)
}

// laneHref and tenantHref link from a page at root to a lane's and a tenant's page.
func laneHref(root, lane string) string { return href(root, "lanes/", lane) }

func tenantHref(root, id string) string { return href(root, "tenants/", id) }

func href(root, dir, id string) string {
	if s := segment(id); s != "" {
		return root + dir + s
	}
	return root + dir + "?" + url.Values{"id": {id}}.Encode()
}

// pageHref links to the next page of the list at base: the request's query q with after
// set (and the action's outcome dropped).
func pageHref(base string, q url.Values, after string) string {
	next := url.Values{}
	for k, v := range q {
		if k != "id" && k != "done" && k != "key" {
			next[k] = v
		}
	}
	next.Set("after", after)
	return addQuery(base, next)
}

// humanSeconds writes a measured duration in seconds the way an operator reads it, to a
// precision that suits its size and never as 0s unless it is: 0s, 350µs, 3ms, 420ms, 1.5s,
// 42s, 4m12s, 3h05m, 2d04h.
func humanSeconds(s float64) string {
	d := time.Duration(s * float64(time.Second))
	switch {
	case d <= 0:
		return "0s"
	case d < time.Millisecond:
		return max(d.Round(time.Microsecond), time.Microsecond).String()
	case d < time.Second-time.Millisecond/2:
		return fmt.Sprintf("%dms", d.Round(time.Millisecond)/time.Millisecond)
	case d < time.Minute-time.Second/20:
		if d = d.Round(time.Second / 10); d%time.Second == 0 {
			return fmt.Sprintf("%ds", d/time.Second)
		}
		return fmt.Sprintf("%.1fs", d.Seconds())
	}
	d = d.Round(time.Second)
	switch {
	case d < time.Hour:
		return fmt.Sprintf("%dm%02ds", int(d/time.Minute), int(d%time.Minute/time.Second))
	case d < 24*time.Hour:
		return fmt.Sprintf("%dh%02dm", int(d/time.Hour), int(d%time.Hour/time.Minute))
	default:
		return fmt.Sprintf("%dd%02dh", int(d/(24*time.Hour)), int(d%(24*time.Hour)/time.Hour))
	}
}

// lastCycle is the latest of a lane's cycles, nil when there are none.
func lastCycle(cycles []laneCycleJSON) *laneCycleJSON {
	if len(cycles) == 0 {
		return nil
	}
	return &cycles[len(cycles)-1]
}

// timestamp is t in UTC to the second, "—" for the zero time.
func timestamp(t time.Time) string {
	if t.IsZero() {
		return "—"
	}
	return t.UTC().Format("2006-01-02 15:04:05Z")
}

// exactText writes a configured duration exactly, without the zero units time.Duration's
// String ends with: 200ms, 1.5s, 90s as 1m30s, 1h.
func exactText(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// limitsText says what limits mean, "none" for the zero Limits.
func limitsText(l limitsJSON) string {
	var parts []string
	if l.Weight > 1 {
		parts = append(parts, fmt.Sprintf("weight %d", l.Weight))
	}
	if l.MaxInFlight > 0 {
		parts = append(parts, fmt.Sprintf("at most %d in flight", l.MaxInFlight))
	}
	if l.EverySeconds > 0 {
		every := time.Duration(math.Round(l.EverySeconds * float64(time.Second)))
		parts = append(parts, fmt.Sprintf("%d at once, then one per %s", max(l.Burst, 1), exactText(every)))
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

// flashText says how an action ended, from the tenant page's ?done= and ?key=; "" for an
// unknown outcome.
func flashText(q url.Values) string {
	key := q.Get("key")
	switch q.Get("done") {
	case outcomeScheduled:
		return fmt.Sprintf("Entry %q is due now: it runs at the tenant's next turn in its lane.", key)
	case outcomeAlreadyDue:
		return fmt.Sprintf("Entry %q was already due: nothing changed.", key)
	case outcomeClaimed:
		return fmt.Sprintf("Refused: entry %q is claimed, so it is running now; try again once its claim ends.", key)
	case outcomeNotFound:
		return fmt.Sprintf("Refused: the tenant has no entry %q.", key)
	case outcomeRerouted:
		return "Tenant re-routed: its lane and limits were resolved again."
	case outcomePaused:
		return "Tenant paused: no dispatcher serves it before its pause ends; runs under way run on."
	case outcomeAlreadyPaused:
		return "A pause that ends later stands, and was kept: a pause is never shortened. Resume the tenant first to pause it for less."
	case outcomeResumed:
		return "Tenant resumed: it is served at its next turn in its lane. An entry whose run was pushed back stays due at the pause's end unless made due now."
	case outcomeNotPaused:
		return "The tenant was not paused: nothing changed."
	}
	return ""
}
