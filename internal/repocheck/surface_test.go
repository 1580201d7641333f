package repocheck

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// runtimePackages are the root module's packages a host imports to run rota; the
// conformance-suite packages (duework/indextest and the like) and internal/ are not
// counted.
var runtimePackages = []string{"cadence", "tenancy", "duework", "dispatch", "bridge", "maintenance", "inspect"}

// maxExported is the most names the runtime packages may export in all. It only falls.
const maxExported = 300

// TestSurface counts what the root module's runtime packages export — top-level consts,
// vars, types and funcs, and the methods of exported types, in non-test files — prints the
// count per package, and fails when the total exceeds maxExported.
func TestSurface(t *testing.T) {
	root := repoRoot(t)
	total := 0
	for _, pkg := range runtimePackages {
		names, err := exportedNames(filepath.Join(root, pkg))
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%-12s %3d", pkg, len(names))
		total += len(names)
	}
	t.Logf("%-12s %3d (limit %d)", "total", total, maxExported)
	if total > maxExported {
		t.Errorf("the runtime packages export %d names, more than %d: unexport what no host needs", total, maxExported)
	}
}

// exportedNames returns the exported names the non-test Go files of the package in dir
// declare: Name for a top-level const, var, type or func, Type.Method for an exported
// method of an exported type.
func exportedNames(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	fset := token.NewFileSet()
	var names []string
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, name), nil, parser.SkipObjectResolution)
		if err != nil {
			return nil, err
		}
		names = append(names, declaredExported(f)...)
	}
	return names, nil
}

// declaredExported returns the exported names one file declares at top level.
func declaredExported(f *ast.File) []string {
	var names []string
	for _, decl := range f.Decls {
		switch d := decl.(type) {
		case *ast.FuncDecl:
			if !d.Name.IsExported() {
				continue
			}
			if d.Recv == nil || len(d.Recv.List) == 0 {
				names = append(names, d.Name.Name)
			} else if recv := recvTypeName(d.Recv.List[0].Type); ast.IsExported(recv) {
				names = append(names, recv+"."+d.Name.Name)
			}
		case *ast.GenDecl:
			for _, spec := range d.Specs {
				switch s := spec.(type) {
				case *ast.TypeSpec:
					if s.Name.IsExported() {
						names = append(names, s.Name.Name)
					}
				case *ast.ValueSpec:
					for _, n := range s.Names {
						if n.IsExported() {
							names = append(names, n.Name)
						}
					}
				}
			}
		}
	}
	return names
}

func TestDeclaredExported(t *testing.T) {
	src := `package x

const (
	A, b = 1, 2
	C    = 3
)

var D, e int

type T struct{ F int }
type u struct{}

func (T) M()      {}
func (*T) n()     {}
func (u) N()      {}
func (*G[K]) P()  {}
func Q()          {}
func r()          {}

type G[K any] struct{}
`
	f, err := parser.ParseFile(token.NewFileSet(), "x.go", src, parser.SkipObjectResolution)
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Join(declaredExported(f), " ")
	if want := "A C D T T.M G.P Q G"; got != want {
		t.Errorf("declaredExported = %q, want %q", got, want)
	}
}
