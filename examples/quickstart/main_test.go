package main

import (
	"bytes"
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rotaworks/rota/internal/golden"
)

// The program prints exactly the golden output, so that the first example the package
// doc points a newcomer to cannot silently break. After an intended change:
// go test ./examples/quickstart -update.
func TestQuickstartOutput(t *testing.T) {
	var out bytes.Buffer
	if err := run(context.Background(), &out); err != nil {
		t.Fatalf("run: %v", err)
	}
	golden.Check(t, filepath.Join("testdata", "quickstart.golden"), out.Bytes())
}

// The story the program tells is in its output, whatever the golden file says: the pro
// tenant runs in the paid lane, the free one gets one item a cycle and is shed, a hit
// comes back after the hot tier's 5 minutes and misses back off.
func TestQuickstartShowsTheCycle(t *testing.T) {
	var out bytes.Buffer
	if err := run(context.Background(), &out); err != nil {
		t.Fatal(err)
	}
	s := out.String()
	for _, want := range []string{
		"09:00  scheduled 4 sources",
		"09:05  dispatched 3, shed [ben]",
		"paid lane: ana/jobs hit, due again 09:10",
		"free lane: ben/jobs hit, due again 09:10",
		"paid lane: ana/blog miss, due again 09:15", // first miss: 10 minutes
		"paid lane: ana/blog miss, due again 09:35", // second: 20
		"09:20  dispatched 2",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("output lacks %q:\n%s", want, s)
		}
	}
	if strings.Count(s, "free lane: ben/") != 4 {
		t.Errorf("ben should run exactly once a cycle (free lane, one item per user):\n%s", s)
	}
	var again bytes.Buffer
	if err := run(context.Background(), &again); err != nil || again.String() != s {
		t.Errorf("a second run printed something else (%v):\n%s", err, again.String())
	}
}

// failingWriter refuses every write.
type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, errors.New("disk full") }

// A write that fails is not lost: run returns it.
func TestQuickstartReportsWriteErrors(t *testing.T) {
	if err := run(context.Background(), failingWriter{}); err == nil || !strings.Contains(err.Error(), "disk full") {
		t.Errorf("run on a failing writer: %v, want the write's error", err)
	}
}
