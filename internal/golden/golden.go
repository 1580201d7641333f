// Package golden compares what a test printed with a golden file, the expected output kept
// in the package's testdata, so that an example program's output cannot change unnoticed.
// Run the tests with -update to rewrite the files after an intended change, and read the
// diff before committing it.
package golden

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"os"
	"testing"
)

// update is the -update flag of every test binary that imports the package.
var update = flag.Bool("update", false, "rewrite the golden files from the current output")

// ErrDiffers is returned by Diff when the output is not the golden file's content.
var ErrDiffers = errors.New("golden: output differs")

// Diff returns nil when got is exactly the content of the file at path, an error wrapping
// ErrDiffers that shows both when it is not, and the read's error when the file cannot be
// read.
func Diff(path string, got []byte) error {
	want, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("golden: %w (go test -update writes it)", err)
	}
	if !bytes.Equal(got, want) {
		return fmt.Errorf("%w from %s (go test -update rewrites it):\n--- got\n%s\n--- want\n%s", ErrDiffers, path, got, want)
	}
	return nil
}

// Check fails tb unless got is exactly the content of the golden file at path. Under
// -update it first writes got to path.
func Check(tb testing.TB, path string, got []byte) {
	tb.Helper()
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			tb.Fatal(err)
		}
	}
	if err := Diff(path, got); err != nil {
		tb.Error(err)
	}
}
