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

// known lists the violations that existed when this check was written, as
// "check file:function". Each is being fixed on its own branch; the list only shrinks:
// an entry that no longer violates fails TestConventions, so the fix deletes it.
var known = []string{}

// A violation is one place that breaks a convention.
type violation struct {
	check  string // "long", "reference" or "replace"
	at     string // file:function, the file relative to the repository root
	detail string // what is wrong there, with its line
}

func (v violation) key() string { return v.check + " " + v.at }

// TestConventions checks every non-test, non-example Go file and every go.mod of the
// repository and reports each violation not in known, and each entry of known that no
// longer violates.
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

// scanRepo checks the tree under root: every .go file that is not a test and not under an
// examples, testdata, vendor or hidden directory, and every go.mod.
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
				name == "testdata" || name == "vendor" || name == "examples") {
				return filepath.SkipDir
			}
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		switch {
		case name == "go.mod":
			found = append(found, checkGoMod(rel, src)...)
		case strings.HasSuffix(name, ".go") && !strings.HasSuffix(name, "_test.go"):
			vs, err := checkGoFile(rel, src)
			if err != nil {
				return err
			}
			found = append(found, vs...)
		}
		return nil
	})
	return found, err
}

// reference matches what a reader of the code does not have: a decision record, the
// design document, an internal rule number.
var reference = regexp.MustCompile(`\bADRs?\b|DESIGN\.md|(?i:\brules? #?\d+)`)

// checkGoFile reports the functions of one Go file longer than maxFuncLines and every
// reference in its comments and string literals.
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

// references reports each match of reference in text, found at pos.
func references(fset *token.FileSet, rel, owner string, pos token.Pos, text string) []violation {
	var found []violation
	for _, m := range reference.FindAllString(text, -1) {
		found = append(found, violation{"reference", rel + ":" + owner,
			fmt.Sprintf("line %d: %q cites what a reader of the code does not have", fset.Position(pos).Line, m)})
	}
	return found
}

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
