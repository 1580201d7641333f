package repocheck

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// goMod is the part of `go mod edit -json` and `go work edit -json` these tests read.
type goMod struct {
	Module  struct{ Path string }
	Require []modVersion
	Replace []struct{ Old, New modVersion }
	Use     []struct{ DiskPath string }
}

// modVersion is a module path and a version; the version is empty in a replacement by
// a directory.
type modVersion struct{ Path, Version string }

// module is one module of the repository.
type module struct {
	dir string // absolute
	rel string // relative to the repository root, "." for the root module
	mod goMod
}

// TestWorkspace checks go.work against the go.mod files: it uses every module of the
// repository, and every rota module a nested module requires is replaced, at exactly that
// version, by its directory, so the workspace never asks a proxy for an unreleased
// version of its own modules. All those requires name one version: the release the
// modules ship with.
func TestWorkspace(t *testing.T) {
	root := repoRoot(t)
	mods := repoModules(t, root)
	var work goMod
	editJSON(t, root, &work, "work", "edit", "-json", filepath.Join(root, "go.work"))
	for _, problem := range workspaceProblems(work, mods) {
		t.Error(problem)
	}
}

// workspaceProblems lists what TestWorkspace checks, mods[0] being the root module.
func workspaceProblems(work goMod, mods []module) []string {
	var problems []string
	var used []string
	for _, u := range work.Use {
		used = append(used, filepath.Clean(filepath.FromSlash(u.DiskPath)))
	}
	dirOf := map[string]string{} // module path → directory relative to the root
	for _, m := range mods {
		dirOf[m.mod.Module.Path] = m.rel
		if !slices.Contains(used, m.rel) {
			problems = append(problems, fmt.Sprintf("go.work does not use %s (module %s)", m.rel, m.mod.Module.Path))
		}
	}
	versions := map[string][]string{} // version → "module requires path"
	for _, m := range mods[1:] {
		for _, r := range m.mod.Require {
			dir, local := dirOf[r.Path]
			if !local {
				continue
			}
			versions[r.Version] = append(versions[r.Version], m.mod.Module.Path+" requires "+r.Path)
			if !workReplaces(work, r.Path, r.Version, dir) {
				problems = append(problems, fmt.Sprintf("%s requires %s %s, but go.work does not replace that version with ./%s: the workspace would download it",
					m.mod.Module.Path, r.Path, r.Version, filepath.ToSlash(dir)))
			}
		}
	}
	if len(versions) > 1 {
		problems = append(problems, fmt.Sprintf("the nested modules require rota modules at different versions; a release bumps them together: %v", versions))
	}
	return problems
}

// workReplaces reports whether go.work replaces path at version with the directory dir.
func workReplaces(work goMod, path, version, dir string) bool {
	for _, r := range work.Replace {
		if r.Old.Path == path && r.Old.Version == version && r.New.Version == "" &&
			filepath.Clean(filepath.FromSlash(r.New.Path)) == dir {
			return true
		}
	}
	return false
}

// TestNestedModulesOutsideWorkspace builds and vets each nested module the way an importer
// resolves it: GOWORK=off, -mod=readonly, its own go.mod and go.sum, plus (in a copy of its
// go.mod) a replace of each rota module it requires by this checkout. A missing require or
// a stale go.sum fails here though the workspace hides it.
func TestNestedModulesOutsideWorkspace(t *testing.T) {
	if testing.Short() {
		t.Skip("builds every nested module with GOWORK=off (seconds with a warm build cache); skipped under -short")
	}
	root := repoRoot(t)
	mods := repoModules(t, root)
	local := map[string]string{} // module path → absolute directory
	for _, m := range mods {
		local[m.mod.Module.Path] = m.dir
	}
	for _, m := range mods[1:] {
		t.Run(filepath.ToSlash(m.rel), func(t *testing.T) {
			if out, err := buildOutside(t.TempDir(), m, local); err != nil {
				t.Errorf("%v\n%s", err, out)
			}
		})
	}
}

// The check catches what it is for: a go.sum without the checksums the build needs, and a
// go.mod that does not require the module an import needs.
func TestOutsideBuildFailsOnBrokenLayout(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the go command on two broken modules; skipped under -short")
	}
	root := repoRoot(t)
	local := map[string]string{rotaModule: root}
	const mainSrc = `package main

import (
	"github.com/google/go-cmp/cmp"

	"github.com/rotaworks/rota/cadence"
)

func main() { println(cmp.Equal("hot", "hot")) }
`
	const header = "module example.com/broken\n\ngo 1.25.0\n\n"
	rootSum, err := os.ReadFile(filepath.Join(root, "go.sum")) // go-cmp's checksums among them
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, goMod, goSum, want string
	}{
		{"stale go.sum", header + "require (\n\tgithub.com/google/go-cmp v0.7.0\n\tgithub.com/rotaworks/rota v0.2.0\n)\n", "",
			"missing go.sum entry"},
		{"missing require", header + "require github.com/google/go-cmp v0.7.0\n", string(rootSum),
			"module providing package github.com/rotaworks/rota/cadence"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			for name, src := range map[string]string{"go.mod": tt.goMod, "go.sum": tt.goSum, "main.go": mainSrc} {
				if err := os.WriteFile(filepath.Join(dir, name), []byte(src), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			m := module{dir: dir, rel: "broken"}
			editJSON(t, dir, &m.mod, "mod", "edit", "-json")
			out, err := buildOutside(t.TempDir(), m, local)
			if err == nil {
				t.Fatalf("the build of a module with a %s succeeded:\n%s", tt.name, out)
			}
			if !strings.Contains(out, tt.want) {
				t.Errorf("the build failed, but not with %q:\n%s", tt.want, out)
			}
		})
	}
}

// buildOutside runs go build ./... and go vet ./... in m.dir outside the workspace, with a
// copy of m's go.mod and go.sum in tmp that adds a replace of each module of local that m
// requires. It returns the go command's output and an error naming the step that failed.
func buildOutside(tmp string, m module, local map[string]string) (string, error) {
	modFile := filepath.Join(tmp, "go.mod")
	for _, name := range []string{"go.mod", "go.sum"} {
		src, err := os.ReadFile(filepath.Join(m.dir, name))
		if os.IsNotExist(err) && name == "go.sum" {
			continue // a module without dependencies has none
		}
		if err != nil {
			return "", err
		}
		if err := os.WriteFile(filepath.Join(tmp, name), src, 0o644); err != nil {
			return "", err
		}
	}
	steps := [][]string{
		// -o discards the executable a module of one main package would leave in its directory.
		{"build", "-modfile=" + modFile, "-o", os.DevNull, "./..."},
		{"vet", "-modfile=" + modFile, "./..."},
	}
	edit := []string{"mod", "edit"}
	for _, r := range m.mod.Require {
		if dir, ok := local[r.Path]; ok {
			edit = append(edit, "-replace="+r.Path+"="+dir)
		}
	}
	if len(edit) > 2 {
		steps = append([][]string{append(edit, modFile)}, steps...)
	}
	for _, args := range steps {
		cmd := exec.Command("go", args...)
		cmd.Dir = m.dir
		cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=readonly -buildvcs=false")
		if out, err := cmd.CombinedOutput(); err != nil {
			return string(out), fmt.Errorf("GOWORK=off go %s in %s: %w", strings.Join(args, " "), m.rel, err)
		}
	}
	return "", nil
}

// repoModules returns every module of the repository, the root module first: each
// directory that holds a go.mod, outside testdata and hidden directories.
func repoModules(t *testing.T, root string) []module {
	t.Helper()
	var mods []module
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && path != root && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if d.IsDir() || d.Name() != "go.mod" {
			return nil
		}
		dir := filepath.Dir(path)
		rel, err := filepath.Rel(root, dir)
		if err != nil {
			return err
		}
		mods = append(mods, module{dir: dir, rel: rel})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.SortFunc(mods, func(a, b module) int { return strings.Compare(a.rel, b.rel) }) // "." first
	if len(mods) == 0 || mods[0].rel != "." {
		t.Fatalf("no root module in %s", root)
	}
	for i := range mods {
		editJSON(t, mods[i].dir, &mods[i].mod, "mod", "edit", "-json")
	}
	return mods
}

// editJSON runs a go command that prints JSON (go mod edit -json, go work edit -json) in
// dir and decodes its output into v.
func editJSON(t *testing.T, dir string, v any, args ...string) {
	t.Helper()
	cmd := exec.Command("go", args...)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go %s in %s: %v\n%s", strings.Join(args, " "), dir, err, stderr.String())
	}
	if err := json.Unmarshal(out, v); err != nil {
		t.Fatalf("go %s in %s: %v", strings.Join(args, " "), dir, err)
	}
}

// workspaceProblems finds each way go.work and the go.mod files can disagree.
func TestWorkspaceProblems(t *testing.T) {
	const core, pg = rotaModule, rotaModule + "/postgres"
	mod := func(rel, path string, requires ...string) module {
		m := module{rel: rel}
		m.mod.Module.Path = path
		for _, r := range requires {
			p, v, _ := strings.Cut(r, "@")
			m.mod.Require = append(m.mod.Require, modVersion{p, v})
		}
		return m
	}
	work := func(uses []string, replaces ...string) goMod {
		var w goMod
		for _, u := range uses {
			w.Use = append(w.Use, struct{ DiskPath string }{u})
		}
		for _, r := range replaces { // "path@version=dir"
			old, dir, _ := strings.Cut(r, "=")
			p, v, _ := strings.Cut(old, "@")
			w.Replace = append(w.Replace, struct{ Old, New modVersion }{modVersion{p, v}, modVersion{Path: dir}})
		}
		return w
	}
	mods := []module{
		mod(".", core),
		mod("postgres", pg, core+"@v0.2.0", "github.com/jackc/pgx/v5@v5.13.0"),
		mod("bench", "github.com/rotaworks/rota/bench", core+"@v0.2.0", pg+"@v0.2.0"),
	}
	all := []string{".", "./postgres", "./bench"}
	good := []string{core + "@v0.2.0=./", pg + "@v0.2.0=./postgres"}
	tests := []struct {
		name string
		work goMod
		mods []module
		want int
	}{
		{"consistent", work(all, good...), mods, 0},
		{"a module left out of use", work(all[:2], good...), mods, 1},
		{"a required version not replaced", work(all, good[0]), mods, 1},
		{"another version replaced", work(all, core+"@v0.1.0=./", good[1]), mods, 2},
		{"replaced by the wrong directory", work(all, core+"@v0.2.0=./postgres", good[1]), mods, 2},
		{"requires at two versions", work(all, append(good, core+"@v0.3.0=./")...),
			[]module{mods[0], mods[1], mod("bench", "github.com/rotaworks/rota/bench", core+"@v0.3.0")}, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := workspaceProblems(tt.work, tt.mods); len(got) != tt.want {
				t.Errorf("%d problems, want %d: %q", len(got), tt.want, got)
			}
		})
	}
}
