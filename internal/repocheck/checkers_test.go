package repocheck

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// funcOf returns the source of a function named name that is lines lines long, from its
// func keyword to its closing brace.
func funcOf(head string, lines int) string {
	return head + " {\n" + strings.Repeat("\tprintln()\n", lines-2) + "}\n"
}

// keys returns the "check file:function" of each violation, in order.
func keys(vs []violation) []string {
	var out []string
	for _, v := range vs {
		out = append(out, v.key())
	}
	return out
}

func TestCheckGoFile(t *testing.T) {
	pkg := func(decls string) string { return "package x\n\n" + decls }
	tests := []struct {
		name string
		src  string
		want []string
	}{
		{"80 lines is the limit", pkg(funcOf("func f()", 80)), nil},
		{"81 lines is too long", pkg(funcOf("func f()", 81)), []string{"long x.go:f"}},
		{"a method is named by its receiver type", pkg("type T[K any] struct{}\n" + funcOf("func (t *T[K]) m()", 81)),
			[]string{"long x.go:T.m"}},
		{"a closure counts toward its function, once",
			pkg("func f() {\n\tg := " + funcOf("func()", 81) + "\tg()\n}\n"), []string{"long x.go:f"}},
		{"a function literal at package level is measured", pkg("var handler = " + funcOf("func()", 81)),
			[]string{"long x.go:handler"}},
		{"a decision record in a type's doc", pkg("// T follows ADR 0022.\ntype T int\n"), []string{"reference x.go:T"}},
		{"DESIGN.md in a string", pkg("func f() string { return \"see DESIGN.md\" }\n"), []string{"reference x.go:f"}},
		{"a rule number in the package doc, any case", "// Package x obeys RULE 8.\npackage x\n",
			[]string{"reference x.go:package"}},
		{"a rule number in a comment inside a function", pkg("func f() {\n\t// Rule 3 applies.\n}\n"),
			[]string{"reference x.go:f"}},
		{"a comment between declarations", pkg("var a int\n\n// rules 1–4\n\nvar b int\n"),
			[]string{"reference x.go:file"}},
		{"words that only look like references", pkg("// Rules apply; CADR and ADRIFT are fine; a rule of thumb.\nvar a int\n"),
			nil},
		{"how the project was made, in the package doc", "// Package x builds on three design records.\npackage x\n",
			[]string{"provenance x.go:package"}},
		{"a session in a string", pkg("func f() string { return \"measured in this session\" }\n"), []string{"provenance x.go:f"}},
		{"a database session is what the code does", pkg("// T ends a forgotten session; it sets idle_in_transaction_session_timeout.\ntype T int\n"), nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := checkGoFile("x.go", []byte(tt.src))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, keys(got)); diff != "" {
				t.Errorf("violations (-want +got):\n%s\nsource:\n%s", diff, tt.src)
			}
		})
	}
}

// Each provenance rule catches how the project was made, and lets through the same words
// where they say what the code does.
func TestProvenance(t *testing.T) {
	tests := []struct {
		text string
		want []string // the matched words, in order
	}{
		{"rota builds on three design records", []string{"design records"}},
		{"the design-record prototype", []string{"design-record"}},
		{"measured in this session; a later session", []string{"session", "session"}},
		{"(three sessions' medians: 1.39×)", []string{"sessions"}},
		{"Re-measured in a third session", []string{"session"}},
		{"a long transaction (a report, a forgotten session)", nil},
		{"the database session's search_path, session pooling, session-level settings", nil},
		{"idle_in_transaction_session_timeout", nil},
		{"1e6 ÷ 1e3 = 1.56× (bar ≤ 2×)", []string{"bar"}},
		{"the 2× bar stays out of reach; the two bars not met", []string{"bar", "bars"}},
		{"| figure | bar | measured |", []string{"bar"}},
		{"its bars and the tooltip that says its figures", nil},
		{"a bar chart of the last cycles; each bar is one cycle", nil},
		{"as issue 24 asks; see issue #26 and issues 23, 25", []string{"issue 24", "issue #26", "issues 23"}},
		{"riverui PR #655 and inngest#4345", []string{"PR #655", "inngest#4345"}},
		{"Where an issue set a bar", []string{"issue", "bar"}},
		{"The issue's target is beyond this issue.", []string{"issue's", "issue"}},
		{"Each Claim issues one statement; Ready issues 2 queries", nil},
		{"a known issue of pgx; open an issue on GitHub", nil},
		{"the heading #re-measured-on-a-second-machine", nil},
	}
	for _, tt := range tests {
		_, got := provenanceIn(tt.text)
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("provenanceIn(%q) (-want +got):\n%s", tt.text, diff)
		}
	}
}

// A Markdown document is checked line by line, each violation at the heading above it;
// code blocks and inline code are not read.
func TestCheckMarkdown(t *testing.T) {
	doc := "# Title\n\nIt builds on three design records.\n\n## Figures\n\n| run | bar |\n\n" +
		"```sh\ngo test # this session's command\n```\n\nNever write `DESIGN.md` or `in this session`.\n\n" +
		"### Re-measured in a third session\n\nSee DESIGN.md.\n"
	got := keys(checkMarkdown("DOC.md", []byte(doc)))
	want := []string{
		"provenance DOC.md:Title",
		"provenance DOC.md:Figures",
		"provenance DOC.md:Re-measured in a third session",
		"reference DOC.md:Re-measured in a third session",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("violations (-want +got):\n%s", diff)
	}
}

func TestCheckGoMod(t *testing.T) {
	tests := []struct {
		name string
		mod  string
		want int // violations
	}{
		{"the core replaced by a parent directory", "replace github.com/rotaworks/rota => ../\n", 1},
		{"a nested module replaced inside a block", "replace (\n\tgithub.com/rotaworks/rota/postgres => ../postgres // dev\n\texample.com/x => ../x\n)\n", 1},
		{"one version replaced by an absolute path", "replace github.com/rotaworks/rota v0.2.0 => /src/rota\n", 1},
		{"a quoted path", "replace \"github.com/rotaworks/rota\" => \"./core\"\n", 1},
		{"a fork on a proxy", "replace github.com/rotaworks/rota => github.com/someone/rota v0.2.1\n", 0},
		{"another module's local replace", "replace example.com/x => ../x\n", 0},
		{"a module whose path only starts like the core's", "replace github.com/rotaworks/rotary => ../rotary\n", 0},
		{"a commented-out replace", "// replace github.com/rotaworks/rota => ../\n", 0},
		{"requires only", "require (\n\tgithub.com/rotaworks/rota v0.2.0\n)\n", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mod := "module example.com/m\n\ngo 1.25.0\n\n" + tt.mod
			if got := checkGoMod("m/go.mod", []byte(mod)); len(got) != tt.want {
				t.Errorf("%d violations, want %d: %v", len(got), tt.want, got)
			}
		})
	}
}

// scanRepo reads only the files the conventions cover: not tests, nothing under testdata or
// hidden directories, only the words of examples, in the root module or a nested one, and
// every Markdown document.
func TestScanRepoSkipsTestsAndExamples(t *testing.T) {
	root := t.TempDir()
	long := "package p\n\n" + funcOf("func f()", 81)
	made := "// Package main was written in this session.\n" + strings.Replace(long, "package p", "package main", 1)
	files := map[string]string{
		"go.mod":                       "module example.com/m\n",
		"p/p.go":                       long,
		"p/p_test.go":                  "// Measured in this session.\n" + long,
		"examples/demo/main.go":        made,
		"p/testdata/x.go":              long,
		"p/testdata/x.md":              "in this session\n",
		".hidden/x.go":                 long,
		".hidden/x.md":                 "in this session\n",
		"nested/go.mod":                "module example.com/m/nested\n\nreplace github.com/rotaworks/rota => ../\n",
		"nested/examples/demo/demo.go": long,
		"nested/README.md":             "# nested\n\nThree sessions' medians.\n",
	}
	for name, src := range files {
		path := filepath.Join(root, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := scanRepo(root)
	if err != nil {
		t.Fatal(err)
	}
	k := keys(got)
	slices.Sort(k)
	want := []string{"long p/p.go:f", "provenance examples/demo/main.go:package", "provenance nested/README.md:nested", "replace nested/go.mod:go.mod"}
	if diff := cmp.Diff(want, k); diff != "" {
		t.Errorf("violations (-want +got):\n%s", diff)
	}
}

// The allow-list only shrinks: an entry whose violation is gone is reported, as is a
// violation it does not list.
func TestAudit(t *testing.T) {
	found := []violation{
		{"long", "a.go:f", "line 1"},
		{"long", "a.go:f", "line 9"}, // the same function twice is still one entry
		{"reference", "b.go:T", "line 3"},
	}
	unexpected, fixed := audit(found, []string{"long a.go:f", "long c.go:g"})
	if diff := cmp.Diff([]string{"reference b.go:T"}, keys(unexpected)); diff != "" {
		t.Errorf("unexpected (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"long c.go:g"}, fixed); diff != "" {
		t.Errorf("fixed (-want +got):\n%s", diff)
	}
}
