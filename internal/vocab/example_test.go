package vocab_test

import (
	"errors"
	"fmt"
	"time"

	"github.com/rotaworks/rota/internal/vocab"
)

// Each package passes its own sentinel, so callers see that package's error with the
// shared rule's words.
func Example() {
	errInvalid := errors.New("mypkg: invalid input")
	for _, name := range []string{"hot", "hot ", "a\u200bb", ""} {
		fmt.Println(vocab.Name(errInvalid, "Tier", name))
	}
	fmt.Println(vocab.Time(errInvalid, "DueAt", time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)))
	fmt.Println(vocab.Limit(errInvalid, "Users", 0))
	// Output:
	// <nil>
	// mypkg: invalid input: Tier "hot " ends with white space U+0020
	// mypkg: invalid input: Tier "a\u200bb" contains format character U+200B
	// mypkg: invalid input: Tier is empty
	// mypkg: invalid input: DueAt 10000-01-01T00:00:00Z is outside years 1 to 9999 UTC
	// mypkg: invalid input: Users must be in [1, 1048576], got 0
}
