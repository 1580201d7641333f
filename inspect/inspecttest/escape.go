package inspecttest

import (
	"html"
	"net/url"
	"regexp"
	"slices"
	"strings"

	"github.com/rotaworks/rota/duework"
)

// oddIDs need escaping in a path, in HTML or both, and "." and ".." cannot be a path
// segment at all; "a%2Fb" is a tenant of its own beside "a/b".
var oddIDs = []string{"a/b", "a%2Fb", "100%", "<script>alert(1)</script>", "José 日本 ü", ".", "..", "?x=1#y", `"quoted" & 'single'`}

// oddKeys are work keys that need escaping.
var oddKeys = []string{"k/1", "<b>k</b>", "50%", "..", "é", "a b"}

// tenantPath is the JSON path of a tenant's page.
func tenantPath(id string) string {
	if id == "." || id == ".." {
		return "/api/tenants/?" + url.Values{"id": {id}}.Encode()
	}
	return "/api/tenants/" + url.PathEscape(id)
}

var hrefRE = regexp.MustCompile(`href="([^"]*tenants/[^"]*)"`)

func escapedIDs(f *fixture) {
	var routes []duework.Route
	for _, id := range oddIDs {
		f.schedule(duework.Entry{UserID: id, WorkKey: "feed", Tier: "hot", DueAt: at(-60)})
		routes = append(routes, duework.Route{UserID: id, Group: "free"})
	}
	if err := f.st.Index.Route(f.ctx, routes); err != nil {
		f.t.Fatal(err)
	}
	f.clock.set(at(1))
	for _, id := range oddIDs {
		var v tenantJSON
		f.getJSON(tenantPath(id), 200, &v)
		if v.UserID != id || len(v.Entries) != 1 || v.Group != "free" {
			f.errorf("%s addresses %q with %d entries in %q, want %q's one entry in free", tenantPath(id), v.UserID, len(v.Entries), v.Group, id)
		}
		page := f.getHTML(strings.TrimPrefix(tenantPath(id), "/api"), 200)
		if strings.Contains(page, "<script>alert") || !strings.Contains(page, html.EscapeString(id)) {
			f.errorf("the page of %q does not show its ID as escaped text", id)
		}
	}
	// Every tenant link of the lane page leads to the tenant it names.
	page := f.getHTML("/lanes/free", 200)
	if strings.Contains(page, "<script>alert") {
		f.errorf("the lane page holds an unescaped ID:\n%s", page)
	}
	var reached []string
	base, _ := url.Parse(f.srv.URL + "/lanes/free")
	for _, m := range hrefRE.FindAllStringSubmatch(page, -1) {
		u, err := base.Parse(html.UnescapeString(m[1]))
		if err != nil {
			f.fatalf("the lane page links %q: %v", m[1], err)
		}
		var v tenantJSON
		f.getJSON("/api"+u.RequestURI(), 200, &v)
		reached = append(reached, v.UserID)
	}
	slices.Sort(reached)
	want := slices.Sorted(slices.Values(oddIDs))
	if reached = slices.Compact(reached); !slices.Equal(reached, want) {
		f.errorf("the lane page's tenant links reach %q, want %q", reached, want)
	}
	// Due-now addresses the right entry among keys that need escaping, through the API
	// where a path segment can carry the key, and through the form for "..".
	for _, key := range oddKeys {
		f.schedule(duework.Entry{UserID: "a/b", WorkKey: key, Tier: "hot", DueAt: at(3600)})
	}
	f.clock.set(at(10))
	for n, key := range oddKeys {
		if key == ".." {
			f.follow(f.postForm("/actions/due-now", url.Values{"tenant": {"a/b"}, "key": {key}}, nil))
		} else {
			var res actionJSON
			f.postJSON(dueNowPath("a/b", key), nil, 200, &res)
			if res.WorkKey != key || res.UserID != "a/b" {
				f.errorf("due-now on %q answered for %q of %q", key, res.WorkKey, res.UserID)
			}
		}
		for m, other := range oddKeys {
			due := f.get("a/b", other).DueAt
			if moved := due.Equal(at(10)); moved != (m <= n) {
				f.errorf("after due-now on %q, %q is due at %v", key, other, due)
			}
		}
	}
	if due := f.get("a%2Fb", "feed").DueAt; !due.Equal(at(-60)) {
		f.errorf("due-now on a/b's entries moved a%%2Fb's to %v", due)
	}
}
