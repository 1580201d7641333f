// Package repocheck holds the tests of the repository as a whole, across every module:
//
//   - its module layout: go.work replaces exactly the rota versions the nested modules
//     require, and each nested module builds and vets outside the workspace, from its own
//     go.mod and go.sum, with only the rota modules it requires pointed at this checkout;
//   - the mechanical conventions of CONTRIBUTING.md: no function outside tests and
//     examples longer than 80 lines; in the comments and strings of non-test code and in
//     every Markdown document (code spans and blocks aside), no reference to decision
//     records, the design document or rule numbers, and no words about how the project
//     was made rather than what it does (design records, working sessions, bars to meet,
//     the issues that asked for it); and no go.mod that replaces a rota module with a
//     local directory.
package repocheck

import (
	"os"
	"path/filepath"
	"testing"
)

// rotaModule is the module path of the core; the nested modules' paths extend it.
const rotaModule = "github.com/rotaworks/rota"

// repoRoot returns the directory of the root module: the nearest one above the test's
// working directory that holds a go.mod.
func repoRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the test's directory")
		}
		dir = parent
	}
}
