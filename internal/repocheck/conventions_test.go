package repocheck

import (
	"bufio"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// maxFuncLines is the longest a function may be, counted from its func keyword to its
// closing brace.
const maxFuncLines = 80

// known lists the violations tolerated for now, as "check file:function"; it is empty,
// and it only shrinks: an entry that no longer violates fails TestConventions.
var known = []string{}

// A violation is one place that breaks a convention.
type violation struct {
	check  string // "long", "reference", "provenance" or "replace"
	at     string // file:function (file:heading in Markdown), the file relative to the repository root
	detail string // what is wrong there, with its line
}

func (v violation) key() string { return v.check + " " + v.at }

// TestConventions checks every non-test Go file, every Markdown document and every go.mod
// of the repository and reports each violation not in known, and each entry of known that
// no longer violates.
func TestConventions(t *testing.T) {
	root := repoRoot(t)
	found, err := scanRepo(root)
	if err != nil {
		t.Fatal(err)
	}
	unexpected, fixed := audit(found, known)
	for _, v := range found {
		if !slices.Contains(unexpected, v) {
			t.Logf("known: %s: %s", v.at, v.detail)
		}
	}
	for _, v := range unexpected {
		t.Errorf("%s: %s", v.at, v.detail)
	}
	for _, k := range fixed {
		t.Errorf("%q no longer violates: delete it from known", k)
	}
}

// audit splits found against the allow-list: the violations it does not list, and the
// entries that match no violation.
func audit(found []violation, allowed []string) (unexpected []violation, fixed []string) {
	seen := map[string]bool{}
	for _, v := range found {
		seen[v.key()] = true
		if !slices.Contains(allowed, v.key()) {
			unexpected = append(unexpected, v)
		}
	}
	for _, k := range allowed {
		if !seen[k] {
			fixed = append(fixed, k)
		}
	}
	return unexpected, fixed
}

// scanRepo checks the tree under root, outside testdata, vendor and hidden directories:
// every .go file that is not a test (under examples, only its words: an example's
// functions may be long), every Markdown file, and every go.mod.
func scanRepo(root string) ([]violation, error) {
	var found []violation
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		name := d.Name()
		if d.IsDir() {
			if rel != "." && (strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") ||
				name == "testdata" || name == "vendor") {
				return filepath.SkipDir
			}
			return nil
		}
		example := rel == "examples" || strings.HasPrefix(rel, "examples/") || strings.Contains(rel, "/examples/")
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		switch {
		case name == "go.mod":
			found = append(found, checkGoMod(rel, src)...)
		case strings.HasSuffix(name, ".md"):
			found = append(found, checkMarkdown(rel, src)...)
		case strings.HasSuffix(name, ".go") && !strings.HasSuffix(name, "_test.go"):
			vs, err := checkGoFile(rel, src)
			if err != nil {
				return err
			}
			for _, v := range vs {
				if !example || v.check != "long" {
					found = append(found, v)
				}
			}
		}
		return nil
	})
	return found, err
}

// reference matches what a reader of the code does not have: a decision record, the
// design document, an internal rule number.
var reference = regexp.MustCompile(`\bADRs?\b|DESIGN\.md|(?i:\brules? #?\d+)`)

// A wordRule is one way of speaking of how the project was made rather than of what it
// does: the words it matches, and the contexts (unless) in which the same words speak of
// what the code does. A match lying inside a match of unless is not a violation.
type wordRule struct {
	what   string
	match  *regexp.Regexp
	unless *regexp.Regexp
}

// provenance lists the ways docs and code must not speak: of the design records the
// project came from, of the working sessions it was built in, of the bars it had to meet
// (a benchmark states its target), and of the issues and pull requests that asked for it.
// The exceptions are the other meanings of the same words: a database or HTTP session, a
// chart's bars, a known issue, the verb ("issues one statement"). Citing the decision
// records themselves (ADR 0022) is a reference: what a reader does not have.
var provenance = []wordRule{
	{what: "a design record", match: regexp.MustCompile(`(?i)\bdesign[- ]records?\b`)},
	{
		what:  "a working session",
		match: regexp.MustCompile(`(?i)\bsessions?\b`),
		unless: regexp.MustCompile(`(?i)\b(database|db|sql|postgres(ql)?|pgx|psql|client|server|http|browser|login|idle|forgotten|open|tls|ssh|user)\s+sessions?\b` +
			`|\bsessions?[- ](pool\w*|variables?|settings?|level|timeouts?|cookies?|tokens?|state)\b`),
	},
	{
		what:  "a bar to meet",
		match: regexp.MustCompile(`(?i)\bbars?\b`),
		unless: regexp.MustCompile(`(?i)\bbars?\s+(charts?|graphs?|plots?)\b` +
			`|\b(charts?|svg|columns?|stacked|inline|tallest|each)\b[^.;:\n]{0,40}\bbars?\b` +
			`|\bbars?\b[^.;:\n]{0,40}\b(charts?|svg|tooltips?|columns?|heights?|widths?|pixels?|px)\b`),
	},
	{
		what:   "a numbered issue or pull request",
		match:  regexp.MustCompile(`(?i)\b(issues?|PRs?|pull requests?)\s+#?\d+\b|\b[a-z][\w.-]*#\d+\b`),
		unless: regexp.MustCompile(`(?i)\bissues?\s+\d+\s+(statements?|quer(y|ies)|round[- ]trips?|calls?|requests?|writes?|reads?|commands?|rows?)\b`),
	},
	{
		what:  "the issue that asked for it",
		match: regexp.MustCompile(`(?i)\bissues?('s)?\b`),
		unless: regexp.MustCompile(`(?i)\b(known|open|file|report|github|tracked|security)\s+(an\s+|the\s+)?issues?\b` +
			`|\bissues?\s+(tracker|page|template)s?\b` +
			`|\bissues?\s+(a|an|one|two|three|the|its|it|no|every|each|all|quer(y|ies)|statements?|commands?|requests?|calls?|writes?|reads?)\b` +
			`|\bissues?\s+#?\d+`), // a numbered issue is the rule above's
	},
}

// provenanceIn returns, in order, what each match of a provenance rule in text says and
// the matched words.
func provenanceIn(text string) (what, words []string) {
	type hit struct {
		at          int
		what, words string
	}
	var hits []hit
	for _, r := range provenance {
		var excused [][]int
		if r.unless != nil {
			excused = r.unless.FindAllStringIndex(text, -1)
		}
	next:
		for _, m := range r.match.FindAllStringIndex(text, -1) {
			for _, e := range excused {
				if e[0] <= m[0] && m[1] <= e[1] {
					continue next
				}
			}
			hits = append(hits, hit{m[0], r.what, text[m[0]:m[1]]})
		}
	}
	slices.SortStableFunc(hits, func(a, b hit) int { return a.at - b.at })
	for _, h := range hits {
		what, words = append(what, h.what), append(words, h.words)
	}
	return what, words
}

// checkGoFile reports the functions of one Go file longer than maxFuncLines and every
// reference and provenance word in its comments and string literals.
func checkGoFile(rel string, src []byte) ([]violation, error) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, rel, src, parser.ParseComments|parser.SkipObjectResolution)
	if err != nil {
		return nil, err
	}
	var found []violation
	long := func(owner string, fn ast.Node) {
		if lines := fset.Position(fn.End()).Line - fset.Position(fn.Pos()).Line + 1; lines > maxFuncLines {
			found = append(found, violation{"long", rel + ":" + owner,
				fmt.Sprintf("line %d: function of %d lines, more than %d", fset.Position(fn.Pos()).Line, lines, maxFuncLines)})
		}
	}
	for _, decl := range f.Decls {
		owner := declName(decl)
		// A function literal counts toward the function around it; only one at package
		// level (var f = func…) is measured on its own.
		var outer token.Pos
		if fd, ok := decl.(*ast.FuncDecl); ok {
			long(owner, fd)
			outer = fd.End()
		}
		ast.Inspect(decl, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.FuncLit:
				if n.Pos() >= outer {
					long(owner, n)
					outer = n.End()
				}
			case *ast.BasicLit:
				if n.Kind == token.STRING {
					found = append(found, references(fset, rel, owner, n.Pos(), n.Value)...)
				}
			}
			return true
		})
	}
	for _, cg := range f.Comments {
		for _, c := range cg.List {
			found = append(found, references(fset, rel, commentOwner(f, c.Pos()), c.Pos(), c.Text)...)
		}
	}
	return found, nil
}

// references reports each match of reference and of a provenance rule in text, found at
// pos.
func references(fset *token.FileSet, rel, owner string, pos token.Pos, text string) []violation {
	return wordViolations(rel+":"+owner, fset.Position(pos).Line, text)
}

// wordViolations reports each match of reference and of a provenance rule in text, which
// starts at line of the file; at is the place to name.
func wordViolations(at string, line int, text string) []violation {
	var found []violation
	for _, m := range reference.FindAllString(text, -1) {
		found = append(found, violation{"reference", at,
			fmt.Sprintf("line %d: %q cites what a reader of the code does not have", line, m)})
	}
	what, words := provenanceIn(text)
	for i := range what {
		found = append(found, violation{"provenance", at,
			fmt.Sprintf("line %d: %q speaks of how the project was made (%s), not of what it does", line, words[i], what[i])})
	}
	return found
}

// checkMarkdown reports every reference and provenance word in one Markdown document,
// each at the heading it stands under ("top" before the first). Code is not read: fenced
// blocks hold commands and output, and a word in an inline code span is named, not used.
func checkMarkdown(rel string, src []byte) []violation {
	var found []violation
	heading, fence := "top", ""
	for i, line := range strings.Split(string(src), "\n") {
		trimmed := strings.TrimSpace(line)
		if fence != "" {
			if strings.HasPrefix(trimmed, fence) {
				fence = ""
			}
			continue
		}
		if strings.HasPrefix(trimmed, "```") || strings.HasPrefix(trimmed, "~~~") {
			fence = trimmed[:3]
			continue
		}
		if h, ok := strings.CutPrefix(trimmed, "#"); ok {
			heading = strings.TrimSpace(strings.TrimLeft(h, "#"))
		}
		found = append(found, wordViolations(rel+":"+heading, i+1, inlineCode.ReplaceAllString(line, "``"))...)
	}
	return found
}

// inlineCode matches a Markdown inline code span of single backticks.
var inlineCode = regexp.MustCompile("`[^`]*`")

// commentOwner names the declaration a comment at pos documents or sits in: the
// declaration whose doc comment or body holds it, "package" for the package doc and
// "file" for any other comment outside declarations.
func commentOwner(f *ast.File, pos token.Pos) string {
	for _, decl := range f.Decls {
		start := decl.Pos()
		switch d := decl.(type) {
		case *ast.FuncDecl:
			if d.Doc != nil {
				start = d.Doc.Pos()
			}
		case *ast.GenDecl:
			if d.Doc != nil {
				start = d.Doc.Pos()
			}
		}
		if start <= pos && pos < decl.End() {
			return declName(decl)
		}
	}
	if pos < f.Package {
		return "package"
	}
	return "file"
}

// declName names a top-level declaration: Func, Type.Method, or the first name a
// const, var or type declaration declares.
func declName(decl ast.Decl) string {
	switch d := decl.(type) {
	case *ast.FuncDecl:
		if d.Recv == nil || len(d.Recv.List) == 0 {
			return d.Name.Name
		}
		return recvTypeName(d.Recv.List[0].Type) + "." + d.Name.Name
	case *ast.GenDecl:
		for _, spec := range d.Specs {
			switch s := spec.(type) {
			case *ast.TypeSpec:
				return s.Name.Name
			case *ast.ValueSpec:
				return s.Names[0].Name
			}
		}
		return d.Tok.String()
	}
	return "?"
}

// recvTypeName is the type name of a method receiver: T for T, *T, T[K] and *T[K].
func recvTypeName(e ast.Expr) string {
	for {
		switch x := e.(type) {
		case *ast.StarExpr:
			e = x.X
		case *ast.IndexExpr:
			e = x.X
		case *ast.IndexListExpr:
			e = x.X
		case *ast.Ident:
			return x.Name
		default:
			return "?"
		}
	}
}

// checkGoMod reports every replace directive of a go.mod that points a rota module at a
// local directory: an importer of the module cannot resolve it.
func checkGoMod(rel string, src []byte) []violation {
	var found []violation
	inBlock := false
	sc := bufio.NewScanner(strings.NewReader(string(src)))
	for line := 1; sc.Scan(); line++ {
		text, _, _ := strings.Cut(sc.Text(), "//")
		fields := strings.Fields(text)
		switch {
		case len(fields) == 0:
			continue
		case inBlock && fields[0] == ")":
			inBlock = false
			continue
		case fields[0] == "replace" && len(fields) == 2 && fields[1] == "(":
			inBlock = true
			continue
		case fields[0] == "replace":
			fields = fields[1:]
		case !inBlock:
			continue
		}
		from, to, err := parseReplace(fields)
		if err != nil {
			found = append(found, violation{"replace", rel + ":go.mod", fmt.Sprintf("line %d: %v", line, err)})
			continue
		}
		if (from == rotaModule || strings.HasPrefix(from, rotaModule+"/")) && isLocalPath(to) {
			found = append(found, violation{"replace", rel + ":go.mod",
				fmt.Sprintf("line %d: replaces %s with the local directory %s, which no importer can resolve; require a released version and let go.work tie the modules together", line, from, to)})
		}
	}
	return found
}

// parseReplace splits the fields of one replacement, "old [version] => new [version]",
// into the old module path and the new path.
func parseReplace(fields []string) (from, to string, err error) {
	arrow := slices.Index(fields, "=>")
	if arrow < 1 || arrow > 2 || arrow == len(fields)-1 || len(fields)-arrow > 3 {
		return "", "", errors.New("malformed replace directive")
	}
	return strings.Trim(fields[0], "\"`"), strings.Trim(fields[arrow+1], "\"`"), nil
}

// isLocalPath reports whether a replacement path is a directory rather than a module
// path, by the go command's rule: it is absolute or starts with ./ or ../.
func isLocalPath(p string) bool {
	return filepath.IsAbs(p) || p == "." || p == ".." ||
		strings.HasPrefix(p, "./") || strings.HasPrefix(p, "../") ||
		strings.HasPrefix(p, `.\`) || strings.HasPrefix(p, `..\`)
}
