package inspect_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/rotaworks/rota/dispatch"
	"github.com/rotaworks/rota/duework"
	"github.com/rotaworks/rota/inspect"
	"github.com/rotaworks/rota/tenancy"
)

// fixedClock reads one instant, so the example's output does not change.
type fixedClock time.Time

func (c fixedClock) Now() time.Time { return time.Time(c) }

// requireOperator stands in for the host's own authentication.
func requireOperator(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Operator") == "" {
			http.Error(w, "operators only", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// An Inspector mounted under /ops/rota/ behind the host's authentication, read as JSON: the
// lane that keeps a tenant waiting comes first.
func Example() {
	ctx := context.Background()
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	idx := duework.NewMemory()
	lanes := []dispatch.LaneCapacity{
		{Lane: "pro", PerUserLimit: 5, PerCycleLimit: 100},
		{Lane: "free", PerUserLimit: 1, PerCycleLimit: 10},
	}
	for user, late := range map[string]time.Duration{"acme": 4 * time.Minute, "globex": time.Minute} {
		tc, err := tenancy.NewContext(user)
		if err != nil {
			log.Fatal(err)
		}
		if err := idx.Schedule(ctx, tc, duework.Entry{UserID: user, WorkKey: "feed", Tier: "hot", DueAt: now.Add(-late)}); err != nil {
			log.Fatal(err)
		}
	}
	if err := idx.Route(ctx, []duework.Route{{UserID: "acme", Group: "free"}, {UserID: "globex", Group: "pro"}}); err != nil {
		log.Fatal(err)
	}

	insp, err := inspect.New(inspect.Config{Index: idx, Lanes: lanes, Clock: fixedClock(now)})
	if err != nil {
		log.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/ops/rota/", requireOperator(http.StripPrefix("/ops/rota", insp)))
	srv := httptest.NewServer(mux)
	defer srv.Close()

	req, err := http.NewRequest(http.MethodGet, srv.URL+"/ops/rota/api/", nil)
	if err != nil {
		log.Fatal(err)
	}
	req.Header.Set("X-Operator", "alice")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		log.Fatal(err)
	}
	defer resp.Body.Close()
	var overview struct {
		Lanes []struct {
			Lane        string  `json:"lane"`
			NextUser    string  `json:"next_user"`
			WaitSeconds float64 `json:"wait_seconds"`
		} `json:"lanes"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&overview); err != nil {
		log.Fatal(err)
	}
	for _, l := range overview.Lanes {
		fmt.Printf("%s: %s has waited %v s\n", l.Lane, l.NextUser, l.WaitSeconds)
	}
	// Output:
	// free: acme has waited 240 s
	// pro: globex has waited 60 s
}
