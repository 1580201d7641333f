package golden_test

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/rotaworks/rota/internal/golden"
)

// Diff accepts exactly the file's content and shows both sides otherwise.
func TestDiff(t *testing.T) {
	path := filepath.Join(t.TempDir(), "out.golden")
	if err := os.WriteFile(path, []byte("a\nb\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := golden.Diff(path, []byte("a\nb\n")); err != nil {
		t.Errorf("the same bytes: %v", err)
	}
	for _, got := range []string{"a\nb", "a\nc\n", ""} {
		if err := golden.Diff(path, []byte(got)); !errors.Is(err, golden.ErrDiffers) {
			t.Errorf("%q: %v, want ErrDiffers", got, err)
		}
	}
	if err := golden.Diff(filepath.Join(t.TempDir(), "none"), nil); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a missing file: %v, want fs.ErrNotExist", err)
	}
}

// Check passes on the golden content.
func TestCheck(t *testing.T) {
	path := filepath.Join(t.TempDir(), "out.golden")
	if err := os.WriteFile(path, []byte("ok\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	golden.Check(t, path, []byte("ok\n"))
}

func ExampleDiff() {
	dir, err := os.MkdirTemp("", "golden")
	if err != nil {
		panic(err)
	}
	path := filepath.Join(dir, "hello.golden")
	if err := os.WriteFile(path, []byte("hello\n"), 0o644); err != nil {
		panic(err)
	}
	fmt.Println(golden.Diff(path, []byte("hello\n")))
	fmt.Println(errors.Is(golden.Diff(path, []byte("bye\n")), golden.ErrDiffers))
	if err := os.RemoveAll(dir); err != nil {
		panic(err)
	}
	// Output:
	// <nil>
	// true
}
